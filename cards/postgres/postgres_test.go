package postgres_test

import (
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/storetest"
	"github.com/seed0cff8200/cardex/internal/pgtest"
)

func TestConformance(t *testing.T) {
	pgtest.URL(t)
	storetest.Run(t, func(t *testing.T) cards.Store {
		return pgtest.Open(t, pgtest.Options{})
	})
}

// TestConformanceNative runs the suite on native PostgreSQL with pgx's
// defaults (extended protocol, statement cache) and real concurrent
// sessions. It has no pgvector here, so embeddings are kept in memory by
// the test wrapper; the embedding SQL runs in TestConformance.
func TestConformanceNative(t *testing.T) {
	url := pgtest.NativeURL(t)
	storetest.Run(t, func(t *testing.T) cards.Store {
		return pgtest.WithoutVectors(pgtest.Open(t, pgtest.Options{URL: url, MigrateTo: 1}))
	})
}
