package postgres_test

import (
	"context"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/testkit/pgtest"
)

// TestMigrateFreshDatabaseCustomSchema migrates a schema other than public
// on a database where pgvector was never installed — what an operator's
// first `cardex migrate up --database-schema cardex` does — and uses the
// vector type from an ordinary pool connection afterwards. (The shared test
// database pre-installs pgvector in public, which hid a migration that put
// the type into cardex's own schema, off every other connection's path.)
func TestMigrateFreshDatabaseCustomSchema(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a PGlite of its own: not in -short")
	}
	db := pgtest.StartPGlite(t)
	s := pgtest.Open(t, pgtest.Options{URL: db.URL, Schema: "cardex", NoMigrate: true})
	ctx := context.Background()
	if _, err := s.Migrate(ctx); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	if err := s.EnsureVectorIndex(ctx, "m", 3); err != nil {
		t.Fatalf("vector index after a fresh migration: %v", err)
	}
	c := cards.Card{Tenant: "acme", Server: "s", Name: "n", Summary: "A tool."}
	if _, err := s.Put(ctx, []cards.Card{c}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutEmbeddings(ctx, []cards.Embedding{{Key: c.Key(), Model: "m", TextHash: "h", Vector: []float32{1, 0, 0}}}); err != nil {
		t.Fatalf("store a vector: %v", err)
	}
	got, err := s.Embeddings(ctx, "m", []cards.Key{c.Key()})
	if err != nil || len(got) != 1 {
		t.Fatalf("read the vector back: %v, %v", got, err)
	}
}
