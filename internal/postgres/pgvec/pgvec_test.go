package pgvec_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/pgvector/pgvector-go"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/postgres"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/postgres/pgvec"
	"github.com/seed0cff8200/cardex/internal/testkit/pgtest"
	"github.com/seed0cff8200/cardex/retriever"
)

var (
	verbs   = []string{"get", "list", "create", "update", "delete", "search", "export", "import", "archive", "approve", "cancel", "sync"}
	nouns   = []string{"order", "invoice", "ticket", "issue", "user", "customer", "payment", "refund", "subscription", "account", "report", "metric", "alert", "incident", "deployment", "build", "file", "employee", "role", "token"}
	adjs    = []string{"open", "closed", "pending", "overdue", "recent", "archived", "failed", "draft", "shared", "monthly", "critical", "unpaid"}
	servers = []string{"billing", "crm", "support", "devops", "hr", "analytics", "storage", "identity"}
)

// catalogue returns n cards of tenant, deterministic from seed.
func catalogue(n int, seed int64, tenant string) []cards.Card {
	rng := rand.New(rand.NewSource(seed))
	pick := func(s []string) string { return s[rng.Intn(len(s))] }
	out := make([]cards.Card, n)
	for i := range out {
		v, noun, adj := pick(verbs), pick(nouns), pick(adjs)
		out[i] = cards.Card{
			Tenant: tenant, Server: pick(servers), Name: fmt.Sprintf("%s_%s_%05d", v, noun, i),
			Summary: fmt.Sprintf("%s %s %s records for a %s account.", v, adj, noun, pick(nouns)),
			Aliases: []string{v + " " + noun, adj + " " + noun + "s"},
		}
	}
	return out
}

func putAll(t testing.TB, s cards.Store, cs []cards.Card) {
	t.Helper()
	for i := 0; i < len(cs); i += 1000 {
		if _, err := s.Put(context.Background(), cs[i:min(i+1000, len(cs))]); err != nil {
			t.Fatalf("put: %v", err)
		}
	}
}

func dot(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

// exact is the reference: cosine (dot of unit vectors) over every candidate.
func exact(q []float32, vecs map[cards.Key]cards.Embedding, k int) []cards.Key {
	type kv struct {
		k cards.Key
		s float64
	}
	var all []kv
	for key, e := range vecs {
		all = append(all, kv{key, dot(q, e.Vector)})
	}
	slices.SortFunc(all, func(a, b kv) int {
		if a.s != b.s {
			if a.s > b.s {
				return -1
			}
			return 1
		}
		return strings.Compare(a.k.String(), b.k.String())
	})
	out := []cards.Key{}
	for _, x := range all[:min(k, len(all))] {
		out = append(out, x.k)
	}
	return out
}

// TestFilteredRecall: 10,000 cards, one tenant owning 1% of them. A search
// for that tenant, and one restricted to 1% of the big tenant's cards (as a
// caller with few scopes would be), both return a full top-N, equal to the
// exact search over the same vectors, through the HNSW index.
func TestFilteredRecall(t *testing.T) {
	if testing.Short() {
		t.Skip("10,000 cards: not in -short")
	}
	ctx := context.Background()
	store := pgtest.Open(t, pgtest.Options{URL: pgtest.BulkURL(t)})
	emb := embed.NewHashed(embed.DefaultDim)
	model, dim := emb.Model(), emb.Dim()

	// Load first, index after (an HNSW index built in one go is much
	// faster than one grown row by row).
	if err := store.DropVectorIndex(ctx, model, dim); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	big := catalogue(9900, 1, "big")
	small := catalogue(100, 2, "small")
	putAll(t, store, big)
	putAll(t, store, small)
	idx := pgvec.New(store, model, dim).WithTimeout(time.Minute)
	ret, err := retriever.New(ctx, store, emb, nil, retriever.WithVectors(idx))
	if err != nil {
		t.Fatal(err)
	}
	defer ret.Close()
	t.Logf("10,000 cards stored and embedded in %s", time.Since(start).Round(time.Millisecond))
	start = time.Now()
	if err := store.EnsureVectorIndex(ctx, model, dim); err != nil {
		t.Fatal(err)
	}
	if err := store.Analyze(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("HNSW index built in %s", time.Since(start).Round(time.Millisecond))

	keysOf := func(cs []cards.Card) []cards.Key {
		out := make([]cards.Key, len(cs))
		for i := range cs {
			out[i] = cs[i].Key()
		}
		return out
	}
	smallVecs, err := store.Embeddings(ctx, model, keysOf(small))
	if err != nil || len(smallVecs) != 100 {
		t.Fatalf("small tenant vectors: %d, %v", len(smallVecs), err)
	}
	// 1% of the big tenant: every 100th card.
	var subset []cards.Card
	for i := 0; i < len(big); i += 100 {
		subset = append(subset, big[i])
	}
	subsetVecs, err := store.Embeddings(ctx, model, keysOf(subset))
	if err != nil || len(subsetVecs) != len(subset) {
		t.Fatalf("subset vectors: %d, %v", len(subsetVecs), err)
	}
	subsetIDs := make([]string, len(subset))
	for i := range subset {
		subsetIDs[i] = retriever.DocID(subset[i].Key())
	}

	queries := []string{"cancel an unpaid invoice", "list failed deployments", "approve a refund", "export monthly report",
		"search open tickets", "update customer account", "delete archived files", "sync employee roles"}
	const topN = 10
	cases := []struct {
		name   string
		filter retriever.Filter
		vecs   map[cards.Key]cards.Embedding
	}{
		{"tenant with 1% of the cards", retriever.Filter{Tenant: "small"}, smallVecs},
		{"1% of a tenant's cards by ID", retriever.Filter{Tenant: "big", IDs: subsetIDs}, subsetVecs},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, qs := range queries {
				qv, err := emb.Embed(ctx, []string{qs})
				if err != nil {
					t.Fatal(err)
				}
				hits, err := idx.Search(ctx, qv[0], tc.filter, topN)
				if err != nil {
					t.Fatalf("%q: %v", qs, err)
				}
				if len(hits) != topN {
					t.Fatalf("%q: %d hits, want a full top-%d", qs, len(hits), topN)
				}
				var got []cards.Key
				for _, h := range hits {
					k, _ := retriever.ParseDocID(h.ID)
					got = append(got, k)
				}
				if want := exact(qv[0], tc.vecs, topN); !slices.Equal(got, want) {
					t.Errorf("%q:\n got  %v\n want %v (exact)", qs, got, want)
				}
			}
		})
	}

	// With real statistics the planner takes the HNSW index for a
	// tenant-wide search and for the candidate-ID filter (iterative scans do
	// the filtering), and may scan the small tenant's rows exactly.
	qv, _ := emb.Embed(ctx, []string{"approve a refund"})
	subsetKeys := keysOf(subset)
	for _, p := range []struct {
		name     string
		q        postgres.VectorQuery
		wantHNSW bool
	}{
		{"big tenant", postgres.VectorQuery{Tenant: "big"}, true},
		{"1% of the big tenant by ID", postgres.VectorQuery{Tenant: "big", Keys: subsetKeys}, false},
		{"small tenant", postgres.VectorQuery{Tenant: "small"}, false},
	} {
		p.q.Model, p.q.Dim, p.q.Vector, p.q.K = model, dim, qv[0], topN
		plan, err := store.ExplainVectorSearch(ctx, p.q)
		if err != nil {
			t.Fatal(err)
		}
		uses := strings.Contains(plan, postgres.VectorIndexName(model, dim))
		t.Logf("%s: HNSW index used: %v", p.name, uses)
		if p.wantHNSW && !uses {
			t.Errorf("%s: the search does not use the HNSW index:\n%s", p.name, plan)
		}
	}

	// Forced through the HNSW index, the selective filters still give a
	// full top-N thanks to iterative scans (HNSW is approximate: require
	// 90% of the exact top-N, and report what was found); without them the
	// index scan stops after ef_search (40) neighbours, most of them
	// filtered out, and returns too few.
	for _, tc := range cases {
		var found, total, withoutIter int
		for _, qs := range queries {
			qv, _ := emb.Embed(ctx, []string{qs})
			q := postgres.VectorQuery{Model: model, Dim: dim, Tenant: tc.filter.Tenant, Vector: qv[0], K: topN, ForceIndex: true}
			if tc.filter.IDs != nil {
				q.Keys = subsetKeys
			}
			plan, err := store.ExplainVectorSearch(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(plan, postgres.VectorIndexName(model, dim)) {
				t.Fatalf("%s: ForceIndex did not force the HNSW index:\n%s", tc.name, plan)
			}
			hits, err := store.SearchVectors(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if len(hits) != topN {
				t.Errorf("%s, HNSW forced, %q: %d hits, want a full top-%d", tc.name, qs, len(hits), topN)
			}
			want := exact(qv[0], tc.vecs, topN)
			for _, h := range hits {
				if slices.Contains(want, h.Key) {
					found++
				}
			}
			total += topN
			q.NoIterativeScan = true
			few, err := store.SearchVectors(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			withoutIter += len(few)
		}
		t.Logf("%s, HNSW forced: recall@%d %.3f against exact search; without iterative scans %d of %d rows",
			tc.name, topN, float64(found)/float64(total), withoutIter, total)
		if float64(found)/float64(total) < 0.9 {
			t.Errorf("%s, HNSW forced: recall@%d %.3f, want >= 0.9", tc.name, topN, float64(found)/float64(total))
		}
	}

	// And through the retriever: the semantic leg answers for the small
	// tenant too.
	res, err := ret.Discover(ctx, retriever.Request{Caller: retriever.Caller{Tenant: "small", Scopes: []string{"*"}}, Query: "approve a refund", TopK: 5})
	if err != nil {
		t.Fatal(err)
	}
	if res.Degraded || len(res.Tools) != 5 || res.Tools[0].Scores.SemanticRank == 0 && res.Tools[1].Scores.SemanticRank == 0 {
		t.Errorf("Discover = degraded %v, %d tools, first %+v", res.Degraded, len(res.Tools), res.Tools)
	}
}

// TestScopesSelectLikeIDs: a restricted caller's candidates selected in SQL
// by its scopes (the covered scopes against each vector's copy of its
// card's required scopes) give the same hits as the list of their IDs, by
// the exact scan and through the HNSW index, for scope sets with exact
// scopes, "p:*" prefixes and "*", over cards with none, one or several
// required scopes, beside another tenant's cards and a revoked card that
// the scopes would cover.
func TestScopesSelectLikeIDs(t *testing.T) {
	ctx := context.Background()
	store := pgtest.Open(t, pgtest.Options{})
	emb := embed.NewHashed(embed.DefaultDim)
	required := [][]string{nil, {"billing:read"}, {"billing:write"}, {"crm:read"}, {"crm:read", "billing:read"},
		{"support:write"}, {"billing:refunds:issue"}, {"crm:write", "support:write"}, {"ops"}}
	cs := catalogue(300, 5, "acme")
	for i := range cs {
		cs[i].RequiredScopes = required[i%len(required)]
	}
	other := catalogue(40, 6, "globex")
	putAll(t, store, append(slices.Clone(cs), other...))
	old := cs[1]
	old.Status = cards.StatusRevoked
	putAll(t, store, []cards.Card{old})
	idx, _ := pgRetriever(t, store, emb)
	qs, err := emb.Embed(ctx, []string{"refund an unpaid invoice", "list open tickets", "export the monthly report"})
	if err != nil {
		t.Fatal(err)
	}
	for _, plan := range bothPlans {
		idx.WithExactScanMax(plan.exactMax)
		for _, scopes := range [][]string{{"billing:read"}, {"billing:*"}, {"billing:*", "crm:read"}, {"crm:*"}, {"ops", "support:write"}, {"nothing:here"}} {
			ids, covered := []string{}, []string{}
			for _, c := range cs {
				if c.Key() != old.Key() && retriever.HoldsAll(scopes, c.RequiredScopes) {
					ids = append(ids, retriever.DocID(c.Key()))
					covered = append(covered, c.RequiredScopes...)
				}
			}
			slices.Sort(covered)
			covered = slices.Compact(covered)
			for _, k := range []int{5, 200} {
				for qi, q := range qs {
					want, err := idx.Search(ctx, q, retriever.Filter{Tenant: "acme", IDs: ids}, k)
					if err != nil {
						t.Fatal(err)
					}
					got, err := idx.Search(ctx, q, retriever.Filter{Tenant: "acme", IDs: ids, Scopes: scopes, Covered: covered, TenantCards: len(cs)}, k)
					if err != nil {
						t.Fatal(err)
					}
					if len(want) == 0 && len(ids) > 0 {
						t.Fatalf("%v: no hits by IDs", scopes)
					}
					if !slices.EqualFunc(got, want, func(a, b retriever.Hit) bool { return a.ID == b.ID && a.Score == b.Score }) {
						t.Fatalf("%s: scopes %v, k %d, query %d: %d hits by scopes, %d by IDs\n got %v\nwant %v", plan.name, scopes, k, qi, len(got), len(want), got, want)
					}
				}
			}
		}
	}
}

// TestScopeFilterFollowsCards: the scopes and status each vector carries
// (migration 9) follow its card, so a restricted caller's vector search
// never returns a card whose scopes changed out of its reach or that was
// revoked, and does return one whose scopes changed into it, by either
// plan. Scopes the caller does not cover are not trusted from the filter:
// a covered set that names them selects nothing more.
func TestScopeFilterFollowsCards(t *testing.T) {
	ctx := context.Background()
	store := pgtest.Open(t, pgtest.Options{})
	emb := embed.NewHashed(embed.DefaultDim)
	cs := catalogue(60, 8, "acme")
	for i := range cs {
		cs[i].RequiredScopes = []string{[]string{"billing:read", "crm:read", "ops"}[i%3]}
	}
	putAll(t, store, cs)
	idx, ret := pgRetriever(t, store, emb)

	// cs[0] (billing:read) leaves the caller's reach, cs[3] (billing:read)
	// is revoked, cs[1] (crm:read) comes into it, after their vectors were
	// written; cs[6] gets a new summary, so a new vector, keeping its scope.
	moved, revoked, joined, rewritten := cs[0], cs[3], cs[1], cs[6]
	moved.RequiredScopes = []string{"admin:root"}
	revoked.Status = cards.StatusRevoked
	joined.RequiredScopes = []string{"billing:write"}
	rewritten.Summary = "A new summary for a card that keeps its scope."
	putAll(t, store, []cards.Card{moved, revoked, joined, rewritten})
	if err := ret.Sync(ctx); err != nil {
		t.Fatal(err)
	}

	scopes := []string{"billing:*"}
	want := map[string]bool{}
	for i, c := range cs {
		if i%3 == 0 && i != 0 && i != 3 || i == 1 {
			want[retriever.DocID(c.Key())] = true
		}
	}
	q, err := emb.Embed(ctx, []string{"refund an unpaid invoice"})
	if err != nil {
		t.Fatal(err)
	}
	for _, plan := range bothPlans {
		idx.WithExactScanMax(plan.exactMax)
		for _, covered := range [][]string{{"billing:read", "billing:write"}, {"admin:root", "billing:read", "billing:write", "crm:read", "ops"}} {
			hits, err := idx.Search(ctx, q[0], retriever.Filter{Tenant: "acme", IDs: []string{"x"}, Scopes: scopes, Covered: covered, TenantCards: len(cs)}, 200)
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, h := range hits {
				got[h.ID] = true
			}
			if !maps.Equal(got, want) {
				t.Errorf("%s, covered %v: hits %v, want %v", plan.name, covered, slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
			}
		}
	}
}

// TestMigrationCopiesScopes: migration 9 gives the vectors stored before it
// their cards' scopes and status, keeps every HNSW index (dropped for the
// copy and built again) and indexes the scopes.
func TestMigrationCopiesScopes(t *testing.T) {
	ctx := context.Background()
	store := pgtest.Open(t, pgtest.Options{MigrateTo: 8})
	emb := embed.NewHashed(embed.DefaultDim)
	if err := store.EnsureVectorIndex(ctx, "other-model", 8); err != nil {
		t.Fatal(err)
	}
	cs := catalogue(30, 9, "acme")
	for i := range cs {
		cs[i].RequiredScopes = [][]string{nil, {"billing:read"}, {"crm:read", "ops"}}[i%3]
	}
	putAll(t, store, cs)
	revoked := cs[4]
	revoked.Status = cards.StatusRevoked
	putAll(t, store, []cards.Card{revoked})
	var es []cards.Embedding
	for _, c := range cs {
		v, err := emb.Embed(ctx, []string{c.Summary})
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, cards.Embedding{Key: c.Key(), Model: emb.Model(), TextHash: "h", Vector: v[0]},
			cards.Embedding{Key: c.Key(), Model: "other-model", TextHash: "h", Vector: make([]float32, 8)})
	}
	if err := store.PutEmbeddings(ctx, es); err != nil {
		t.Fatal(err)
	}
	indexes := func() []string { return embeddingIndexes(t, store) }
	before := indexes()
	if _, err := store.MigrateTo(ctx, 9); err != nil {
		t.Fatal(err)
	}
	want := slices.Sorted(slices.Values(append(slices.Clone(before), "card_embeddings_scopes")))
	if after := indexes(); len(before) != 3 || !slices.Equal(after, want) {
		t.Errorf("indexes after migration 9: %v, want %v (the key, two HNSW indexes, the scopes)", after, want)
	}
	rows, err := store.Pool().Query(ctx, fmt.Sprintf(`SELECT server, name, model, required_scopes, active FROM %q.card_embeddings`, store.Schema()))
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		server, name, model string
		scopes              []string
		active              bool
	}
	got, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (row, error) {
		var x row
		err := r.Scan(&x.server, &x.name, &x.model, &x.scopes, &x.active)
		return x, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2*len(cs) {
		t.Fatalf("%d vector rows, want %d", len(got), 2*len(cs))
	}
	byKey := map[cards.Key]cards.Card{}
	for _, c := range cs {
		byKey[c.Key()] = c
	}
	for _, r := range got {
		c := byKey[cards.Key{Tenant: "acme", Server: r.server, Name: r.name}]
		if want := c.RequiredScopes; !slices.Equal(r.scopes, want) && len(r.scopes)+len(want) > 0 {
			t.Errorf("%s/%s %s: scopes %v, want %v", r.server, r.name, r.model, r.scopes, want)
		}
		if want := c.Key() != revoked.Key(); r.active != want {
			t.Errorf("%s/%s %s: active %v, want %v", r.server, r.name, r.model, r.active, want)
		}
	}
}

// bothPlans are the two ways pgvec searches a restricted caller's vectors,
// forced by WithExactScanMax: an exact scan of the rows its scopes select,
// the HNSW index.
var bothPlans = []struct {
	name     string
	exactMax int
}{{"exact", pgvec.DefaultExactScanMax}, {"hnsw", -1}}

// TestMigrationNumbersScopeSets: migration 10 gives every card and each of
// its vectors the number of its tenant's set of required scopes (one per
// tenant and set: two tenants requiring the same scopes get two), keeps
// every HNSW index, replaces the scopes' GIN index by the scope sets' one,
// and moves vectors stored out of line (a 584-dimension vector makes a row
// over 2 kB) back into their rows, unchanged; a card whose scopes change to
// a new set gets a new number, and so do its vectors.
func TestMigrationNumbersScopeSets(t *testing.T) {
	ctx := context.Background()
	store := pgtest.Open(t, pgtest.Options{MigrateTo: 9})
	small, big := embed.NewHashed(embed.DefaultDim), embed.NewHashed(584)
	if err := store.EnsureVectorIndex(ctx, big.Model(), big.Dim()); err != nil {
		t.Fatal(err)
	}
	sets := [][]string{nil, {"billing:read"}, {"crm:read", "ops"}}
	var cs []cards.Card
	for _, tenant := range []string{"acme", "globex"} {
		for i, c := range catalogue(12, 11, tenant) {
			c.RequiredScopes = sets[i%3]
			cs = append(cs, c)
		}
	}
	putAll(t, store, cs)
	var es []cards.Embedding
	for _, c := range cs {
		for _, emb := range []embed.Embedder{small, big} {
			v, err := emb.Embed(ctx, []string{c.Summary})
			if err != nil {
				t.Fatal(err)
			}
			es = append(es, cards.Embedding{Key: c.Key(), Model: emb.Model(), TextHash: "h", Vector: v[0]})
		}
	}
	if err := store.PutEmbeddings(ctx, es); err != nil {
		t.Fatal(err)
	}
	sql := func(q string) string { return strings.ReplaceAll(q, "{s}", fmt.Sprintf("%q", store.Schema())) }
	count := func(q string) int {
		t.Helper()
		var n int
		if err := store.Pool().QueryRow(ctx, sql(q)).Scan(&n); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		return n
	}
	// The rows of card_embeddings' TOAST table (live ones).
	var toast string
	if err := store.Pool().QueryRow(ctx, sql(`SELECT reltoastrelid::regclass::text FROM pg_class WHERE oid = '{s}.card_embeddings'::regclass`)).Scan(&toast); err != nil {
		t.Fatal(err)
	}
	if n := count(`SELECT count(*) FROM ` + toast); n == 0 {
		t.Fatalf("before migration 10: no vector stored out of line (%s is empty)", toast)
	}
	keys := make([]cards.Key, len(cs))
	for i, c := range cs {
		keys[i] = c.Key()
	}
	before, err := store.Embeddings(ctx, big.Model(), keys)
	if err != nil {
		t.Fatal(err)
	}
	indexes := func() []string { return embeddingIndexes(t, store) }
	hnsw := []string{postgres.VectorIndexName(small.Model(), small.Dim()), postgres.VectorIndexName(big.Model(), big.Dim())}

	if _, err := store.MigrateTo(ctx, 10); err != nil {
		t.Fatal(err)
	}
	want := slices.Sorted(slices.Values(append(slices.Clone(hnsw), "card_embeddings_pkey", "card_embeddings_scope_set")))
	if got := indexes(); !slices.Equal(got, want) {
		t.Errorf("indexes after migration 10: %v, want %v", got, want)
	}
	if n := count(`SELECT count(*) FROM ` + toast); n != 0 {
		t.Errorf("after migration 10: %d chunks of vectors out of line, want none", n)
	}
	after, err := store.Embeddings(ctx, big.Model(), keys)
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(cs) || !maps.EqualFunc(before, after, func(a, b cards.Embedding) bool { return slices.Equal(a.Vector, b.Vector) }) {
		t.Errorf("the %d-dimension vectors changed in migration 10 (%d before, %d after)", big.Dim(), len(before), len(after))
	}
	// Each card and vector has its tenant's set of its scopes; one set per
	// tenant and scopes.
	checkSets := func(when string) {
		t.Helper()
		if n := count(`SELECT count(*) FROM {s}.cards c LEFT JOIN {s}.card_scope_sets x ON x.id = c.scope_set
			WHERE x.id IS NULL OR x.tenant <> c.tenant OR x.scopes <> c.required_scopes`); n != 0 {
			t.Errorf("%s: %d cards without their own scope set", when, n)
		}
		if n := count(`SELECT count(*) FROM {s}.card_embeddings e JOIN {s}.cards c USING (tenant, server, name)
			WHERE e.scope_set IS DISTINCT FROM c.scope_set`); n != 0 {
			t.Errorf("%s: %d vectors whose scope set is not their card's", when, n)
		}
		if n, m := count(`SELECT count(*) FROM {s}.card_scope_sets`), count(`SELECT count(DISTINCT (tenant, required_scopes)) FROM {s}.cards`); n != m {
			t.Errorf("%s: %d scope sets for %d distinct (tenant, scopes)", when, n, m)
		}
	}
	checkSets("after migration 10")
	if n := count(`SELECT count(DISTINCT scope_set) FROM {s}.cards WHERE required_scopes = '{billing:read}'`); n != 2 {
		t.Errorf("the two tenants requiring {billing:read} have %d scope set numbers between them, want 2", n)
	}

	moved := cs[1]
	moved.RequiredScopes = []string{"billing:read", "hr:read"}
	putAll(t, store, []cards.Card{moved})
	checkSets("after a card moved to a new set")
	if n := count(`SELECT count(*) FROM {s}.card_scope_sets WHERE scopes = '{billing:read,hr:read}'`); n != 1 {
		t.Errorf("%d scope sets {billing:read,hr:read}, want 1", n)
	}
}

// TestExactScanReadsScopeSets: a restricted caller's exact scan reads its
// rows through the scope sets' index (migration 10), not the whole tenant,
// and its settings end with the search: the connection's own are as
// before, by the simple protocol and the extended one alike.
func TestExactScanReadsScopeSets(t *testing.T) {
	ctx := context.Background()
	for _, mode := range []string{"simple_protocol", "exec"} {
		t.Run(mode, func(t *testing.T) {
			url := pgtest.URL(t)
			url = regexp.MustCompile(`default_query_exec_mode=[a-z_]+`).ReplaceAllString(url, "default_query_exec_mode="+mode)
			if !strings.Contains(url, mode) {
				url += map[bool]string{false: "?", true: "&"}[strings.Contains(url, "?")] + "default_query_exec_mode=" + mode
			}
			store := pgtest.Open(t, pgtest.Options{URL: url, MaxConns: 1})
			emb := embed.NewHashed(embed.DefaultDim)
			cs := catalogue(200, 12, "acme")
			for i := range cs {
				cs[i].RequiredScopes = [][]string{{"billing:read"}, {"crm:read"}, {"ops"}, nil}[i%4]
			}
			putAll(t, store, cs)
			pgRetriever(t, store, emb) // embeds and stores the vectors
			qv, err := emb.Embed(ctx, []string{"refund an unpaid invoice"})
			if err != nil {
				t.Fatal(err)
			}
			q := postgres.VectorQuery{Model: emb.Model(), Dim: emb.Dim(), Tenant: "acme", Vector: qv[0], K: 200,
				Within: []string{"billing:read"}, Exact: true}
			plan, err := store.ExplainVectorSearch(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(plan, "card_embeddings_scope_set") || strings.Contains(plan, "Seq Scan on card_embeddings") {
				t.Errorf("the exact scan does not read the scope sets' index:\n%s", plan)
			}
			settings := func() string {
				var s string
				if err := store.Pool().QueryRow(ctx, `SELECT concat_ws(' ', current_setting('enable_seqscan'), current_setting('enable_indexscan'),
					current_setting('enable_bitmapscan'), current_setting('jit'), current_setting('effective_io_concurrency'))`).Scan(&s); err != nil {
					t.Fatal(err)
				}
				return s
			}
			was := settings()
			for _, exact := range []bool{true, false} {
				q.Exact = exact
				hits, err := store.SearchVectors(ctx, q)
				if err != nil {
					t.Fatal(err)
				}
				if len(hits) != 100 {
					t.Errorf("exact %v: %d hits, want the 100 cards requiring billing:read or nothing", exact, len(hits))
				}
				if now := settings(); now != was {
					t.Errorf("exact %v: after the search the connection's settings are %q, were %q", exact, now, was)
				}
			}
		})
	}
}

// embeddingIndexes are the names of the indexes of store's card_embeddings.
func embeddingIndexes(t *testing.T, store *postgres.Store) []string {
	t.Helper()
	rows, err := store.Pool().Query(context.Background(), `SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND tablename = 'card_embeddings' ORDER BY 1`, store.Schema())
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// pgRetriever is a retriever over store whose vector leg is pgvec (its
// index returned too), closed when the test ends.
func pgRetriever(t *testing.T, store *postgres.Store, emb embed.Embedder) (*pgvec.Index, *retriever.Retriever) {
	t.Helper()
	idx := pgvec.New(store, emb.Model(), emb.Dim()).WithTimeout(time.Minute)
	ret, err := retriever.New(context.Background(), store, emb, nil, retriever.WithVectors(idx))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ret.Close() })
	return idx, ret
}

// TestSearchStatements: every kind of vector search runs with JIT off, in
// the batch that runs it (EXPLAIN's SETTINGS line of that batch); an exact
// search is a bounded sort over the rows its filter selects, with no CTE
// and no HNSW index, whose restricted form does not prefetch the bitmap's
// pages; and the exact search's answers are those of the statement it
// replaced (the distance on the column cast to the model's dimension,
// inside a materialised CTE), distances bit for bit.
func TestSearchStatements(t *testing.T) {
	ctx := context.Background()
	store := pgtest.Open(t, pgtest.Options{MaxConns: 1})
	emb := embed.NewHashed(embed.DefaultDim)
	cs := catalogue(300, 14, "acme")
	for i := range cs {
		cs[i].RequiredScopes = [][]string{{"billing:read"}, {"crm:read"}, {"billing:read", "crm:read"}, nil}[i%4]
	}
	putAll(t, store, cs)
	pgRetriever(t, store, emb)
	// Ties: the first half of the cards by name take the vectors of the
	// second half's, so the order among equal distances (server, name)
	// counts. The rows written again go to the end of the table: in the
	// table's order, each copy comes after the card it copies.
	if _, err := store.Pool().Exec(ctx, fmt.Sprintf(`WITH n AS (
		SELECT server, name, embedding, row_number() OVER (ORDER BY name) AS i FROM %[1]q.card_embeddings)
		UPDATE %[1]q.card_embeddings e SET embedding = o.embedding FROM n t, n o
		WHERE o.i = t.i + 150 AND e.server = t.server AND e.name = t.name`, store.Schema())); err != nil {
		t.Fatal(err)
	}
	qv, err := emb.Embed(ctx, []string{"refund an unpaid invoice", "list open tickets", "sync employee roles"})
	if err != nil {
		t.Fatal(err)
	}
	var prefetchDefault string
	if err := store.Pool().QueryRow(ctx, `SELECT boot_val FROM pg_settings WHERE name = 'effective_io_concurrency'`).Scan(&prefetchDefault); err != nil {
		t.Fatal(err)
	}
	keys := []cards.Key{cs[0].Key(), cs[5].Key(), cs[10].Key()}
	within := []string{"billing:read"}
	hnsw := postgres.VectorIndexName(emb.Model(), emb.Dim())
	for _, tc := range []struct {
		name     string
		q        postgres.VectorQuery
		prefetch bool // the bitmap's pages prefetched (effective_io_concurrency left as it is)
	}{
		{"tenant, HNSW", postgres.VectorQuery{}, true},
		{"keys, HNSW", postgres.VectorQuery{Keys: keys}, true},
		{"scopes, HNSW", postgres.VectorQuery{Within: within}, true},
		{"scopes, HNSW forced", postgres.VectorQuery{Within: within, ForceIndex: true}, true},
		{"tenant, exact", postgres.VectorQuery{Exact: true}, true},
		{"keys, exact", postgres.VectorQuery{Keys: keys, Exact: true}, true},
		{"scopes, exact", postgres.VectorQuery{Within: within, Exact: true}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := tc.q
			q.Model, q.Dim, q.Tenant, q.Vector, q.K = emb.Model(), emb.Dim(), "acme", qv[0], 20
			plan, err := store.ExplainVectorSearch(ctx, q)
			if err != nil {
				t.Fatal(err)
			}
			settings := regexp.MustCompile(`(?m)^\s*Settings: (.*)$`).FindStringSubmatch(plan)
			if settings == nil || !strings.Contains(settings[1], "jit = 'off'") {
				t.Errorf("the search does not run with JIT off:\n%s", plan)
			}
			if off := settings != nil && strings.Contains(settings[1], "effective_io_concurrency = '0'"); off == tc.prefetch && prefetchDefault != "0" {
				t.Errorf("effective_io_concurrency set to 0: %v, want %v:\n%s", off, !tc.prefetch, plan)
			}
			if q.Exact && (strings.Contains(plan, "CTE") || strings.Contains(plan, hnsw)) {
				t.Errorf("the exact search goes through a CTE or the HNSW index:\n%s", plan)
			}
		})
	}

	// The statement the exact search replaced, by hand.
	before := fmt.Sprintf(`WITH r AS MATERIALIZED (
	SELECT e.server, e.name, e.embedding::vector(%[1]d) <=> $1::vector(%[1]d) AS distance
	FROM %[2]q.card_embeddings e
	WHERE e.model = $2 AND e.tenant = 'acme' AND e.active AND e.required_scopes <@ $3::text[]
)
SELECT server, name, distance FROM r ORDER BY distance, server, name LIMIT $4`, emb.Dim(), store.Schema())
	for _, scopes := range [][]string{{"billing:read"}, {"billing:read", "crm:read"}, {}} {
		for _, k := range []int{5, 200} {
			for qi, v := range qv {
				got, err := store.SearchVectors(ctx, postgres.VectorQuery{Model: emb.Model(), Dim: emb.Dim(), Tenant: "acme",
					Vector: v, K: k, Within: scopes, Exact: true})
				if err != nil {
					t.Fatal(err)
				}
				rows, err := store.Pool().Query(ctx, before, pgvector.NewVector(v), emb.Model(), scopes, k)
				if err != nil {
					t.Fatal(err)
				}
				var want []postgres.VectorHit
				for rows.Next() {
					var h postgres.VectorHit
					var d float64
					if err := rows.Scan(&h.Key.Server, &h.Key.Name, &d); err != nil {
						t.Fatal(err)
					}
					h.Key.Tenant, h.Similarity = "acme", 1-d
					want = append(want, h)
				}
				if err := rows.Err(); err != nil {
					t.Fatal(err)
				}
				if len(want) == 0 && len(scopes) > 0 {
					t.Fatalf("scopes %v: no rows by the statement before", scopes)
				}
				if !slices.Equal(got, want) {
					t.Errorf("scopes %v, k %d, query %d:\n got %v\nwant %v", scopes, k, qi, got, want)
				}
			}
		}
	}
}
