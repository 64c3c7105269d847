package retriever_test

import (
	"context"
	"errors"
	"testing"

	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/retriever"
)

// flakyEmbedder embeds cards but fails on demand, like an embedding server
// that went away after start (a test double: the retriever is under test).
type flakyEmbedder struct {
	embed.Embedder
	down bool
}

func (f *flakyEmbedder) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	if f.down {
		return nil, errors.New("connection refused")
	}
	return f.Embedder.Embed(ctx, texts)
}

func TestEmbedderDownAnswersLexicallyDegraded(t *testing.T) {
	st := newStore(t, card("ship", "track_parcel", "Track a parcel by its tracking number."), card("crm", "get_contact", "Read one contact record."))
	emb := &flakyEmbedder{Embedder: embed.NewHashed(embed.DefaultDim)}
	r := newRetriever(t, st, emb)
	req := retriever.Request{Caller: retriever.Caller{Tenant: acme, Scopes: []string{"*"}}, Query: "track my parcel"}
	ok, err := r.Discover(context.Background(), req)
	if err != nil || ok.Degraded {
		t.Fatalf("healthy: %v, degraded %v", err, ok.Degraded)
	}
	emb.down = true
	res, err := r.Discover(context.Background(), req)
	if err != nil {
		t.Fatalf("with the embedder down: %v; want a lexical answer", err)
	}
	if !res.Degraded || len(res.Tools) == 0 || res.Tools[0].Card.Name != "track_parcel" || res.Tools[0].Scores.SemanticRank != 0 {
		t.Fatalf("degraded %v, tools %+v; want track_parcel from the lexical leg", res.Degraded, res.Tools)
	}
}
