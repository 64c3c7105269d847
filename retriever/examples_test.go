package retriever_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/retriever"
)

// Search examples are searched in both legs and re-embedded when they
// change, but no card the retriever answers with carries them.
func TestSearchExamplesSearchedNotShown(t *testing.T) {
	ctx := context.Background()
	tool := cards.Card{Tenant: acme, Server: "books", Name: "close_period", Summary: "Close an accounting period."}
	st := newStore(t, tool, cards.Card{Tenant: acme, Server: "books", Name: "list_invoices", Summary: "List the invoices of a period."})
	emb := embed.NewHashed(embed.DefaultDim)
	r := newRetriever(t, st, emb)
	caller := retriever.Caller{Tenant: acme, Subject: "s"}
	first := func(mode retriever.Mode, q string) *retriever.Scored {
		t.Helper()
		res, err := r.Discover(ctx, retriever.Request{Caller: caller, Query: q, Mode: mode, MinConfidence: new(float64)})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Tools) == 0 {
			return nil
		}
		return &res.Tools[0]
	}
	const q = "reconcile the flibbertigibbet ledger"
	if s := first(retriever.ModeLexical, q); s != nil {
		t.Fatalf("found %s before it had examples", s.Card.Name)
	}
	tool.SearchExamples = []string{"reconcile the quarterly flibbertigibbet ledger"}
	put(t, st, tool)
	syncView(t, r)
	for _, mode := range []retriever.Mode{retriever.ModeLexical, retriever.ModeSemantic, retriever.ModeHybrid} {
		s := first(mode, q)
		if s == nil || s.Card.Name != "close_period" {
			t.Fatalf("%s: the examples do not find the card: %+v", mode, s)
		}
		if s.Card.SearchExamples != nil || s.Card.ExamplesSource != nil {
			t.Errorf("%s: the answer carries the examples: %+v", mode, s.Card)
		}
		if mode == retriever.ModeLexical && !slices.Contains(s.Scores.Fields, "examples") {
			t.Errorf("matched fields %v", s.Scores.Fields)
		}
	}
	d, err := r.Describe(ctx, caller, "close_period", "")
	if err != nil || d.Card.SearchExamples != nil || d.Card.ExamplesSource != nil {
		t.Errorf("Describe: %v %+v", err, d.Card)
	}
	// The stored vector follows the examples (its text hash is of the text
	// with them).
	c, err := st.Get(ctx, tool.Key())
	if err != nil {
		t.Fatal(err)
	}
	es, err := st.Embeddings(ctx, emb.Model(), []cards.Key{tool.Key()})
	if err != nil || len(es) != 1 {
		t.Fatalf("embeddings: %v %v", err, es)
	}
	text := retriever.EmbeddingText(&c)
	if !strings.Contains(text, "flibbertigibbet") || es[tool.Key()].TextHash != retriever.EmbeddingHash(text) {
		t.Errorf("stored vector of %q is not of the text with the examples", text)
	}
}
