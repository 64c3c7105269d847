package retriever_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/postgres/pgvec"
	"github.com/seed0cff8200/cardex/internal/testkit/pgtest"
	"github.com/seed0cff8200/cardex/retriever"
)

// BenchmarkDiscoverPostgres is BenchmarkDiscover (same catalogue, queries
// and callers) at 10,000 cards in PostgreSQL mode (cards and vectors in
// PostgreSQL, the semantic leg through pgvector's HNSW index), next to the
// embedded store on the same data in the same run, so that both see the
// same machine load. It needs CARDEX_TEST_DATABASE_URL (./scripts/test
// -run '^$' -bench DiscoverPostgres ./retriever/ starts PGlite).
func BenchmarkDiscoverPostgres(b *testing.B) {
	const benchTenant = "acme"
	queries := synthQueries(50, 7)
	callers := []struct {
		name   string
		caller retriever.Caller
	}{
		{"admin", retriever.Caller{Tenant: benchTenant, Subject: "admin", Scopes: []string{"*"}}},
		{"restricted", retriever.Caller{Tenant: benchTenant, Subject: "agent", Scopes: benchRestrictedScopes}},
	}
	for _, n := range []int{10000} {
		b.Run(fmt.Sprintf("cards=%d", n), func(b *testing.B) {
			ctx := context.Background()
			start := time.Now()
			st := pgtest.Open(b, pgtest.Options{URL: pgtest.BulkURL(b)})
			emb := embed.NewHashed(embed.DefaultDim)
			if err := st.DropVectorIndex(ctx, emb.Model(), emb.Dim()); err != nil {
				b.Fatal(err)
			}
			putBatches(b, st, synthCatalogue(n, 1, benchTenant))
			r, err := retriever.New(ctx, st, emb, nil, retriever.WithVectors(pgvec.New(st, emb.Model(), emb.Dim())))
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
				b.Fatalf("retriever holds %d cards, want %d", r.Len(), n)
			}
			b.Logf("postgres: setup of %d cards (store, embed, HNSW build): %s", n, time.Since(start).Round(time.Millisecond))
			es, err := embedded.Open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = es.Close() })
			putBatches(b, es, synthCatalogue(n, 1, benchTenant))
			re, err := retriever.New(ctx, es, emb, nil)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = re.Close() })

			for _, mode := range []struct {
				name string
				r    *retriever.Retriever
			}{{"embedded", re}, {"postgres", r}} {
				for _, c := range callers {
					b.Run("store="+mode.name+"/caller="+c.name, func(b *testing.B) {
						r := mode.r
						var candidates, tools, i int
						timedLoop(b, func() {
							res, err := r.Discover(ctx, retriever.Request{Caller: c.caller, Query: queries[i%len(queries)], TopK: 5})
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
					})
				}
			}
		})
	}
}
