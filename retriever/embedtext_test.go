package retriever_test

import (
	"context"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/retriever"
)

// The hash EmbeddingHash gives must be the one the retriever stores and
// checks, or vectors written by `cardex reindex` would never be reused.
func TestEmbeddingHashMatchesStoredHash(t *testing.T) {
	c := cards.Card{Tenant: acme, Server: "orders", Name: "get_order", Summary: "Show one order by its number.",
		Aliases: []string{"order details"}, Tags: []string{"orders"},
		InputSchema: []byte(`{"type":"object","properties":{"order_id":{"type":"string"}}}`)}
	st := newStore(t, c)
	emb := embed.NewHashed(64)
	newRetriever(t, st, emb)
	got, err := st.Embeddings(context.Background(), emb.Model(), []cards.Key{c.Key()})
	if err != nil {
		t.Fatal(err)
	}
	e, ok := got[c.Key()]
	if !ok {
		t.Fatal("the retriever stored no embedding")
	}
	stored, err := st.Get(context.Background(), c.Key())
	if err != nil {
		t.Fatal(err)
	}
	if want := retriever.EmbeddingHash(retriever.EmbeddingText(&stored)); e.TextHash != want {
		t.Errorf("stored text hash %q, EmbeddingHash gives %q", e.TextHash, want)
	}
}
