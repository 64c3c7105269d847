package storetest

import (
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
)

// The search-example cases of the suite: round trip, limits, and the put
// rules of cards/examples.go (PlanPut), which every store applies.
var examplesTests = []struct {
	name string
	fn   func(t *testing.T, s cards.Store)
}{
	{"ExamplesRoundtrip", testExamplesRoundtrip},
	{"ExamplesLimits", testExamplesLimits},
	{"ExamplesKeptWhenNotStated", testExamplesKeptWhenNotStated},
	{"ExamplesPersonNotOverwrittenByModel", testExamplesPersonNotOverwrittenByModel},
	{"ExamplesReplacedAndCleared", testExamplesReplacedAndCleared},
}

func withExamples(c cards.Card, src *cards.ExamplesSource, examples ...string) cards.Card {
	c.SearchExamples, c.ExamplesSource = examples, src
	return c
}

func model(name string) *cards.ExamplesSource {
	return &cards.ExamplesSource{Author: cards.AuthorModel, Model: name, PromptVersion: "v1"}
}

func person() *cards.ExamplesSource { return &cards.ExamplesSource{Author: cards.AuthorPerson} }

func testExamplesRoundtrip(t *testing.T, s cards.Store) {
	in := full()
	put(t, s, in)
	got := get(t, s, in.Key())
	// Sanitised, de-duplicated case-insensitively in first-seen order.
	if want := []string{"give the customer their money back", "refund order 1234"}; strings.Join(got.SearchExamples, "|") != strings.Join(want, "|") {
		t.Errorf("search_examples = %q, want %q", got.SearchExamples, want)
	}
	src := got.ExamplesSource
	if src == nil || src.Author != cards.AuthorModel || src.Model != "m-1" || src.PromptVersion != "enrich-v1" {
		t.Fatalf("search_examples_source = %+v", src)
	}
	// The hash is filled at registration, of the card the examples describe.
	if src.CardHash != got.ExamplesBasisHash() || got.ExamplesStale() {
		t.Errorf("card_hash %q, basis %q, stale %v", src.CardHash, got.ExamplesBasisHash(), got.ExamplesStale())
	}
	// List carries them too.
	page, err := s.List(t.Context(), cards.ListQuery{Tenant: tenant})
	if err != nil || len(page.Cards) != 1 {
		t.Fatalf("List: %v %d", err, len(page.Cards))
	}
	assertCard(t, page.Cards[0], got)

	// Examples without a source are a person's; an explicit hash is kept.
	c := withExamples(simple(tenant, "misc", "ping"), nil, "is the server up")
	p2 := withExamples(simple(tenant, "misc", "pong"), &cards.ExamplesSource{Author: cards.AuthorModel, Model: "m", CardHash: "00ff"}, "answer a ping")
	put(t, s, c, p2)
	if g := get(t, s, c.Key()); g.ExamplesSource == nil || g.ExamplesSource.Author != cards.AuthorPerson || g.ExamplesSource.CardHash != g.ExamplesBasisHash() {
		t.Errorf("examples without a source: %+v", g.ExamplesSource)
	}
	if g := get(t, s, p2.Key()); g.ExamplesSource == nil || g.ExamplesSource.CardHash != "00ff" || !g.ExamplesStale() {
		t.Errorf("explicit card hash: %+v (stale %v)", g.ExamplesSource, g.ExamplesStale())
	}
}

func testExamplesLimits(t *testing.T, s cards.Store) {
	existing := withExamples(simple(tenant, "srv", "kept"), nil, "an example")
	put(t, s, existing)
	before := get(t, s, existing.Key())
	seq0 := seq(t, s)
	many := make([]string, cards.MaxSearchExamples+1)
	for i := range many {
		many[i] = "example number " + strings.Repeat("x", i)
	}
	tests := []struct {
		name  string
		bad   func(c *cards.Card)
		field string
		limit int64
	}{
		{"too many", func(c *cards.Card) { c.SearchExamples = many }, "search_examples", cards.MaxSearchExamples},
		{"too long", func(c *cards.Card) {
			c.SearchExamples = []string{"fine", strings.Repeat("é", cards.MaxSearchExampleLen+1)}
		}, "search_examples[1]", cards.MaxSearchExampleLen},
		{"unknown author", func(c *cards.Card) {
			c.SearchExamples, c.ExamplesSource = []string{"x"}, &cards.ExamplesSource{Author: "robot"}
		}, "search_examples_source.author", 0},
		{"model without id", func(c *cards.Card) {
			c.SearchExamples, c.ExamplesSource = []string{"x"}, &cards.ExamplesSource{Author: cards.AuthorModel}
		}, "search_examples_source.model", 0},
		{"model id too long", func(c *cards.Card) {
			c.SearchExamples, c.ExamplesSource = []string{"x"}, model(strings.Repeat("m", cards.MaxExamplesSourceLen+1))
		}, "search_examples_source.model", cards.MaxExamplesSourceLen},
		{"bad hash", func(c *cards.Card) {
			c.SearchExamples, c.ExamplesSource = []string{"x"}, &cards.ExamplesSource{Author: cards.AuthorPerson, CardHash: "NOT HEX"}
		}, "search_examples_source.card_hash", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			update := before
			update.Version = 0
			update.SearchExamples = []string{"should not be written"}
			bad := simple(tenant, "srv", "bad")
			tc.bad(&bad)
			_, err := s.Put(t.Context(), []cards.Card{update, bad})
			fe := fieldError(t, err)
			if fe.Field != tc.field || !strings.Contains(fe.Item, "cards[1]") {
				t.Errorf("error %v: field %q item %q, want %q of cards[1]", err, fe.Field, fe.Item, tc.field)
			}
			if tc.limit > 0 && !containsNumber(fe.Msg, tc.limit) {
				t.Errorf("error %q does not name the limit %d", fe.Msg, tc.limit)
			}
			assertCard(t, get(t, s, existing.Key()), before)
			mustNotFound(t, s, bad.Key())
			if n := seq(t, s); n != seq0 {
				t.Errorf("Seq moved from %d to %d on a failed batch", seq0, n)
			}
		})
	}
}

// A card that states nothing about examples (a card file written before
// enrichment, applied again) keeps the stored ones, a model's or a
// person's; when its text changed they are kept and known to be stale.
func testExamplesKeptWhenNotStated(t *testing.T, s cards.Store) {
	for _, src := range []*cards.ExamplesSource{model("m-1"), person()} {
		t.Run(src.Author, func(t *testing.T) {
			base := simple(tenant, "srv", "tool_"+src.Author)
			put(t, s, withExamples(base, src, "first example", "second example"))
			stored := get(t, s, base.Key())

			res := put(t, s, base) // the authored card, applied again
			if res[0].Outcome != cards.Unchanged || res[0].Version != stored.Version || res[0].ExamplesKept {
				t.Errorf("re-apply without examples: %+v, want unchanged", res[0])
			}
			assertCard(t, get(t, s, base.Key()), stored)

			edited := base
			edited.Summary = "A new summary"
			res = put(t, s, edited)
			got := get(t, s, base.Key())
			if res[0].Outcome != cards.Updated || got.Summary != "A new summary" {
				t.Fatalf("edit: %+v %q", res[0], got.Summary)
			}
			if strings.Join(got.SearchExamples, "|") != "first example|second example" || got.ExamplesSource.Author != src.Author {
				t.Errorf("examples after an edit that does not state them: %q %+v", got.SearchExamples, got.ExamplesSource)
			}
			if !got.ExamplesStale() || got.ExamplesSource.CardHash != stored.ExamplesSource.CardHash {
				t.Errorf("examples of the old text are stale: stale=%v hash %q (was %q)", got.ExamplesStale(), got.ExamplesSource.CardHash, stored.ExamplesSource.CardHash)
			}
		})
	}
}

// A person's examples are never replaced or cleared by a model's put; the
// rest of the card is written, and the result says the examples were kept.
func testExamplesPersonNotOverwrittenByModel(t *testing.T, s cards.Store) {
	base := simple(tenant, "srv", "hand_written")
	put(t, s, withExamples(base, person(), "the person's phrase"))
	stored := get(t, s, base.Key())

	res := put(t, s, withExamples(stored, model("m-2"), "a model's phrase"))
	if !res[0].ExamplesKept || res[0].Outcome != cards.Unchanged {
		t.Errorf("model put onto a person's examples: %+v, want unchanged and examples kept", res[0])
	}
	assertCard(t, get(t, s, base.Key()), stored)

	cleared := withExamples(stored, model("m-2"))
	cleared.Summary = "Edited with the model's put"
	res = put(t, s, cleared)
	got := get(t, s, base.Key())
	if !res[0].ExamplesKept || res[0].Outcome != cards.Updated || got.Summary != cleared.Summary {
		t.Errorf("model put clearing a person's examples: %+v (summary %q)", res[0], got.Summary)
	}
	if strings.Join(got.SearchExamples, "|") != "the person's phrase" || got.ExamplesSource.Author != cards.AuthorPerson {
		t.Errorf("a person's examples after a model's put: %q %+v", got.SearchExamples, got.ExamplesSource)
	}
	// In one batch with other cards, each card follows the rule on its own.
	other := withExamples(simple(tenant, "srv", "other"), model("m-2"), "other phrase")
	res = put(t, s, other, withExamples(got, model("m-3"), "x"))
	if res[0].ExamplesKept || !res[1].ExamplesKept {
		t.Errorf("batch results: %+v", res)
	}
}

// A person's examples replace a model's; a model's replace a model's; a
// source with no examples clears them, source and all.
func testExamplesReplacedAndCleared(t *testing.T, s cards.Store) {
	base := simple(tenant, "srv", "enriched")
	put(t, s, withExamples(base, model("m-1"), "old model phrase"))

	put(t, s, withExamples(base, model("m-2"), "new model phrase"))
	if got := get(t, s, base.Key()); strings.Join(got.SearchExamples, "|") != "new model phrase" || got.ExamplesSource.Model != "m-2" {
		t.Errorf("model over model: %q %+v", got.SearchExamples, got.ExamplesSource)
	}
	res := put(t, s, withExamples(base, person(), "a person's phrase"))
	if got := get(t, s, base.Key()); res[0].ExamplesKept || strings.Join(got.SearchExamples, "|") != "a person's phrase" || got.ExamplesSource.Author != cards.AuthorPerson {
		t.Errorf("person over model: %+v %q %+v", res[0], got.SearchExamples, got.ExamplesSource)
	}
	res = put(t, s, withExamples(base, person()))
	got := get(t, s, base.Key())
	if res[0].Outcome != cards.Updated || got.SearchExamples != nil || got.ExamplesSource != nil || got.ExamplesStale() {
		t.Errorf("cleared: %+v %q %+v", res[0], got.SearchExamples, got.ExamplesSource)
	}
	// Nothing to clear: unchanged.
	if res := put(t, s, withExamples(base, model("m-1"))); res[0].Outcome != cards.Unchanged {
		t.Errorf("clearing nothing: %+v", res[0])
	}
}
