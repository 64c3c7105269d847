package server_test

// What an intents discovery leaves behind: its discovery-log line (intents
// raw, hashed or absent as configured) and, after ReportOutcome, the
// phrasings the used tool learns (the intents that reached it, not the
// query).

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/telemetry/discoverylog"
	"github.com/seed0cff8200/cardex/internal/telemetry/feedback"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
	"github.com/seed0cff8200/cardex/retriever"
)

func TestDiscoveryLogIntents(t *testing.T) {
	// Words that appear in no card, so their presence in the log can only
	// come from the request.
	intents := []string{"where is parcel QX-4411 for Zanzibar-Ferro", "show invoice INV-77821 with its line items"}
	const query = "customer Quillon-Marsh is upset about a late delivery"
	secrets := []string{"QX-4411", "Zanzibar-Ferro", "INV-77821", "Quillon-Marsh", intents[0], intents[1], query}
	reqs := []*pb.DiscoverToolsRequest{
		{Intents: intents},
		{Query: query, Intents: intents, TopK: 8},
		{Query: query},
		{Intents: intents[1:], MinConfidence: f64(1)}, // abstains
	}
	for _, mode := range []discoverylog.QueryMode{discoverylog.QueryRaw, discoverylog.QueryHash, discoverylog.QueryOff} {
		t.Run(string(mode), func(t *testing.T) {
			e := newEnv(t, envOptions{logMode: mode, cards: slices.Concat(acmeCards(t), globexCards(t))})
			var res []*pb.DiscoverToolsResponse
			for _, r := range reqs {
				r.Caller = supportCaller()
				res = append(res, e.discover(t, r))
			}
			if !res[3].GetAbstained() {
				t.Fatalf("precondition: min_confidence 1 did not abstain: %v", toolNames(res[3].GetTools()))
			}
			// A refused intents request is not logged.
			if _, err := e.disc.DiscoverTools(rpcCtx(t), &pb.DiscoverToolsRequest{Caller: supportCaller(), Intents: slices.Repeat(intents, 5)}); err == nil {
				t.Fatal("10 intents accepted")
			}
			entries, raw := readLog(t, e.dlog, e.logPath)
			if len(entries) != len(reqs) {
				t.Fatalf("%d log lines, want %d", len(entries), len(reqs))
			}
			for i, got := range entries {
				req := reqs[i]
				if got.ID != res[i].GetDiscoveryId() {
					t.Errorf("line %d: id %q, discovery_id %q", i+1, got.ID, res[i].GetDiscoveryId())
				}
				mustEqualStrings(t, fmt.Sprintf("line %d returned", i+1), returnedNames(got), toolNames(res[i].GetTools()))
				if got.CandidateCount != 18 || got.Abstained != res[i].GetAbstained() {
					t.Errorf("line %d: candidate_count %d abstained %v; response %d %v", i+1, got.CandidateCount, got.Abstained, res[i].GetCandidateCount(), res[i].GetAbstained())
				}
				var wantHashes []string
				for _, in := range req.GetIntents() {
					wantHashes = append(wantHashes, e.dlog.Hash(in))
				}
				switch mode {
				case discoverylog.QueryRaw:
					mustEqualStrings(t, fmt.Sprintf("line %d intents", i+1), got.Intents, req.GetIntents())
					if len(got.IntentHashes) != 0 || got.Query != req.GetQuery() {
						t.Errorf("line %d: intent_hashes %v query %q in raw mode", i+1, got.IntentHashes, got.Query)
					}
				case discoverylog.QueryHash:
					mustEqualStrings(t, fmt.Sprintf("line %d intent_hashes", i+1), got.IntentHashes, wantHashes)
					if len(got.Intents) != 0 {
						t.Errorf("line %d: clear intents %q in hash mode", i+1, got.Intents)
					}
					for _, h := range got.IntentHashes {
						if h == "" || strings.Contains(strings.Join(intents, " "), h) {
							t.Errorf("line %d: intent hash %q", i+1, h)
						}
					}
				case discoverylog.QueryOff:
					if len(got.Intents) != 0 || len(got.IntentHashes) != 0 || got.Query != "" || got.QueryHash != "" {
						t.Errorf("line %d: intents %q hashes %v query %q/%q with the query log off", i+1, got.Intents, got.IntentHashes, got.Query, got.QueryHash)
					}
				}
			}
			// The file itself: no clear text of a request outside raw mode,
			// and no trace of intents at all when off.
			for _, s := range secrets {
				if in := bytes.Contains(raw, []byte(s)); in != (mode == discoverylog.QueryRaw) {
					t.Errorf("mode %s: %q in the log file: %v", mode, s, in)
				}
			}
			if mode == discoverylog.QueryOff && (bytes.Contains(raw, []byte(`"intents"`)) || bytes.Contains(raw, []byte(`"intent_hashes"`))) {
				t.Errorf("the log records intents with the query log off:\n%s", raw)
			}
			// The hash is keyed: a plain SHA-256 or an unkeyed hash of the
			// text would be the same under another key.
			other, err := discoverylog.Open(filepath.Join(t.TempDir(), "x.jsonl"), discoverylog.QueryHash, []byte("another-key"))
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			if other.Hash(intents[0]) == e.dlog.Hash(intents[0]) {
				t.Errorf("intent hashes do not depend on the log key")
			}
		})
	}
}

func returnedNames(e discoverylog.Entry) []string {
	var out []string
	for _, r := range e.Returned {
		out = append(out, r.Server+"/"+r.Name)
	}
	return out
}

// toolsAnswering returns the tools of a response whose intents are exactly want
// (and, unless forQuery, that the query's list did not reach).
func toolsAnswering(res *pb.DiscoverToolsResponse, want []int32, forQuery bool) []*pb.DiscoveredTool {
	var out []*pb.DiscoveredTool
	for _, x := range res.GetTools() {
		if slices.Equal(x.GetIntents(), want) && x.GetForQuery() == forQuery && !x.GetPinned() {
			out = append(out, x)
		}
	}
	return out
}

func keyOf(x *pb.DiscoveredTool) cards.Key {
	return cards.Key{Tenant: x.GetCard().GetTenant(), Server: x.GetCard().GetServer(), Name: x.GetCard().GetName()}
}

func usedTool(x *pb.DiscoveredTool) *pb.ReportOutcomeRequest_UsedTool {
	return &pb.ReportOutcomeRequest_UsedTool{UsedTool: &pb.ToolRef{Server: x.GetCard().GetServer(), Name: x.GetCard().GetName()}}
}

func TestReportOutcomeLearnsIntents(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t), feedback: true})
	admin := adminCaller()
	const query = "sort out this customer's week"
	// Intents 0 and 1 ask for the same thing in other words; intent 2 for
	// something else.
	intents := []string{"track the package with the carrier", "track my package with its carrier", "open a bug about the login page"}
	d := e.discover(t, &pb.DiscoverToolsRequest{Caller: admin, Query: query, Intents: intents, TopK: 12})

	// A tool that both look-alike intents reached learns both of them.
	shared := toolsAnswering(d, []int32{0, 1}, false)
	// A tool only intent 2 reached, low in its list: learning must lift it.
	only2 := toolsAnswering(d, []int32{2}, false)
	// A tool only the query reached learns the query (there is no intent
	// to learn instead).
	onlyQuery := toolsAnswering(d, nil, true)
	if len(shared) == 0 || len(only2) < 2 || len(onlyQuery) == 0 {
		t.Fatalf("precondition: the shortlist has no tool answering intents 0 and 1 (%d), two answering intent 2 alone (%d), one answering the query alone (%d):\n%v",
			len(shared), len(only2), len(onlyQuery), describeAnswers(d))
	}
	low := only2[len(only2)-1]
	before := findTool(t, e.discover(t, &pb.DiscoverToolsRequest{Caller: admin, Intents: intents[2:], TopK: 50}), low)
	if strings.Contains(before.GetReason(), "learned") {
		t.Fatalf("precondition: %s matched learned phrasings before any outcome: %s", fmtTool(low), before.GetReason())
	}

	for _, x := range []*pb.DiscoveredTool{shared[0], low, onlyQuery[0]} {
		res, err := e.disc.ReportOutcome(rpcCtx(t), &pb.ReportOutcomeRequest{Caller: admin, DiscoveryId: d.GetDiscoveryId(), Outcome: usedTool(x)})
		if err != nil || res.GetMiss() {
			t.Fatalf("ReportOutcome(%s from the shortlist) = %v, %v; want a hit", fmtTool(x), res, err)
		}
	}
	learned := e.ret.Learned()
	want := map[cards.Key][]string{
		keyOf(shared[0]):    {intents[0], intents[1]},
		keyOf(low):          {intents[2]},
		keyOf(onlyQuery[0]): {query},
	}
	if len(learned) != len(want) {
		t.Errorf("%d cards learned phrasings, want %d: %v", len(learned), len(want), learned)
	}
	for k, w := range want {
		if got := learned[k]; !slices.Equal(got, w) {
			t.Errorf("%s/%s learned %q, want %q", k.Server, k.Name, got, w)
		}
	}

	// A later discovery of that intent matches the tool on what it
	// learned, and scores it higher than before.
	after := findTool(t, e.discover(t, &pb.DiscoverToolsRequest{Caller: admin, Intents: intents[2:], TopK: 50}), low)
	if !strings.Contains(after.GetReason(), "learned") || !(after.GetScores().GetFused() > before.GetScores().GetFused()) ||
		!(after.GetConfidence() > before.GetConfidence()) {
		t.Errorf("after the outcome, intent %q scores %s (%s, confidence %v); before: %s (confidence %v); want a learned match scoring higher",
			intents[2], fmtTool(after), after.GetReason(), after.GetConfidence(), fmtTool(before), before.GetConfidence())
	}

	// The phrasings live in the store, so they survive a restart: a new
	// retriever over the same store has them (two intents, one intent, the
	// query).
	ret2, err := retriever.New(context.Background(), e.store, embed.NewHashed(embed.DefaultDim), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ret2.Close()
	got := ret2.Learned()
	n := 0
	for _, ps := range got {
		n += len(ps)
	}
	if fmt.Sprint(got) != fmt.Sprint(learned) || n != 4 {
		t.Errorf("after a restart the retriever learned %v (%d phrasings), want %v (4)", got, n, learned)
	}
}

func TestReportOutcomeIntentsMissLearnsNoIntent(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t), feedback: true})
	admin := adminCaller()
	intents := []string{"track the package with the carrier", "open a bug about the login page"}
	d := e.discover(t, &pb.DiscoverToolsRequest{Caller: admin, Intents: intents, TopK: 2})
	if slices.Contains(toolNames(d.GetTools()), "infra/rotate_credentials") {
		t.Fatalf("precondition: %v", toolNames(d.GetTools()))
	}
	res, err := e.disc.ReportOutcome(rpcCtx(t), &pb.ReportOutcomeRequest{Caller: admin, DiscoveryId: d.GetDiscoveryId(),
		Outcome: &pb.ReportOutcomeRequest_UsedTool{UsedTool: &pb.ToolRef{Server: "infra", Name: "rotate_credentials"}}})
	if err != nil || !res.GetMiss() {
		t.Fatalf("ReportOutcome(a tool outside the shortlist) = %v, %v; want a miss", res, err)
	}
	// No intent reached the used tool, so none is attached to it, and the
	// shortlisted tools learn nothing from someone else's outcome.
	for k, ps := range e.ret.Learned() {
		for _, p := range ps {
			if slices.Contains(intents, p) {
				t.Errorf("%s/%s learned intent %q from a miss", k.Server, k.Name, p)
			}
		}
	}
	evs := events(t, e.fbPath)
	if last := evs[len(evs)-1]; last.Type != feedback.TypeOutcome || !last.Miss || last.Tool == nil || last.Tool.Name != "rotate_credentials" {
		t.Errorf("last event %+v, want the missed outcome", last)
	}
}

// findTool returns the tool of a response with x's key.
func findTool(t *testing.T, res *pb.DiscoverToolsResponse, x *pb.DiscoveredTool) *pb.DiscoveredTool {
	t.Helper()
	for _, y := range res.GetTools() {
		if keyOf(y) == keyOf(x) {
			return y
		}
	}
	t.Fatalf("%s is not in %v", fmtTool(x), toolNames(res.GetTools()))
	return nil
}

func describeAnswers(res *pb.DiscoverToolsResponse) string {
	var b strings.Builder
	for i, x := range res.GetTools() {
		fmt.Fprintf(&b, "  #%d %s/%s intents %v for_query %v confidence %.3f\n", i+1, x.GetCard().GetServer(), x.GetCard().GetName(), x.GetIntents(), x.GetForQuery(), x.GetConfidence())
	}
	return b.String()
}
