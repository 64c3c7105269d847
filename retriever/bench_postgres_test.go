package retriever_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/cards/postgres"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/postgres/pgvec"
	"github.com/seed0cff8200/cardex/internal/testkit/pgtest"
	"github.com/seed0cff8200/cardex/retriever"
)

// pgBenchSizes are BenchmarkDiscoverPostgres's catalogue sizes; pick one
// with -bench 'DiscoverPostgres/cards=10000$/'.
var pgBenchSizes = []int{10_000, 100_000}

// pgBenchStores are the stores BenchmarkDiscoverPostgres compares, each
// with the variable naming its database: "postgres" is
// CARDEX_TEST_BULK_DATABASE_URL (else CARDEX_TEST_DATABASE_URL; PGlite under
// scripts/test), "native" CARDEX_TEST_NATIVE_PG_URL (scripts/test's native
// PostgreSQL 15 with pgvector). "embedded" is the floor.
var pgBenchStores = []string{"embedded", "postgres", "native"}

// BenchmarkDiscoverPostgres is BenchmarkDiscover (same catalogue, queries
// and callers) in PostgreSQL mode (cards and vectors in PostgreSQL, the
// semantic leg through pgvector), next to the embedded store on the same
// data in the same run, so that all see the same machine load. A store
// whose database is not set is skipped (failed under CI=true).
//
// Each catalogue is built once (-count repeats the timed callers only) and
// dropped after its store's callers. ./scripts/test -run '^$' -bench
// 'DiscoverPostgres/cards=10000$/' ./retriever/ runs it under -race; for
// the figures, start the databases as scripts/test does and run the test
// binary without -race (docs/BENCHMARKS.md, "PostgreSQL mode").
func BenchmarkDiscoverPostgres(b *testing.B) {
	queries := synthQueries(50, 7)
	callers := []struct {
		name   string
		caller retriever.Caller
	}{
		{"admin", retriever.Caller{Tenant: benchTenant, Subject: "admin", Scopes: []string{"*"}}},
		{"restricted", retriever.Caller{Tenant: benchTenant, Subject: "agent", Scopes: benchRestrictedScopes}},
		// A caller holding one scope: about 4% of the catalogue, where a
		// filtered HNSW scan must visit about 25 index tuples a hit.
		{"narrow", retriever.Caller{Tenant: benchTenant, Subject: "reader", Scopes: []string{"support:read"}}},
	}
	for _, n := range pgBenchSizes {
		b.Run(fmt.Sprintf("cards=%d", n), func(b *testing.B) {
			for _, store := range pgBenchStores {
				b.Run("store="+store, func(b *testing.B) {
					start := time.Now()
					env := newPGBenchEnv(b, store, n)
					b.Logf("%s: setup of %d cards (store, embed, index): %s", store, n, time.Since(start).Round(time.Millisecond))
					for _, c := range callers {
						b.Run("caller="+c.name, func(b *testing.B) { benchDiscoverPG(b, env, c.caller, queries) })
						if c.name == "admin" || env.idx == nil {
							continue
						}
						// The same caller by each plan, whichever the
						// tenant's size picks: an exact scan, the HNSW
						// index.
						for _, plan := range []struct {
							name     string
							exactMax int
						}{{"exact", math.MaxInt}, {"hnsw", -1}} {
							b.Run("caller="+c.name+"-"+plan.name, func(b *testing.B) {
								env.idx.WithExactScanMax(plan.exactMax)
								defer env.idx.WithExactScanMax(pgvec.DefaultExactScanMax)
								benchDiscoverPG(b, env, c.caller, queries)
							})
						}
					}
				})
			}
		})
	}
}

// benchDiscoverPG times discoveries of one caller, and reports the
// database server's CPU time per discovery (db-cpu-ns/op) where it can be
// read: a native server on this machine (its client backends' CPU from
// /proc); PGlite's is not reported.
func benchDiscoverPG(b *testing.B, env *pgBenchEnv, c retriever.Caller, queries []string) {
	ctx := context.Background()
	var candidates, tools, i int
	db0, dbOK := env.dbCPU(ctx)
	timedLoop(b, func() {
		res, err := env.r.Discover(ctx, retriever.Request{Caller: c, Query: queries[i%len(queries)], TopK: 5})
		if err != nil {
			b.Fatal(err)
		}
		if res.Degraded {
			b.Fatal("degraded answer: the vector search failed")
		}
		candidates += res.CandidateCount
		tools += len(res.Tools)
		i++
	})
	b.ReportMetric(float64(candidates)/float64(i), "candidates")
	b.ReportMetric(float64(tools)/float64(i), "tools/op")
	if db1, ok := env.dbCPU(ctx); dbOK && ok {
		b.ReportMetric(float64((db1-db0).Nanoseconds())/float64(i), "db-cpu-ns/op")
	}
}

// pgBenchEnv is one store's catalogue and retriever.
type pgBenchEnv struct {
	r      *retriever.Retriever
	st     *postgres.Store // nil: embedded
	idx    *pgvec.Index    // nil: embedded
	native bool
}

// dbCPU is the CPU time of the database server's client backends
// (pgtest.BackendCPU), false when it cannot be read (embedded, PGlite).
func (e *pgBenchEnv) dbCPU(ctx context.Context) (time.Duration, bool) {
	if !e.native {
		return 0, false
	}
	return pgtest.BackendCPU(ctx, e.st.Pool())
}

// newPGBenchEnv loads n cards into the store (the PostgreSQL ones without
// their HNSW index, built after the load) and opens a retriever over it,
// closed and dropped when b ends.
func newPGBenchEnv(b *testing.B, store string, n int) *pgBenchEnv {
	ctx := context.Background()
	emb := embed.NewHashed(embed.DefaultDim)
	cs := synthCatalogue(n, 1, benchTenant)
	if store == "embedded" {
		es, err := embedded.Open(b.TempDir())
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = es.Close() })
		putBatches(b, es, cs)
		r, err := retriever.New(ctx, es, emb, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = r.Close() })
		return &pgBenchEnv{r: r}
	}
	var url string
	switch store {
	case "native":
		// The HNSW build gets the memory to run in one pass (a session
		// setting, sent by pgx at connect).
		url = pgtest.NativeURL(b)
		url += map[bool]string{false: "?", true: "&"}[strings.Contains(url, "?")] + "maintenance_work_mem=1GB"
	default:
		url = pgtest.BulkURL(b) // PGlite under scripts/test
	}
	st := pgtest.Open(b, pgtest.Options{URL: url})
	if err := st.DropVectorIndex(ctx, emb.Model(), emb.Dim()); err != nil {
		b.Fatal(err)
	}
	putBatches(b, st, cs)
	idx := pgvec.New(st, emb.Model(), emb.Dim())
	r, err := retriever.New(ctx, st, emb, nil, retriever.WithVectors(idx))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Close() })
	if err := st.EnsureVectorIndex(ctx, emb.Model(), emb.Dim()); err != nil {
		b.Fatal(err)
	}
	if err := st.Analyze(ctx); err != nil {
		b.Fatal(err)
	}
	if r.Len() != n {
		b.Fatalf("%s: retriever holds %d cards, want %d", store, r.Len(), n)
	}
	return &pgBenchEnv{r: r, st: st, idx: idx, native: store == "native"}
}
