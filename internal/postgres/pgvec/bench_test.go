package pgvec_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/cards/postgres"
	"github.com/seed0cff8200/cardex/cards/synth"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/postgres/pgvec"
	"github.com/seed0cff8200/cardex/internal/testkit/pgtest"
	"github.com/seed0cff8200/cardex/retriever"
)

// planCallers hold a growing share of the synthetic catalogue (3% to 86%).
var planCallers = [][]string{
	{"support:read"}, {"support:read", "crm:read"}, {"billing:*"}, {"support:read", "crm:read", "hr:read", "devops:read"},
	{"billing:*", "crm:*"}, synth.RestrictedScopes, {"billing:*", "crm:*", "support:*"}, {"billing:*", "crm:*", "support:*", "hr:*"},
	{"billing:*", "crm:*", "support:*", "hr:*", "devops:*", "storage:*", "identity:*"},
}

// BenchmarkPlans times a restricted caller's vector search (K = 200, the
// semantic leg's depth) by each plan, the exact scan of the rows its scopes
// select and the filtered HNSW scan, for callers holding a growing share of
// a synthetic catalogue of 10,000 and 100,000 cards on the native
// PostgreSQL with pgvector (CARDEX_TEST_NATIVE_PG_URL), and reports the
// database server's CPU per search (db-cpu-ns/op): where the exact scan
// stops being the cheaper one is what pgvec's thresholds follow
// (docs/BENCHMARKS.md, "PostgreSQL mode"). Each catalogue is loaded once.
func BenchmarkPlans(b *testing.B) {
	ctx := context.Background()
	emb := embed.NewHashed(embed.DefaultDim)
	vecs, err := emb.Embed(ctx, synth.Queries(50, 7))
	if err != nil {
		b.Fatal(err)
	}
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("cards=%d", n), func(b *testing.B) {
			url := pgtest.NativeURL(b)
			url += map[bool]string{false: "?", true: "&"}[strings.Contains(url, "?")] + "maintenance_work_mem=1GB"
			st := pgtest.Open(b, pgtest.Options{URL: url})
			cs := synth.Catalogue(n, 1, "acme")
			if err := st.DropVectorIndex(ctx, emb.Model(), emb.Dim()); err != nil {
				b.Fatal(err)
			}
			putAll(b, st, cs)
			r, err := retriever.New(ctx, st, emb, nil, retriever.WithVectors(pgvec.New(st, emb.Model(), emb.Dim())))
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			if err := st.EnsureVectorIndex(ctx, emb.Model(), emb.Dim()); err != nil {
				b.Fatal(err)
			}
			if err := st.Analyze(ctx); err != nil {
				b.Fatal(err)
			}
			var required []string
			for _, c := range cs {
				required = append(required, c.RequiredScopes...)
			}
			slices.Sort(required)
			required = slices.Compact(required)
			for _, scopes := range planCallers {
				var within []string
				for _, s := range required {
					if retriever.HoldsAll(scopes, []string{s}) {
						within = append(within, s)
					}
				}
				held := 0
				for _, c := range cs {
					if retriever.HoldsAll(scopes, c.RequiredScopes) {
						held++
					}
				}
				for _, exact := range []bool{true, false} {
					name := fmt.Sprintf("share=%02d%%/plan=%s", 100*held/n, map[bool]string{true: "exact", false: "hnsw"}[exact])
					b.Run(name, func(b *testing.B) {
						benchSearch(b, st, postgres.VectorQuery{Model: emb.Model(), Dim: emb.Dim(), Tenant: "acme", Within: within, Exact: exact, K: 200}, vecs)
						b.ReportMetric(float64(held), "candidates")
					})
				}
			}
		})
	}
}

// benchSearch times q with each of vecs in turn and reports the database
// server's CPU per search.
func benchSearch(b *testing.B, st *postgres.Store, q postgres.VectorQuery, vecs [][]float32) {
	ctx := context.Background()
	db0, ok0 := pgtest.BackendCPU(ctx, st.Pool())
	i := 0
	for b.Loop() {
		q.Vector = vecs[i%len(vecs)]
		if _, err := st.SearchVectors(ctx, q); err != nil {
			b.Fatal(err)
		}
		i++
	}
	if db1, ok1 := pgtest.BackendCPU(ctx, st.Pool()); ok0 && ok1 {
		b.ReportMetric(float64((db1-db0).Nanoseconds())/float64(i), "db-cpu-ns/op")
	}
}
