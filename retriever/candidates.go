package retriever

import (
	"slices"
	"strings"
	"sync"
)

// candSet is an authorized candidate set: the caller's tenant's active cards
// whose required scopes the caller holds, with what the legs derive from it.
// It is computed once per (tenant, scope set) and kept until the view
// changes (every apply drops them all), so a request only looks it up; the
// legs' prepared forms are built on first use.
type candSet struct {
	filter  Filter            // restricts the search legs to exactly this set
	entries map[string]*entry // ID → entry; shared, read-only
	tokens  int64             // definition tokens of the whole set
	servers []string          // the servers of its cards, sorted
	// member holds the set's entries by number (entry.no), as bits.
	member []uint64
	// deprecated says some entry of the set is deprecated: without one,
	// a ranked list has nothing to demote.
	deprecated bool

	lexOnce sync.Once
	lex     *LexSet
	vecOnce sync.Once
	vec     *VecSet
	srvOnce sync.Once
	srv     *srvEntries
}

// maxCandSets bounds the cache: past it, the cache starts afresh.
const maxCandSets = 4096

// candidates is the authorization gate: the candidate set of a caller,
// from the cache or computed. Call with r.mu held (for reading is enough).
func (r *Retriever) candidates(c Caller) *candSet {
	var buf [256]byte
	key := appendCandKey(buf[:0], c)
	r.candMu.Lock()
	cs := r.cands[string(key)] // no string is made for the lookup
	r.candMu.Unlock()
	if cs != nil {
		return cs
	}
	cs = r.computeCandidates(c)
	r.candMu.Lock()
	if len(r.cands) >= maxCandSets {
		r.cands = map[string]*candSet{}
	}
	r.cands[string(key)] = cs
	r.candMu.Unlock()
	return cs
}

// appendCandKey appends what identifies a caller's candidate set to dst:
// the tenant and the scope set (sorted, without duplicates), separated by
// idSep (which no tenant or scope holds: validateCaller refuses control
// characters). Scopes already in order (one scope, "*", most callers) are not
// copied to be sorted.
func appendCandKey(dst []byte, c Caller) []byte {
	scopes := c.Scopes
	if !slices.IsSortedFunc(scopes, func(a, b string) int {
		if a == b {
			return -1 // a duplicate: not in order, compacted below
		}
		return strings.Compare(a, b)
	}) {
		scopes = slices.Compact(slices.Sorted(slices.Values(scopes)))
	}
	dst = append(append(dst, c.Tenant...), idSep...)
	for i, s := range scopes {
		if i > 0 {
			dst = append(dst, idSep...)
		}
		dst = append(dst, s...)
	}
	return dst
}

func (r *Retriever) computeCandidates(c Caller) *candSet {
	all := r.byTenant[c.Tenant]
	cs := &candSet{filter: Filter{Tenant: c.Tenant}}
	out := all
	if !slices.Contains(c.Scopes, "*") { // "*" holds every scope
		out = make(map[string]*entry, len(all))
		for id, e := range all {
			if Allowed(c, &e.card) {
				out[id] = e
			}
		}
	}
	if out == nil {
		out = map[string]*entry{}
	}
	cs.entries = out
	cs.member = memberBits(out, len(r.entries))
	servers := map[string]bool{}
	for _, e := range out {
		cs.tokens += int64(e.tokens)
		servers[e.card.Server] = true
		cs.deprecated = cs.deprecated || e.deprecated
	}
	for s := range servers {
		cs.servers = append(cs.servers, s)
	}
	slices.Sort(cs.servers)
	if len(out) < len(all) {
		cs.filter.Scopes = slices.Compact(slices.Sorted(slices.Values(c.Scopes)))
		covered := []string{}
		for _, e := range out {
			covered = append(covered, e.card.RequiredScopes...)
		}
		slices.Sort(covered)
		cs.filter.Covered = slices.Compact(covered)
		cs.filter.TenantCards = len(all)
		cs.filter.IDs = make([]string, 0, len(out))
		for id := range out {
			cs.filter.IDs = append(cs.filter.IDs, id)
		}
		slices.Sort(cs.filter.IDs)
	}
	return cs
}

// memberBits are the entries' numbers as a bitset of n bits.
func memberBits(entries map[string]*entry, n int) []uint64 {
	bits := make([]uint64, (n+63)/64)
	for _, e := range entries {
		bits[e.no/64] |= 1 << (e.no % 64)
	}
	return bits
}

// has says e is in the set.
func (cs *candSet) has(e *entry) bool {
	return int(e.no/64) < len(cs.member) && cs.member[e.no/64]&(1<<(e.no%64)) != 0
}

// dropCandidates forgets every candidate set: the view changed. Call with
// r.mu held for writing.
func (r *Retriever) dropCandidates() {
	r.candMu.Lock()
	r.cands = map[string]*candSet{}
	r.candMu.Unlock()
}

func (cs *candSet) lexSet(x *LexicalIndex) *LexSet {
	cs.lexOnce.Do(func() { cs.lex = x.Prepare(cs.filter) })
	return cs.lex
}

func (cs *candSet) vecSet(m *MemoryVectors) *VecSet {
	cs.vecOnce.Do(func() { cs.vec = m.Prepare(cs.filter) })
	return cs.vec
}
