package retriever

import (
	"container/list"
	"context"
	"fmt"
	"hash/fnv"
	"sync"
	"time"
	"unsafe"

	"github.com/seed0cff8200/cardex/cards"
)

// Residency decides which tenants the view holds. Without it (the default)
// the view holds every tenant's active cards. With it, the view holds the
// assigned tenants from the start and any other tenant from its first
// request on, loaded from the store in full before that request is answered
// (a cold tenant costs latency, never a wrong or partial answer), and drops
// the least recently used of those past the memory budget. A proxy that
// routes by tenant (the x-cardex-tenant header) then makes each replica hold
// the tenants routed to it.
type Residency struct {
	// Assigned tenants are loaded at start and always held; nil: none.
	Assigned func(tenant string) bool
	// Budget bounds the estimated bytes of the tenants held on demand (the
	// assigned ones are not counted against it); <= 0: no bound.
	Budget int64
	// OnLoad, when set, is told of every tenant loaded on demand: how many
	// active cards it has and how long its first request waited for it.
	OnLoad func(tenant string, cards int, took time.Duration)
}

// Shard assigns the tenants whose FNV-1a hash is i modulo n (0 ≤ i < n).
func Shard(i, n int) func(string) bool {
	return func(tenant string) bool {
		h := fnv.New64a()
		h.Write([]byte(tenant))
		return h.Sum64()%uint64(n) == uint64(i)
	}
}

// WithResidency makes the view hold a subset of the tenants (Residency).
func WithResidency(rs Residency) Option {
	return func(r *Retriever) {
		r.res = &residents{Residency: rs, held: map[string]*heldTenant{}, loading: map[string]chan struct{}{}, lru: list.New()}
	}
}

// ResidencyStats describe the tenants a view holds.
type ResidencyStats struct {
	Tenants   int   // held: assigned ones with cards, and the ones loaded on demand
	Cards     int   // their active cards
	Bytes     int64 // their estimated size (entryBytes)
	Budget    int64 // Residency.Budget
	Loads     uint64
	Evictions uint64
	// LoadTime is the total time spent loading tenants on demand, which
	// their first requests waited for.
	LoadTime time.Duration
}

// Residency reports the held tenants; ok is false when the view holds
// every tenant (no Residency).
func (r *Retriever) Residency() (s ResidencyStats, ok bool) {
	if r.res == nil {
		return ResidencyStats{}, false
	}
	res := r.res
	res.mu.Lock()
	defer res.mu.Unlock()
	s = res.stats
	s.Budget = res.Budget
	for _, h := range res.held {
		if h.cards > 0 || !h.assigned {
			s.Tenants++
		}
		s.Cards += h.cards
		s.Bytes += h.bytes
	}
	return s, true
}

// residents is the bookkeeping of Residency.
type residents struct {
	Residency
	mu       sync.Mutex
	held     map[string]*heldTenant
	loading  map[string]chan struct{} // closed when that tenant's load ends
	lru      *list.List               // on-demand tenants, most recently used first
	onDemand int64                    // bytes of the on-demand tenants
	stats    ResidencyStats
}

// heldTenant is one tenant the view holds.
type heldTenant struct {
	tenant   string
	assigned bool
	ready    bool // loaded (on-demand tenants)
	users    int  // requests answering from it now: not evictable
	cards    int
	bytes    int64
	elem     *list.Element // in lru (on-demand tenants)
}

func (res *residents) assigned(tenant string) bool {
	return res.Assigned != nil && res.Assigned(tenant)
}

// holds says whether the view keeps tenant's cards: changes of the other
// tenants are not applied. Call under syncMu.
func (r *Retriever) holds(tenant string) bool {
	if r.res == nil {
		return true
	}
	r.res.mu.Lock()
	defer r.res.mu.Unlock()
	return r.res.assigned(tenant) || r.res.held[tenant] != nil
}

// account adds n cards of size bytes (negative: removes) to tenant's
// figures. Call with r.mu held.
func (r *Retriever) account(tenant string, n int, bytes int64) {
	if r.res == nil {
		return
	}
	res := r.res
	res.mu.Lock()
	defer res.mu.Unlock()
	h := res.held[tenant]
	if h == nil {
		if !res.assigned(tenant) {
			return // an evicted tenant's last entries
		}
		h = &heldTenant{tenant: tenant, assigned: true, ready: true}
		res.held[tenant] = h
	}
	h.cards += n
	h.bytes += bytes
	if !h.assigned {
		res.onDemand += bytes
	}
}

// entryOverhead is the estimated fixed size of a held card (the entry, its
// maps, its lexical document's field lengths and its vector's header).
const entryOverhead = 1536

// entryBytes estimates what holding one card costs: its text about three
// times (the card, the analysed postings, the embedded text), its schemas,
// its vector and a fixed part.
func entryBytes(e *entry, dim int) int64 {
	c := &e.card
	n := len(c.Tenant) + len(c.Server) + len(c.Name) + len(c.Summary) + len(c.Description) + len(c.WhenNotToUse)
	for _, ss := range [][]string{c.Aliases, c.Tags, c.RequiredScopes, e.learned} {
		for _, s := range ss {
			n += len(s)
		}
	}
	// The vector: dim float32 and its quantised codes (quant.go).
	return int64(entryOverhead + 3*n + len(c.InputSchema) + len(c.OutputSchema) + 4*dim + quantPad(dim) + int(unsafe.Sizeof(rowQuant{})))
}

// reside makes sure the view holds tenant before a request for it is
// answered, loading it when it is not held, and keeps it held until the
// returned release is called.
func (r *Retriever) reside(ctx context.Context, tenant string) (release func(), err error) {
	if r.res == nil {
		return func() {}, nil
	}
	res := r.res
	for {
		res.mu.Lock()
		if res.assigned(tenant) {
			res.mu.Unlock()
			return func() {}, nil
		}
		if h := res.held[tenant]; h != nil && h.ready {
			h.users++
			res.lru.MoveToFront(h.elem)
			res.mu.Unlock()
			return func() {
				res.mu.Lock()
				h.users--
				res.mu.Unlock()
			}, nil
		}
		if ch := res.loading[tenant]; ch != nil {
			res.mu.Unlock()
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		}
		ch := make(chan struct{})
		res.loading[tenant] = ch
		res.mu.Unlock()
		err := r.load(ctx, tenant)
		res.mu.Lock()
		delete(res.loading, tenant)
		close(ch)
		res.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
}

// load reads one tenant's active cards and server entries from the store
// into the view, then drops the least recently used on-demand tenants past
// the budget. It runs under syncMu, so no Sync interleaves: changes the
// store made before the read are in it, the ones after are the next Sync's.
func (r *Retriever) load(ctx context.Context, tenant string) error {
	r.syncMu.Lock()
	defer r.syncMu.Unlock()
	start := time.Now()
	res := r.res
	res.mu.Lock()
	h := res.held[tenant]
	if h == nil {
		h = &heldTenant{tenant: tenant}
		res.held[tenant] = h
	}
	res.mu.Unlock()
	fail := func(err error) error {
		res.mu.Lock()
		res.forget(h)
		res.mu.Unlock()
		r.dropTenant(ctx, tenant)
		return fmt.Errorf("load tenant %q: %w", tenant, err)
	}
	var upserts []*entry
	for cursor := ""; ; {
		page, err := r.store.List(ctx, cards.ListQuery{Tenant: tenant, Status: []cards.Status{cards.StatusActive}, Limit: cards.MaxPageSize, Cursor: cursor})
		if err != nil {
			return fail(err)
		}
		for _, c := range page.Cards {
			upserts = append(upserts, newEntry(c))
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if err := r.readLessons(ctx, upserts); err != nil {
		return fail(err)
	}
	sis, err := r.store.Servers(ctx, tenant)
	if err != nil {
		return fail(err)
	}
	servers := map[cards.Key]*cards.ServerInfo{}
	for i := range sis {
		servers[cards.ServerKey(tenant, sis[i].Name)] = &sis[i]
	}
	if err := r.index(ctx, upserts, nil, servers, 0); err != nil {
		return fail(err)
	}
	res.mu.Lock()
	h.ready = true
	h.elem = res.lru.PushFront(h)
	res.stats.Loads++
	res.stats.LoadTime += time.Since(start)
	// The victims leave the books in the same critical section that chose
	// them, so no request can start answering from one (reside sees it
	// gone and waits for syncMu to load it again).
	var victims []string
	over := res.onDemand - res.Budget
	for el := res.lru.Back(); res.Budget > 0 && over > 0 && el != nil; {
		v := el.Value.(*heldTenant)
		el = el.Prev()
		if v == h || v.users > 0 {
			continue
		}
		over -= v.bytes
		res.forget(v)
		victims = append(victims, v.tenant)
	}
	res.mu.Unlock()
	for _, v := range victims {
		r.dropTenant(ctx, v)
	}
	if res.OnLoad != nil {
		res.OnLoad(tenant, len(upserts), time.Since(start))
	}
	r.log.Debug("tenant loaded", "tenant", tenant, "cards", len(upserts), "took", time.Since(start).Round(time.Microsecond), "evicted", len(victims))
	return nil
}

// forget takes a tenant off the books. Call with res.mu held.
func (res *residents) forget(h *heldTenant) {
	delete(res.held, h.tenant)
	if h.elem != nil {
		res.lru.Remove(h.elem)
		res.stats.Evictions++
	}
	res.onDemand -= h.bytes
}

// dropTenant takes a tenant that is off the books out of the view. Call
// under syncMu.
func (r *Retriever) dropTenant(ctx context.Context, tenant string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var ids []string
	for id := range r.byTenant[tenant] {
		ids = append(ids, id)
	}
	if err := r.lex.Delete(ids); err != nil {
		r.log.Warn("evict tenant: lexical index", "tenant", tenant, "err", err)
	}
	for _, id := range ids {
		r.vec.Delete(ctx, id)
		r.drop(id)
	}
	servers := map[cards.Key]*cards.ServerInfo{}
	for name := range r.servers[tenant] {
		servers[cards.ServerKey(tenant, name)] = nil
	}
	if err := r.setServers(servers); err != nil {
		r.log.Warn("evict tenant: server index", "tenant", tenant, "err", err)
	}
	r.dropCandidates()
	close(r.changed)
	r.changed = make(chan struct{})
}
