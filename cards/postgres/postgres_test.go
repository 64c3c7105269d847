package postgres_test

import (
	"context"
	"sync"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/postgres"
	"github.com/seed0cff8200/cardex/cards/storetest"
	"github.com/seed0cff8200/cardex/internal/testkit/pgtest"
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

// TestConcurrentMigrate: two `cardex migrate up` on one schema at once
// (native PostgreSQL: real sessions, so the advisory lock is real) both
// succeed, one applying the migrations and the other finding them applied.
func TestConcurrentMigrate(t *testing.T) {
	url := pgtest.NativeURL(t)
	schema := pgtest.NewSchemaName()
	a := pgtest.Open(t, pgtest.Options{URL: url, Schema: schema, NoMigrate: true})
	b := pgtest.Open(t, pgtest.Options{URL: url, Schema: schema, NoMigrate: true, KeepSchema: true})
	var wg sync.WaitGroup
	applied := make([][]int64, 2)
	errs := make([]error, 2)
	for i, s := range []*postgres.Store{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			applied[i], errs[i] = s.MigrateTo(context.Background(), 1)
		}()
	}
	wg.Wait()
	if errs[0] != nil || errs[1] != nil {
		t.Fatalf("concurrent migrations: %v, %v", errs[0], errs[1])
	}
	if n := len(applied[0]) + len(applied[1]); n != 1 {
		t.Errorf("applied %v and %v: want version 1 applied once", applied[0], applied[1])
	}
}
