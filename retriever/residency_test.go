package retriever_test

import (
	"context"
	"fmt"
	"math/rand"
	"reflect"
	"sync"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/synth"
	"github.com/seed0cff8200/cardex/retriever"
)

// residencyTenants is a small multi-tenant catalogue of skewed sizes.
func residencyTenants(t *testing.T) (cards.Store, []string) {
	t.Helper()
	sizes := []int{120, 60, 30, 30, 15, 8, 4, 1}
	var all []cards.Card
	var tenants []string
	for i, n := range sizes {
		tenant := fmt.Sprintf("t%02d", i)
		tenants = append(tenants, tenant)
		all = append(all, synth.Catalogue(n, int64(i+1), tenant)...)
	}
	return newStore(t, all...), tenants
}

// comparable strips what legitimately differs between two views' answers:
// the time the legs took.
func comparable(r retriever.Result) retriever.Result {
	r.Timings = retriever.Timings{}
	return r
}

// A view holding tenants on demand under a small budget answers every
// request exactly as a view holding every tenant, whatever it had to load
// and evict to do so.
func TestResidencyAnswersAsTheWholeView(t *testing.T) {
	st, tenants := residencyTenants(t)
	whole := newRetriever(t, st, nil)
	held := newRetrieverWith(t, st, retriever.WithResidency(retriever.Residency{Budget: 400 << 10}))
	if s, ok := held.Residency(); !ok || s.Tenants != 0 || s.Cards != 0 {
		t.Fatalf("before any request: %+v %v, want nothing held", s, ok)
	}
	queries := synth.Queries(6, 7)
	rng := rand.New(rand.NewSource(1))
	ctx := context.Background()
	for round := range 40 {
		tenant := tenants[rng.Intn(len(tenants))]
		scopes := []string{"*"}
		if round%3 == 1 {
			scopes = synth.RestrictedScopes
		}
		req := retriever.Request{Caller: retriever.Caller{Tenant: tenant, Subject: "s", Scopes: scopes}, Query: queries[round%len(queries)]}
		if round%4 == 3 {
			req.Intents = queries[:2]
		}
		want, err := whole.Discover(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := held.Discover(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(comparable(got), comparable(want)) {
			t.Fatalf("round %d, tenant %s: the resident view answered\n%+v\nthe whole view\n%+v", round, tenant, comparable(got), comparable(want))
		}
		wantS, _, err := whole.Search(ctx, req.Caller, "", 50, "")
		if err != nil {
			t.Fatal(err)
		}
		gotS, _, err := held.Search(ctx, req.Caller, "", 50, "")
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(gotS, wantS) {
			t.Fatalf("round %d: Search differs", round)
		}
		if len(want.Tools) > 0 {
			k := want.Tools[0].Card.Key()
			wantD, err1 := whole.Describe(ctx, req.Caller, k.Name, k.Server)
			gotD, err2 := held.Describe(ctx, req.Caller, k.Name, k.Server)
			if err1 != nil || err2 != nil || !reflect.DeepEqual(gotD, wantD) {
				t.Fatalf("round %d: Describe differs: %v %v", round, err1, err2)
			}
		}
	}
	s, _ := held.Residency()
	if s.Loads < 8 || s.Evictions == 0 {
		t.Errorf("stats %+v: want every tenant loaded and some evicted under the budget", s)
	}
	if s.Bytes > s.Budget+maxTenantBytes(t, st, tenants) {
		t.Errorf("held %d bytes, budget %d", s.Bytes, s.Budget)
	}
	if s.Tenants >= len(tenants) {
		t.Errorf("held %d tenants of %d under a budget that fits a few", s.Tenants, len(tenants))
	}
}

// maxTenantBytes is the largest tenant's size: the budget may be exceeded
// by the tenant just loaded.
func maxTenantBytes(t *testing.T, st cards.Store, tenants []string) int64 {
	t.Helper()
	var max int64
	for _, tenant := range tenants {
		r := newRetrieverWith(t, st, retriever.WithResidency(retriever.Residency{Assigned: func(x string) bool { return x == tenant }}))
		if s, _ := r.Residency(); s.Bytes > max {
			max = s.Bytes
		}
	}
	return max
}

// Assigned tenants are held from the start, follow the store's changes
// and are never evicted; other tenants' changes are not applied until the
// tenant is asked for, and then it is current.
func TestResidencyAssignedAndChanges(t *testing.T) {
	st, tenants := residencyTenants(t)
	shard := retriever.Shard(0, 2)
	var mine, other string
	for _, tenant := range tenants {
		switch {
		case shard(tenant) && mine == "":
			mine = tenant
		case !shard(tenant) && other == "":
			other = tenant
		}
	}
	if mine == "" || other == "" {
		t.Fatalf("shard 0/2 splits %q into none", tenants)
	}
	r := newRetrieverWith(t, st, retriever.WithResidency(retriever.Residency{Assigned: shard, Budget: 1}))
	s, _ := r.Residency()
	if s.Tenants == 0 || s.Loads != 0 {
		t.Fatalf("start: %+v, want the assigned tenants held without loads", s)
	}
	ctx := context.Background()
	newCard := func(tenant, name string) cards.Card {
		return cards.Card{Tenant: tenant, Server: "zz", Name: name, Kind: cards.KindFunction, Summary: "Frobnicates the quuxified widget ledger", Status: cards.StatusActive}
	}
	put(t, st, newCard(mine, "frob_mine"), newCard(other, "frob_other"))
	syncView(t, r)
	before, _ := r.Residency()
	if before.Cards != s.Cards+1 {
		t.Errorf("after a write to an assigned and to another tenant: %d cards held, want %d (only the assigned one's)", before.Cards, s.Cards+1)
	}
	for _, tenant := range []string{mine, other, mine} {
		res, err := r.Discover(ctx, retriever.Request{Caller: retriever.Caller{Tenant: tenant, Subject: "s", Scopes: []string{"*"}}, Query: "frobnicate quuxified widget ledger"})
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Tools) == 0 || res.Tools[0].Card.Server != "zz" {
			t.Errorf("tenant %s: the new card is not first: %v", tenant, res.Tools)
		}
	}
	after, _ := r.Residency()
	if after.Loads != 1 {
		t.Errorf("loads = %d, want 1 (the other tenant, once)", after.Loads)
	}
	// The budget of 1 byte evicts the on-demand tenant at the next load,
	// never the assigned one.
	third := ""
	for _, tenant := range tenants {
		if !shard(tenant) && tenant != other {
			third = tenant
			break
		}
	}
	if _, err := r.Discover(ctx, retriever.Request{Caller: retriever.Caller{Tenant: third, Subject: "s", Scopes: []string{"*"}}, Query: "invoice"}); err != nil {
		t.Fatal(err)
	}
	final, _ := r.Residency()
	if final.Evictions != 1 || final.Cards < s.Cards+1 {
		t.Errorf("after a third tenant: %+v, want one eviction and the assigned tenants kept", final)
	}
}

// Concurrent requests for many tenants under a budget that forces
// evictions all the time answer as the whole view does (run with -race).
func TestResidencyConcurrent(t *testing.T) {
	st, tenants := residencyTenants(t)
	whole := newRetriever(t, st, nil)
	held := newRetrieverWith(t, st, retriever.WithResidency(retriever.Residency{Budget: 1}))
	queries := synth.Queries(4, 3)
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				tenant := tenants[(w+i)%len(tenants)]
				req := retriever.Request{Caller: retriever.Caller{Tenant: tenant, Subject: "s", Scopes: []string{"*"}}, Query: queries[i%len(queries)]}
				want, err1 := whole.Discover(ctx, req)
				got, err2 := held.Discover(ctx, req)
				if err1 != nil || err2 != nil {
					t.Errorf("Discover: %v %v", err1, err2)
					return
				}
				if !reflect.DeepEqual(comparable(got), comparable(want)) {
					t.Errorf("worker %d, tenant %s: answers differ", w, tenant)
					return
				}
			}
		}()
	}
	wg.Wait()
	if s, _ := held.Residency(); s.Evictions == 0 {
		t.Errorf("no eviction under a 1-byte budget: %+v", s)
	}
}
