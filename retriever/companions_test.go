package retriever_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/retriever"
)

// railCatalogue: a ticket search whose sessions also used a station-code
// lookup (no word of the request names it), a destructive cancellation and
// a tool that needs a scope.
func railCatalogue() []cards.Card {
	yes := true
	cs := []cards.Card{
		card("rail", "get_tickets", "Search train tickets between two stations on a date."),
		card("geo", "city_codes", "Resolve a city name to its telegraph codes."),
		with(card("rail", "cancel_order", "Void a booking."), func(c *cards.Card) { c.Annotations.Destructive = &yes }),
		card("audit", "dump_trail", "Export the audit trail.", "audit:read"),
	}
	// Tools that share the request's words, so that the shortlist is full
	// without the companions.
	for _, w := range []string{"train", "tickets", "stations", "date", "search", "between", "two", "on"} {
		for _, o := range []string{"timetable", "museum", "concert", "parking"} {
			cs = append(cs, card("misc", w+"_"+o, "The "+o+" "+w+" helper."))
		}
	}
	return cs
}

// testCompanions are permissive enough for a tiny catalogue whatever the
// confidence model's fit: the rules, not the thresholds, are under test.
var testCompanions = retriever.CompanionOptions{Anchor: 0.05, Weak: 1, Min: 0.01, Prior: 2, MaxSlots: 2}

func railRetriever(t *testing.T, o retriever.CompanionOptions, sessions ...[]cards.Key) *retriever.Retriever {
	t.Helper()
	st := newStore(t, railCatalogue()...)
	r := newRetrieverWith(t, st, retriever.WithCompanions(o))
	var uses []cards.CoUse
	for _, s := range sessions {
		uses = append(uses, cards.CoUse{Tools: s})
	}
	if len(uses) > 0 {
		if changed, err := r.RecordCoUse(context.Background(), uses); err != nil || !changed {
			t.Fatalf("RecordCoUse = %v, %v", changed, err)
		}
	}
	return r
}

var (
	tickets  = key("rail", "get_tickets")
	stations = key("geo", "city_codes")
	cancel   = key("rail", "cancel_order")
	audit    = key("audit", "dump_trail")
)

// railSessions: three sessions looked the station codes up before the
// tickets, and each also cancelled an order and exported the audit trail.
func railSessions() [][]cards.Key {
	s := []cards.Key{stations, tickets, cancel, audit}
	return [][]cards.Key{s, s, s}
}

const ticketQuery = "search train tickets between two stations on a date"

func companionsIn(res retriever.Result) map[string]string {
	out := map[string]string{}
	for _, s := range res.Tools {
		if s.CompanionOf != nil {
			out[s.Card.Server+"/"+s.Card.Name] = s.CompanionOf.Server + "/" + s.CompanionOf.Name
		}
	}
	return out
}

func TestCompanionsBroughtAndMarked(t *testing.T) {
	r := railRetriever(t, testCompanions, railSessions()...)
	res := discover(t, r, retriever.Request{Caller: admin, Query: ticketQuery, TopK: 5})
	if len(res.Tools) == 0 || res.Tools[0].Card.Key() != tickets {
		t.Fatalf("precondition: %v, want rail/get_tickets first", names(res))
	}
	got := companionsIn(res)
	if got["geo/city_codes"] != "rail/get_tickets" {
		t.Fatalf("companions %v in %v; want geo/city_codes with rail/get_tickets", got, names(res))
	}
	for _, s := range res.Tools {
		if s.CompanionOf != nil && !strings.HasPrefix(s.Reason, "used with rail/get_tickets") {
			t.Errorf("%s: reason %q, want it to start with \"used with rail/get_tickets\"", s.Card.Key(), s.Reason)
		}
	}
	// The view holds the table, decayed to when it was loaded.
	tab, ok := r.CompanionsOf(tickets)
	if !ok || tab.Uses < 2.99 || len(tab.Tools) != 3 {
		t.Errorf("CompanionsOf(tickets) = %+v, %v; want 3 sessions, 3 companions", tab, ok)
	}
}

func TestCompanionsNeverDestructiveNorOutOfScope(t *testing.T) {
	r := railRetriever(t, testCompanions, railSessions()...)
	for _, tc := range []struct {
		name   string
		caller retriever.Caller
	}{
		{"admin", admin},
		{"no audit scope", caller("rail:read")},
		{"no scope at all", caller()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, k := range []int{1, 2, 3, 5, 10, 50} {
				res := discover(t, r, retriever.Request{Caller: tc.caller, Query: ticketQuery, TopK: k})
				comps := companionsIn(res)
				if n := len(comps); n > 2 || n > k/2 {
					t.Errorf("top_k %d: %d companions %v; the bound is min(2, top_k/2)", k, n, comps)
				}
				if _, ok := comps["rail/cancel_order"]; ok {
					t.Errorf("top_k %d: the destructive rail/cancel_order was brought by co-usage", k)
				}
				if tc.caller.Scopes == nil || !slices.Contains(tc.caller.Scopes, "*") {
					for _, s := range res.Tools {
						if s.Card.Key() == audit || strings.Contains(s.Reason, "dump_trail") {
							t.Errorf("top_k %d: a caller without audit:read sees %s (%q)", k, s.Card.Key(), s.Reason)
						}
					}
				}
			}
		})
	}
	// The admin may use the audit tool: it is a companion like the others.
	res := discover(t, r, retriever.Request{Caller: admin, Query: ticketQuery, TopK: 10})
	if _, ok := companionsIn(res)["audit/dump_trail"]; !ok {
		t.Errorf("admin: companions %v, want audit/dump_trail among them", companionsIn(res))
	}
}

func TestCompanionsKeepConfidentToolsAndCanBeTurnedOff(t *testing.T) {
	cold := railRetriever(t, testCompanions)
	warm := railRetriever(t, testCompanions, railSessions()...)
	for _, k := range []int{3, 5} {
		req := retriever.Request{Caller: admin, Query: ticketQuery, TopK: k}
		base := discover(t, cold, req)
		with := discover(t, warm, req)
		if len(companionsIn(with)) == 0 {
			t.Fatalf("top_k %d: no companion in %v", k, names(with))
		}
		// A tool at or above the weak threshold keeps its place.
		o := testCompanions
		o.Weak = 0.3
		strict := railRetriever(t, o, railSessions()...)
		got := discover(t, strict, req)
		for i, s := range base.Tools {
			if s.Scores.Confidence >= o.Weak && (i >= len(got.Tools) || got.Tools[i].Card.Key() != s.Card.Key()) {
				t.Errorf("top_k %d: %s (confidence %.2f) lost slot %d: %v → %v", k, s.Card.Key(), s.Scores.Confidence, i, names(base), names(got))
			}
		}
		// Off for the request: the cold answer exactly.
		req.NoCompanions = true
		if off := discover(t, warm, req); !slices.Equal(names(off), names(base)) || len(companionsIn(off)) > 0 {
			t.Errorf("top_k %d, companions off: %v, want the cold answer %v", k, names(off), names(base))
		}
	}
	// MaxSlots 0 turns the step off for every request.
	o := testCompanions
	o.MaxSlots = 0
	off := railRetriever(t, o, railSessions()...)
	if res := discover(t, off, retriever.Request{Caller: admin, Query: ticketQuery}); len(companionsIn(res)) > 0 {
		t.Errorf("MaxSlots 0: companions %v", companionsIn(res))
	}
}

func TestRecordCoUseFollowsTheStore(t *testing.T) {
	st := newStore(t, railCatalogue()...)
	a := newRetrieverWith(t, st, retriever.WithCompanions(testCompanions))
	b := newRetrieverWith(t, st, retriever.WithCompanions(testCompanions))
	ctx := context.Background()
	if _, err := a.RecordCoUse(ctx, []cards.CoUse{{Tools: []cards.Key{stations, tickets}}}); err != nil {
		t.Fatal(err)
	}
	// Another replica of the same store learns it at its next sync, like
	// a card change.
	if _, ok := b.CompanionsOf(tickets); !ok {
		t.Fatal("tickets is not active in b")
	}
	if tab, _ := b.CompanionsOf(tickets); len(tab.Tools) != 0 {
		t.Fatalf("b has co-usage before syncing: %+v", tab)
	}
	syncView(t, b)
	if tab, _ := b.CompanionsOf(tickets); len(tab.Tools) != 1 || tab.Tools[0].Name != "city_codes" || tab.Tools[0].Before < 0.99 {
		t.Errorf("after sync, b's table for tickets = %+v, want city_codes used before it", tab)
	}
	// Invalid observations are refused, naming the field.
	if _, err := a.RecordCoUse(ctx, []cards.CoUse{{Tools: []cards.Key{tickets}}}); err == nil || !strings.Contains(err.Error(), "co_uses[0].tools") {
		t.Errorf("a one-tool session: %v", err)
	}
}
