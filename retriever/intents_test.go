package retriever_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/retriever"
)

func fused(ids ...string) []retriever.Fused {
	out := make([]retriever.Fused, len(ids))
	for i, id := range ids {
		out[i] = retriever.Fused{ID: id, Score: float64(len(ids) - i)}
	}
	return out
}

func mergedIDs(ms []retriever.Merged) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.ID
	}
	return out
}

func TestMergeFair(t *testing.T) {
	for _, tc := range []struct {
		name  string
		lists [][]retriever.Fused
		k     int
		want  []string
		by    map[string][]int
	}{
		{"one list is its own order", [][]retriever.Fused{fused("a", "b", "c")}, 2, []string{"a", "b"}, map[string][]int{"a": {0}}},
		{"turns", [][]retriever.Fused{fused("a1", "a2", "a3"), fused("b1", "b2"), fused("c1")}, 6,
			[]string{"a1", "b1", "c1", "a2", "b2", "a3"}, map[string][]int{"c1": {2}}},
		{"a shared tool appears once and lists both", [][]retriever.Fused{fused("x", "a2"), fused("x", "b2")}, 3,
			[]string{"x", "b2", "a2"}, map[string][]int{"x": {0, 1}, "b2": {1}}},
		{"k bounds the merge", [][]retriever.Fused{fused("a1", "a2"), fused("b1", "b2")}, 3, []string{"a1", "b1", "a2"}, nil},
		{"empty lists give way", [][]retriever.Fused{nil, fused("b1", "b2"), nil}, 5, []string{"b1", "b2"}, nil},
		{"duplicates inside a list count once", [][]retriever.Fused{fused("a", "a", "b")}, 5, []string{"a", "b"}, nil},
		{"k zero", [][]retriever.Fused{fused("a")}, 0, []string{}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := fmt.Sprint(tc.lists)
			got := retriever.MergeFair(tc.lists, tc.k)
			if ids := mergedIDs(got); !slices.Equal(ids, tc.want) {
				t.Fatalf("merged %v, want %v", ids, tc.want)
			}
			for _, m := range got {
				if want, ok := tc.by[m.ID]; ok && !slices.Equal(m.Lists, want) {
					t.Errorf("%s lists %v, want %v", m.ID, m.Lists, want)
				}
			}
			if fmt.Sprint(tc.lists) != before {
				t.Error("inputs were modified")
			}
			// The merge for k is a prefix of the merge for k+1.
			if tc.k > 0 {
				longer := mergedIDs(retriever.MergeFair(tc.lists, tc.k+1))
				if !slices.Equal(longer[:len(got)], mergedIDs(got)) {
					t.Errorf("k=%d %v is not a prefix of k=%d %v", tc.k, mergedIDs(got), tc.k+1, longer)
				}
			}
		})
	}
}

// multiStep is a catalogue for a multi-step task: each step has one tool
// that fits it, plus tools no step asks for.
func multiStep() []cards.Card {
	return []cards.Card{
		card("docs", "create_document", "Create a new word processing document.", "docs:write"),
		card("docs", "add_paragraph", "Add a paragraph of text to a document.", "docs:write"),
		card("convert", "to_pdf", "Convert a document file to PDF.", "convert:run"),
		card("trends", "get_trending_topics", "Get today's trending topics and hot searches.", "trends:read"),
		card("weather", "forecast", "Weather forecast for a city."),
		card("billing", "refund_admin", "Convert a customer's credit into a refund and trending discounts.", "billing:admin"),
	}
}

func TestDiscoverIntents(t *testing.T) {
	r := newRetriever(t, newStore(t, multiStep()...), nil)
	scoped := caller("docs:write", "convert:run", "trends:read")
	intents := []string{"get the trending topics of today", "create a word document", "convert the document to pdf"}

	res := discover(t, r, retriever.Request{Caller: scoped, Intents: intents, TopK: 3})
	// Every intent's best tool first, in the intents' order.
	if got, want := names(res), []string{"trends/get_trending_topics", "docs/create_document", "convert/to_pdf"}; !slices.Equal(got, want) {
		t.Fatalf("shortlist %v, want %v", got, want)
	}
	for i, tool := range res.Tools {
		if !slices.Contains(tool.Intents, i) || tool.ForQuery {
			t.Errorf("%s: intents %v, for query %v; want intent %d, not the query", names(res)[i], tool.Intents, tool.ForQuery, i)
		}
		if !(tool.Scores.Confidence > 0 && tool.Scores.Confidence < 1) {
			t.Errorf("%s: confidence %v outside (0,1)", names(res)[i], tool.Scores.Confidence)
		}
	}
	// top_k 3 is the head of top_k 6, and nothing outside the caller's
	// scopes is ranked for any intent (billing:admin's look-alike).
	long := discover(t, r, retriever.Request{Caller: scoped, Intents: intents, TopK: 6})
	if !slices.Equal(names(long)[:3], names(res)) {
		t.Errorf("top_k 6 %v does not start with top_k 3 %v", names(long), names(res))
	}
	for _, n := range names(long) {
		if n == "billing/refund_admin" {
			t.Errorf("%s in a shortlist of a caller without its scope", n)
		}
	}
	if long.CandidateCount != 5 {
		t.Errorf("candidate count %d, want 5 (the caller's set, counted once for all intents)", long.CandidateCount)
	}

	// With a query too, the query is one more list, ranked first.
	both := discover(t, r, retriever.Request{Caller: scoped, Query: "report on trends as a pdf", Intents: intents, TopK: 4})
	if len(both.Tools) != 4 || !both.Tools[0].ForQuery {
		t.Errorf("query+intents: %v, first for query %v", names(both), both.Tools[0].ForQuery)
	}
	seen := map[int]bool{}
	for _, tool := range both.Tools {
		for _, i := range tool.Intents {
			seen[i] = true
		}
	}
	if len(seen) != len(intents) {
		t.Errorf("query+intents top 4 %v answers intents %v; want all three", names(both), seen)
	}
}

func TestDiscoverIntentsValidation(t *testing.T) {
	ctx := context.Background()
	r := newRetriever(t, newStore(t, multiStep()...), nil)
	nine := make([]string, retriever.MaxIntents+1)
	for i := range nine {
		nine[i] = "x"
	}
	long := strings.Repeat("é", retriever.MaxQueryLen+1)
	one := 1.5
	for _, tc := range []struct {
		name  string
		req   retriever.Request
		field string
	}{
		{"neither query nor intents", retriever.Request{Caller: admin}, "query"},
		{"too many intents", retriever.Request{Caller: admin, Intents: nine}, "intents"},
		{"blank intent", retriever.Request{Caller: admin, Intents: []string{"x", " "}}, "intents[1]"},
		{"long intent", retriever.Request{Caller: admin, Intents: []string{long}}, "intents[0]"},
		{"long query beside intents", retriever.Request{Caller: admin, Query: long, Intents: []string{"x"}}, "query"},
		{"min_confidence over 1", retriever.Request{Caller: admin, Query: "x", MinConfidence: &one}, "min_confidence"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.Discover(ctx, tc.req)
			wantInvalid(t, err, tc.field)
		})
	}
	if _, err := r.Discover(ctx, retriever.Request{Caller: admin, Intents: nine[:retriever.MaxIntents]}); err != nil {
		t.Errorf("%d intents: %v", retriever.MaxIntents, err)
	}
}

func TestMinConfidenceAbstains(t *testing.T) {
	r := newRetriever(t, newStore(t, multiStep()...), nil)
	zero, all := 0.0, 1.0
	base := discover(t, r, retriever.Request{Caller: admin, Query: "convert the document to pdf", MinConfidence: &zero})
	if len(base.Tools) == 0 || base.Abstained {
		t.Fatalf("min 0: %v, abstained %v", names(base), base.Abstained)
	}
	best := base.Tools[0].Scores.Confidence
	// A threshold the best tool reaches answers the whole list; one it
	// does not reach answers nothing, says so, and still returns pins.
	at := best
	same := discover(t, r, retriever.Request{Caller: admin, Query: "convert the document to pdf", MinConfidence: &at})
	if !reflect.DeepEqual(names(same), names(base)) || same.Abstained {
		t.Errorf("min = best: %v (abstained %v), want %v", names(same), same.Abstained, names(base))
	}
	none := discover(t, r, retriever.Request{Caller: admin, Query: "convert the document to pdf", MinConfidence: &all,
		AlwaysLoad: []cards.Key{key("weather", "forecast")}})
	if !none.Abstained || len(none.Tools) != 1 || !none.Tools[0].Pinned || none.MinConfidence != 1 {
		t.Errorf("min 1: %v abstained %v, min %v; want only the pin, abstained", names(none), none.Abstained, none.MinConfidence)
	}
	// Per intent: an intent whose best tool misses the bar gives way.
	mid := (best + 1) / 2
	if mid <= best {
		t.Skip("best confidence already 1")
	}
	res := discover(t, r, retriever.Request{Caller: admin, Intents: []string{"convert the document to pdf", "zebra xylophone quux"}, MinConfidence: &zero})
	weak := res.Tools[1].Scores.Confidence
	if weak >= best {
		t.Skipf("the nonsense intent's best (%v) is not weaker than the real one's (%v)", weak, best)
	}
	th := (weak + best) / 2
	part := discover(t, r, retriever.Request{Caller: admin, Intents: []string{"convert the document to pdf", "zebra xylophone quux"}, MinConfidence: &th})
	if part.Abstained || !slices.Equal(part.AbstainedIntents, []int{1}) {
		t.Errorf("abstained %v, intents %v; want intent 1 only", part.Abstained, part.AbstainedIntents)
	}
	for _, tool := range part.Tools {
		if !slices.Equal(tool.Intents, []int{0}) {
			t.Errorf("%s answers %v; only intent 0 was answered", tool.Card.Name, tool.Intents)
		}
	}
}

func TestCollapseNearDuplicates(t *testing.T) {
	cs := []cards.Card{
		card("filesystem", "read_file", "Read the complete contents of a file from the file system."),
		card("desktop-commander", "read_file", "Read the contents of a file from the file system or a URL."),
		card("playwright", "playwright_click", "Click an element on the page."),
		card("puppeteer", "puppeteer_click", "Click an element on the page.", "browser:admin"),
		card("github", "search", "Search code in repositories."),
		card("support", "search", "Search support tickets by customer."),
		card("filesystem", "write_file", "Create a new file or overwrite an existing file."),
	}
	r := newRetriever(t, newStore(t, cs...), nil)
	alts := func(s retriever.Scored) []string {
		var out []string
		for _, k := range s.Alternatives {
			out = append(out, k.Server+"/"+k.Name)
		}
		return out
	}
	res := discover(t, r, retriever.Request{Caller: admin, Query: "read the contents of a file", TopK: 5})
	first := names(res)[0]
	var other string
	switch first {
	case "filesystem/read_file":
		other = "desktop-commander/read_file"
	case "desktop-commander/read_file":
		other = "filesystem/read_file"
	default:
		t.Fatalf("best %s; want one of the read_file tools", first)
	}
	if slices.Contains(names(res), other) || !slices.Equal(alts(res.Tools[0]), []string{other}) {
		t.Errorf("%v, alternatives %v: want %s collapsed into the first slot", names(res), alts(res.Tools[0]), other)
	}
	// Same name once the servers' words go: playwright_click ~
	// puppeteer_click; but only for a caller who may use both.
	res = discover(t, r, retriever.Request{Caller: admin, Query: "click an element on the page", TopK: 5})
	if n := names(res); len(res.Tools[0].Alternatives) != 1 || slices.Contains(n, "playwright/playwright_click") && slices.Contains(n, "puppeteer/puppeteer_click") {
		t.Errorf("admin: %v, alternatives %v", n, alts(res.Tools[0]))
	}
	res = discover(t, r, retriever.Request{Caller: caller(), Query: "click an element on the page", TopK: 5})
	for _, s := range res.Tools {
		for _, a := range alts(s) {
			if a == "puppeteer/puppeteer_click" {
				t.Errorf("a caller without browser:admin sees %s named as an alternative", a)
			}
		}
	}
	// Same name, different tools (summaries differ): both rank.
	res = discover(t, r, retriever.Request{Caller: admin, Query: "search", TopK: 5})
	if n := names(res); !slices.Contains(n, "github/search") || !slices.Contains(n, "support/search") {
		t.Errorf("search: %v; two different search tools must both rank", n)
	}
	// Off: every tool ranks on its own.
	off := newRetrieverWith(t, newStore(t, cs...), retriever.WithCollapse(false))
	res = discover(t, off, retriever.Request{Caller: admin, Query: "read the contents of a file", TopK: 5})
	if n := names(res); !slices.Contains(n, "filesystem/read_file") || !slices.Contains(n, "desktop-commander/read_file") {
		t.Errorf("collapse off: %v", n)
	}
}
