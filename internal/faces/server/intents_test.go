package server_test

// Multi-intent discovery and min_confidence abstention through the real gRPC
// server: the answer's shape (intents, for_query, confidence per tool;
// abstained, abstained_intents, min_confidence), validation errors, and the
// authorization gate for every intent.

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
	"github.com/seed0cff8200/cardex/retriever"
)

func f64(v float64) *float64 { return &v }

// bestFor is the top ranked tool of a text discovered as a query alone.
func (e *env) bestFor(t *testing.T, c *pb.Caller, text string) *pb.DiscoveredTool {
	t.Helper()
	res := e.discover(t, &pb.DiscoverToolsRequest{Caller: c, Query: text, TopK: 1, MinConfidence: f64(0)})
	if len(res.GetTools()) != 1 {
		t.Fatalf("%q alone: %d tools, want 1", text, len(res.GetTools()))
	}
	return res.GetTools()[0]
}

// checkShape checks what every tool of an intents answer must say: the
// intents it answers are valid indices in ascending order, every ranked tool
// answers the query or at least one intent, and its confidence is a
// probability.
func checkShape(t *testing.T, res *pb.DiscoverToolsResponse, nIntents int, withQuery bool) {
	t.Helper()
	for _, x := range res.GetTools() {
		n := x.GetCard().GetServer() + "/" + x.GetCard().GetName()
		if !slices.IsSorted(x.GetIntents()) || len(slices.Compact(slices.Clone(x.GetIntents()))) != len(x.GetIntents()) {
			t.Errorf("%s: intents %v not ascending and distinct", n, x.GetIntents())
		}
		for _, i := range x.GetIntents() {
			if i < 0 || int(i) >= nIntents {
				t.Errorf("%s: intent index %d outside [0,%d)", n, i, nIntents)
			}
		}
		if x.GetForQuery() && !withQuery {
			t.Errorf("%s: for_query set for a request without a query", n)
		}
		if !x.GetPinned() && !x.GetForQuery() && len(x.GetIntents()) == 0 {
			t.Errorf("%s: a ranked tool that answers neither the query nor an intent", n)
		}
		if c := x.GetConfidence(); !(c > 0 && c < 1) {
			t.Errorf("%s: confidence %v, want a probability in (0,1)", n, c)
		}
	}
}

func TestDiscoverToolsIntents(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t)})
	c := supportCaller()
	intents := []string{"where is my package", "show the invoice with its line items", "reply to the customer on the ticket"}

	t.Run("intents only", func(t *testing.T) {
		res := e.discover(t, &pb.DiscoverToolsRequest{Caller: c, Intents: intents, TopK: 6})
		checkShape(t, res, len(intents), false)
		if len(res.GetTools()) != 6 || res.GetCandidateCount() != 18 {
			t.Fatalf("%d tools of %d candidates, want 6 of 18: %v", len(res.GetTools()), res.GetCandidateCount(), toolNames(res.GetTools()))
		}
		if res.GetAbstained() || len(res.GetAbstainedIntents()) != 0 || res.GetMinConfidence() != retriever.DefaultMinConfidence {
			t.Errorf("abstained %v %v at min_confidence %v; at the server default (%v) every list here is answered", res.GetAbstained(), res.GetAbstainedIntents(), res.GetMinConfidence(), retriever.DefaultMinConfidence)
		}
		// Fair merge: the first turn is every intent's own best tool, in
		// the intents' order, each scored as that intent alone scores it.
		for i, in := range intents {
			got, want := res.GetTools()[i], e.bestFor(t, c, in)
			if toolNames([]*pb.DiscoveredTool{got})[0] != toolNames([]*pb.DiscoveredTool{want})[0] {
				t.Errorf("#%d is %s; intent %d alone ranks %s first", i+1, fmtTool(got), i, fmtTool(want))
				continue
			}
			if !slices.Contains(got.GetIntents(), int32(i)) {
				t.Errorf("#%d %s answers %v, want intent %d among them", i+1, fmtTool(got), got.GetIntents(), i)
			}
			if got.GetConfidence() != want.GetConfidence() || !protoEqual(got.GetScores(), want.GetScores()) {
				t.Errorf("#%d: confidence %v scores %v; intent alone: %v %v", i+1, got.GetConfidence(), got.GetScores(), want.GetConfidence(), want.GetScores())
			}
		}
		// top_k bounds the merge and a shorter list is its head.
		short := e.discover(t, &pb.DiscoverToolsRequest{Caller: c, Intents: intents, TopK: 2})
		mustEqualStrings(t, "top_k 2 vs the head of top_k 6", toolNames(short.GetTools()), toolNames(res.GetTools())[:2])
		// The token accounting covers the merged shortlist.
		var sum int64
		for _, x := range res.GetTools() {
			sum += int64(x.GetTokens())
		}
		if res.GetTokens().GetShortlistTokens() != sum || sum <= 0 {
			t.Errorf("shortlist_tokens %d, the tools' tokens add up to %d", res.GetTokens().GetShortlistTokens(), sum)
		}
	})

	t.Run("one intent is the query alone", func(t *testing.T) {
		alone := e.discover(t, &pb.DiscoverToolsRequest{Caller: c, Query: intents[0], TopK: 5})
		one := e.discover(t, &pb.DiscoverToolsRequest{Caller: c, Intents: intents[:1], TopK: 5})
		mustEqualStrings(t, "one intent vs the same text as query", toolNames(one.GetTools()), toolNames(alone.GetTools()))
		for i, x := range one.GetTools() {
			if !slices.Equal(x.GetIntents(), []int32{0}) || x.GetForQuery() {
				t.Errorf("#%d %s: intents %v for_query %v, want [0] and not the query", i+1, fmtTool(x), x.GetIntents(), x.GetForQuery())
			}
			if !alone.GetTools()[i].GetForQuery() || len(alone.GetTools()[i].GetIntents()) != 0 {
				t.Errorf("query alone #%d: for_query %v intents %v, want for_query only", i+1, alone.GetTools()[i].GetForQuery(), alone.GetTools()[i].GetIntents())
			}
		}
	})

	t.Run("query and intents", func(t *testing.T) {
		const q = "a customer's parcel is late, they want the invoice and an answer on their ticket"
		res := e.discover(t, &pb.DiscoverToolsRequest{Caller: c, Query: q, Intents: intents, TopK: 8})
		checkShape(t, res, len(intents), true)
		if len(res.GetTools()) != 8 {
			t.Fatalf("%d tools, want 8", len(res.GetTools()))
		}
		// The query is the first list of every turn.
		first, want := res.GetTools()[0], e.bestFor(t, c, q)
		if !first.GetForQuery() || toolNames(res.GetTools()[:1])[0] != toolNames([]*pb.DiscoveredTool{want})[0] {
			t.Errorf("#1 %s (for_query %v), want the query's best %s", fmtTool(first), first.GetForQuery(), fmtTool(want))
		}
		answered := map[int32]bool{}
		forQuery := 0
		for _, x := range res.GetTools() {
			for _, i := range x.GetIntents() {
				answered[i] = true
			}
			if x.GetForQuery() {
				forQuery++
			}
		}
		if len(answered) != len(intents) || forQuery < 2 {
			t.Errorf("top 8 answers intents %v and the query %d times; want every intent and the query at least twice", answered, forQuery)
		}
	})

	t.Run("pins stay first and say what they answer", func(t *testing.T) {
		res := e.discover(t, &pb.DiscoverToolsRequest{Caller: c, Intents: intents, TopK: 3,
			AlwaysLoad: []*pb.ToolRef{{Server: "support", Name: "escalate_ticket"}, {Server: "billing", Name: "issue_refund"}}})
		if len(res.GetTools()) == 0 || !res.GetTools()[0].GetPinned() || res.GetTools()[0].GetCard().GetName() != "escalate_ticket" {
			t.Fatalf("tools %v, want the authorized pin first", toolNames(res.GetTools()))
		}
		if slices.Contains(toolNames(res.GetTools()), "billing/issue_refund") {
			t.Errorf("a forbidden pin was loaded: %v", toolNames(res.GetTools()))
		}
	})
}

func TestDiscoverToolsMinConfidence(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t)})
	c := supportCaller()
	strong, weak := "track a package with the carrier", "zebra xylophone quasar"
	best, nonsense := e.bestFor(t, c, strong).GetConfidence(), e.bestFor(t, c, weak).GetConfidence()
	if !(nonsense < best) {
		t.Fatalf("precondition: the nonsense intent's best confidence %v is not under the real one's %v", nonsense, best)
	}

	t.Run("a minimum nothing reaches abstains", func(t *testing.T) {
		for _, req := range []*pb.DiscoverToolsRequest{
			{Caller: c, Query: strong, MinConfidence: f64(1)},
			{Caller: c, Intents: []string{strong, weak}, MinConfidence: f64(1)},
			{Caller: c, Query: weak, Intents: []string{strong, weak}, MinConfidence: f64(1), TopK: 50},
		} {
			res := e.discover(t, req)
			if !res.GetAbstained() || len(res.GetTools()) != 0 || res.GetMinConfidence() != 1 {
				t.Errorf("%q %q: abstained %v tools %v min %v; want abstained, no tool, min 1",
					req.GetQuery(), req.GetIntents(), res.GetAbstained(), toolNames(res.GetTools()), res.GetMinConfidence())
			}
			if want := len(req.GetIntents()); len(res.GetAbstainedIntents()) != want {
				t.Errorf("abstained_intents %v, want all %d", res.GetAbstainedIntents(), want)
			}
			if res.GetCandidateCount() != 18 || res.GetTokens().GetShortlistTokens() != 0 {
				t.Errorf("candidate_count %d shortlist_tokens %d, want 18 and 0", res.GetCandidateCount(), res.GetTokens().GetShortlistTokens())
			}
		}
		// Pins are still loaded.
		res := e.discover(t, &pb.DiscoverToolsRequest{Caller: c, Query: strong, MinConfidence: f64(1),
			AlwaysLoad: []*pb.ToolRef{{Server: "orders", Name: "get_order"}}})
		if !res.GetAbstained() || len(res.GetTools()) != 1 || !res.GetTools()[0].GetPinned() {
			t.Errorf("abstained %v with a pin: %v; want the pin only", res.GetAbstained(), toolNames(res.GetTools()))
		}
	})

	t.Run("a minimum at the best answers the whole list", func(t *testing.T) {
		all := e.discover(t, &pb.DiscoverToolsRequest{Caller: c, Query: strong, TopK: 5})
		at := e.discover(t, &pb.DiscoverToolsRequest{Caller: c, Query: strong, TopK: 5, MinConfidence: f64(best)})
		mustEqualStrings(t, "min = best vs no minimum", toolNames(at.GetTools()), toolNames(all.GetTools()))
		if at.GetAbstained() || at.GetMinConfidence() != best {
			t.Errorf("abstained %v, min_confidence %v; want answered at %v", at.GetAbstained(), at.GetMinConfidence(), best)
		}
		// Tools under the minimum still come with a list whose best clears it.
		if n := len(at.GetTools()); n < 2 || at.GetTools()[n-1].GetConfidence() >= best {
			t.Errorf("confidences %v: want the list's tail under its head", confidences(at))
		}
	})

	t.Run("an intent under the minimum gives way", func(t *testing.T) {
		th := (best + nonsense) / 2
		res := e.discover(t, &pb.DiscoverToolsRequest{Caller: c, Intents: []string{weak, strong}, TopK: 10, MinConfidence: f64(th)})
		if res.GetAbstained() || !slices.Equal(res.GetAbstainedIntents(), []int32{0}) {
			t.Fatalf("abstained %v, abstained_intents %v; want intent 0 only", res.GetAbstained(), res.GetAbstainedIntents())
		}
		alone := e.discover(t, &pb.DiscoverToolsRequest{Caller: c, Query: strong, TopK: 10})
		mustEqualStrings(t, "the answered intent's list vs its text alone", toolNames(res.GetTools()), toolNames(alone.GetTools()))
		for _, x := range res.GetTools() {
			if !slices.Equal(x.GetIntents(), []int32{1}) {
				t.Errorf("%s answers %v; only intent 1 was answered", fmtTool(x), x.GetIntents())
			}
		}
		// The query's own list abstaining is not an intent's.
		res = e.discover(t, &pb.DiscoverToolsRequest{Caller: c, Query: weak, Intents: []string{strong}, TopK: 10, MinConfidence: f64(th)})
		if res.GetAbstained() || len(res.GetAbstainedIntents()) != 0 || len(res.GetTools()) == 0 {
			t.Errorf("query under the minimum, intent over it: abstained %v %v, %d tools", res.GetAbstained(), res.GetAbstainedIntents(), len(res.GetTools()))
		}
		for _, x := range res.GetTools() {
			if x.GetForQuery() {
				t.Errorf("%s is for the query, whose list did not reach the minimum", fmtTool(x))
			}
		}
	})
}

func confidences(res *pb.DiscoverToolsResponse) []float64 {
	var out []float64
	for _, x := range res.GetTools() {
		out = append(out, x.GetConfidence())
	}
	return out
}

func TestDiscoverToolsIntentsValidation(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t)})
	c := supportCaller()
	nine := slices.Repeat([]string{"track my package"}, 9)
	long := strings.Repeat("é", 1001)
	for _, tc := range []struct {
		name  string
		req   *pb.DiscoverToolsRequest
		parts []string
	}{
		{"neither query nor intents", &pb.DiscoverToolsRequest{Caller: c}, []string{"query", "required unless intents"}},
		{"blank query, no intents", &pb.DiscoverToolsRequest{Caller: c, Query: "   "}, []string{"query", "required unless intents"}},
		{"too many intents", &pb.DiscoverToolsRequest{Caller: c, Intents: nine}, []string{"intents", "9 entries", "limit is 8"}},
		{"blank intent", &pb.DiscoverToolsRequest{Caller: c, Intents: []string{"track my package", " \t"}}, []string{"intents[1]", "required"}},
		{"empty intent", &pb.DiscoverToolsRequest{Caller: c, Query: "x", Intents: []string{""}}, []string{"intents[0]", "required"}},
		{"long intent", &pb.DiscoverToolsRequest{Caller: c, Intents: []string{"x", long}}, []string{"intents[1]", "1001 characters", "limit is 1000"}},
		{"long query beside intents", &pb.DiscoverToolsRequest{Caller: c, Query: long, Intents: []string{"x"}}, []string{"query", "limit is 1000"}},
		{"min_confidence over 1", &pb.DiscoverToolsRequest{Caller: c, Query: "x", MinConfidence: f64(1.5)}, []string{"min_confidence", "between 0 and 1"}},
		{"min_confidence negative", &pb.DiscoverToolsRequest{Caller: c, Intents: []string{"x"}, MinConfidence: f64(-0.1)}, []string{"min_confidence", "between 0 and 1"}},
		{"min_confidence NaN", &pb.DiscoverToolsRequest{Caller: c, Intents: []string{"x"}, MinConfidence: f64(math.NaN())}, []string{"min_confidence"}},
		{"top_k beside intents", &pb.DiscoverToolsRequest{Caller: c, Intents: []string{"x"}, TopK: 51}, []string{"top_k", "between 1 and 50"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.disc.DiscoverTools(rpcCtx(t), tc.req)
			if err == nil {
				t.Fatalf("accepted: %v", toolNames(res.GetTools()))
			}
			wantCode(t, err, codes.InvalidArgument, tc.parts...)
		})
	}
	// The limits themselves are accepted: 8 intents of 1,000 characters.
	eight := slices.Repeat([]string{strings.Repeat("é", 1000)}, 8)
	eight[0] = "track my package"
	res, err := e.disc.DiscoverTools(rpcCtx(t), &pb.DiscoverToolsRequest{Caller: c, Intents: eight, MinConfidence: f64(0), TopK: 50})
	if err != nil {
		t.Fatalf("8 intents of at most 1000 characters: %v", err)
	}
	checkShape(t, res, 8, false)
}

// intentRequests aim intents at forbidden tools (by name, alias and
// summary) beside ordinary support work, alone and with a query.
func intentRequests() []*pb.DiscoverToolsRequest {
	sets := [][]string{
		{"issue_refund", "where is my package"},
		{"refund the customer now", "void invoice", "change plan pricing"},
		{"export all invoices", "delete customer payment method", "merge tickets", "download all tickets ticket export"},
		{"restart the payments service", "open a bug about the login page", "how much revenue did we make last month"},
		{"canned response macro", "search", "invoice", "customer wants their money back for order 1234"},
		{"wholesale pallets freight haulier purchase orders", "credit note against a wholesale invoice"},
	}
	var out []*pb.DiscoverToolsRequest
	for i, s := range sets {
		out = append(out,
			&pb.DiscoverToolsRequest{Caller: supportCaller(), Intents: s},
			&pb.DiscoverToolsRequest{Caller: supportCaller(), Intents: s, TopK: 50, Fusion: "rrf"},
			&pb.DiscoverToolsRequest{Caller: supportCaller(), Query: securityQueries[i], Intents: s, TopK: 50},
			&pb.DiscoverToolsRequest{Caller: supportCaller(), Query: securityQueries[i+6], Intents: s, TopK: 10, Alpha: f64(0)},
		)
	}
	return out
}

func TestSupportCallerIntentsSameAsWithoutForbiddenCards(t *testing.T) {
	w := newTwoWorlds(t)
	for n, req := range intentRequests() {
		t.Run(fmt.Sprintf("%d/%s", n, strings.Join(req.GetIntents(), "|")), func(t *testing.T) {
			full, bare := w.full.discover(t, req), w.bare.discover(t, req)
			var tenants []string
			for _, x := range full.GetTools() {
				tenants = append(tenants, x.GetCard().GetTenant())
			}
			w.checkNoForbidden(t, "DiscoverTools(intents)", toolNames(full.GetTools()), tenants)
			if full.GetCandidateCount() != 18 || bare.GetCandidateCount() != 18 {
				t.Errorf("candidate_count = %d (full) / %d (bare), want 18", full.GetCandidateCount(), bare.GetCandidateCount())
			}
			checkShape(t, full, len(req.GetIntents()), req.GetQuery() != "")
			// The whole answer, per-tool intents and confidences included.
			if f, b := stable(full), stable(bare); !protoEqual(f, b) {
				t.Errorf("intents answer differs between a catalogue with and without the forbidden cards: %s\n full: %v\n bare: %v",
					firstDiff(full.GetTools(), bare.GetTools()), f, b)
			}
			// Every minimum gives the same abstentions in both worlds,
			// including the ones between the confidences the caller sees
			// (for half the variants: each costs 12 more discoveries).
			if n%2 == 1 {
				return
			}
			for _, m := range thresholds(full) {
				r := &pb.DiscoverToolsRequest{Caller: req.GetCaller(), Query: req.GetQuery(), Intents: req.GetIntents(), TopK: req.GetTopK(),
					Fusion: req.GetFusion(), Alpha: req.Alpha, MinConfidence: f64(m)}
				fm, bm := w.full.discover(t, r), w.bare.discover(t, r)
				w.checkNoForbidden(t, fmt.Sprintf("min_confidence %v", m), toolNames(fm.GetTools()), nil)
				if f, b := stable(fm), stable(bm); !protoEqual(f, b) {
					t.Errorf("min_confidence %v: answers differ (abstained %v %v vs %v %v): %s", m,
						fm.GetAbstained(), fm.GetAbstainedIntents(), bm.GetAbstained(), bm.GetAbstainedIntents(), firstDiff(fm.GetTools(), bm.GetTools()))
				}
			}
		})
	}
}

// thresholds are minimum confidences around the ones an answer shows: the
// first two tools' (the best of the first lists merged), a hair above each,
// and the extremes.
func thresholds(res *pb.DiscoverToolsResponse) []float64 {
	out := []float64{0, 1}
	cs := confidences(res)
	for _, c := range cs[:min(2, len(cs))] {
		out = append(out, c, math.Nextafter(c, 1))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func TestIntentsTenantIsolation(t *testing.T) {
	acme, globex := acmeCards(t), globexCards(t)
	both := newEnv(t, envOptions{cards: slices.Concat(acme, globex, inactiveCards())})
	alone := map[string]*env{"acme": newEnv(t, envOptions{cards: acme}), "globex": newEnv(t, envOptions{cards: globex})}
	intents := []string{"wholesale pallets freight", "helpdesk tickets kubernetes pull request", "track shipment", "issue refund", "get order"}
	for _, caller := range []*pb.Caller{adminCaller(), globexAdmin()} {
		for _, req := range []*pb.DiscoverToolsRequest{
			{Caller: caller, Intents: intents, TopK: 50},
			{Caller: caller, Query: "search orders", Intents: intents, TopK: 10},
			{Caller: caller, Intents: intents, MinConfidence: f64(0.2)},
		} {
			t.Run(caller.GetTenant()+"/"+req.GetQuery(), func(t *testing.T) {
				got, want := both.discover(t, req), alone[caller.GetTenant()].discover(t, req)
				for _, x := range got.GetTools() {
					if x.GetCard().GetTenant() != caller.GetTenant() {
						t.Errorf("returned %s/%s/%s to a %s caller", x.GetCard().GetTenant(), x.GetCard().GetServer(), x.GetCard().GetName(), caller.GetTenant())
					}
				}
				if !protoEqual(stable(got), stable(want)) {
					t.Errorf("the other tenant's cards change this tenant's intents answer: %s", firstDiff(got.GetTools(), want.GetTools()))
				}
			})
		}
	}
}

// TestDiscoverToolsNothingRankedAbstains: a text that ranks no tool at all
// (no term in any card, no positive cosine) has not reached any minimum
// either: its list is abstained on, like a list whose best is too weak, so
// every surface can say "no tool matches" instead of handing back an empty
// list without a word.
func TestDiscoverToolsNothingRankedAbstains(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t)})
	c := supportCaller()
	const nothing = "!!!"
	if res := e.discover(t, &pb.DiscoverToolsRequest{Caller: c, Query: nothing, TopK: 50}); len(res.GetTools()) != 0 || res.GetCandidateCount() != 18 {
		t.Fatalf("precondition: %q ranks %v of %d candidates; want nothing of 18", nothing, toolNames(res.GetTools()), res.GetCandidateCount())
	}
	for _, tc := range []struct {
		name          string
		req           *pb.DiscoverToolsRequest
		abstained     bool
		intents       []int32
		answeredByOne bool // every returned tool answers intent 0 only
	}{
		{"query", &pb.DiscoverToolsRequest{Caller: c, Query: nothing}, true, nil, false},
		{"intent", &pb.DiscoverToolsRequest{Caller: c, Intents: []string{nothing}}, true, []int32{0}, false},
		{"query and intent", &pb.DiscoverToolsRequest{Caller: c, Query: nothing, Intents: []string{nothing, nothing + "?"}, MinConfidence: f64(0)}, true, []int32{0, 1}, false},
		{"one intent of two", &pb.DiscoverToolsRequest{Caller: c, Intents: []string{"where is my package", nothing}, TopK: 50}, false, []int32{1}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := e.discover(t, tc.req)
			if res.GetAbstained() != tc.abstained || !slices.Equal(res.GetAbstainedIntents(), tc.intents) {
				t.Errorf("abstained %v, abstained_intents %v; want %v, %v", res.GetAbstained(), res.GetAbstainedIntents(), tc.abstained, tc.intents)
			}
			if tc.abstained && len(res.GetTools()) != 0 {
				t.Errorf("abstained with tools %v", toolNames(res.GetTools()))
			}
			for _, x := range res.GetTools() {
				if tc.answeredByOne && !slices.Equal(x.GetIntents(), []int32{0}) {
					t.Errorf("%s answers %v", fmtTool(x), x.GetIntents())
				}
			}
		})
	}
}
