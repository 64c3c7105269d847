package retriever

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
)

// MemoryVectors is the embedded mode's vector searcher: an exact scan over
// unit vectors kept in memory, grouped by tenant so a search touches only the
// tenant's vectors. It is safe for concurrent use.
type MemoryVectors struct {
	dim int

	mu      sync.RWMutex
	tenants map[string]*tenantVectors
	owner   map[string]string // id → tenant
}

// tenantVectors holds one tenant's vectors densely: row i of vecs (dim
// floats) belongs to ids[i]. Deleting swaps the last row into the hole.
type tenantVectors struct {
	ids   []string
	vecs  []float32
	index map[string]int
}

// NewMemoryVectors returns an empty store for vectors of length dim.
func NewMemoryVectors(dim int) *MemoryVectors {
	return &MemoryVectors{
		dim:     dim,
		tenants: make(map[string]*tenantVectors),
		owner:   make(map[string]string),
	}
}

// Dim is the length of every stored vector.
func (m *MemoryVectors) Dim() int { return m.dim }

// Upsert stores a copy of vec under id in tenant, replacing any vector id had
// (in whichever tenant). The vector must have length Dim and finite values;
// it is expected to be unit length (or zero), since Search scores by dot
// product.
func (m *MemoryVectors) Upsert(id, tenant string, vec []float32) error {
	if err := m.check(vec); err != nil {
		return fmt.Errorf("vector for %q: %w", id, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.owner[id]; ok && old != tenant {
		m.deleteLocked(id)
	}
	t := m.tenants[tenant]
	if t == nil {
		t = &tenantVectors{index: make(map[string]int)}
		m.tenants[tenant] = t
	}
	if i, ok := t.index[id]; ok {
		copy(t.vecs[i*m.dim:(i+1)*m.dim], vec)
		return nil
	}
	t.index[id] = len(t.ids)
	t.ids = append(t.ids, id)
	t.vecs = append(t.vecs, vec...)
	m.owner[id] = tenant
	return nil
}

// Delete removes id; deleting an absent id does nothing.
func (m *MemoryVectors) Delete(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.deleteLocked(id)
}

func (m *MemoryVectors) deleteLocked(id string) {
	tenant, ok := m.owner[id]
	if !ok {
		return
	}
	delete(m.owner, id)
	t := m.tenants[tenant]
	i := t.index[id]
	last := len(t.ids) - 1
	if i != last {
		moved := t.ids[last]
		t.ids[i] = moved
		t.index[moved] = i
		copy(t.vecs[i*m.dim:(i+1)*m.dim], t.vecs[last*m.dim:])
	}
	delete(t.index, id)
	t.ids[last] = ""
	t.ids = t.ids[:last]
	t.vecs = t.vecs[:last*m.dim]
	if last == 0 {
		delete(m.tenants, tenant)
	}
}

// Len is the number of stored vectors over all tenants.
func (m *MemoryVectors) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.owner)
}

// Search returns the k vectors of f.Tenant most similar to query (cosine
// similarity, which is the dot product for unit vectors), restricted to f.IDs
// when it is non-nil (a non-nil empty f.IDs gives no hits; IDs that are
// absent or belong to another tenant are ignored). Hits are sorted by score
// descending, then ID ascending. The query must have length Dim and finite
// values; k must be positive.
func (m *MemoryVectors) Search(query []float32, f Filter, k int) ([]Hit, error) {
	if k <= 0 {
		return nil, fmt.Errorf("vector search: k must be positive, got %d", k)
	}
	if err := m.check(query); err != nil {
		return nil, fmt.Errorf("vector search query: %w", err)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	t := m.tenants[f.Tenant]
	if t == nil || (f.IDs != nil && len(f.IDs) == 0) {
		return []Hit{}, nil
	}
	top := topK{k: k}
	dim := m.dim
	if f.IDs == nil {
		for i, id := range t.ids {
			top.offer(id, dotF32(query, t.vecs[i*dim:(i+1)*dim:(i+1)*dim]))
		}
	} else {
		var seen map[string]struct{}
		if len(f.IDs) > 1 {
			seen = make(map[string]struct{}, len(f.IDs))
		}
		for _, id := range f.IDs {
			i, ok := t.index[id]
			if !ok {
				continue
			}
			if seen != nil {
				if _, dup := seen[id]; dup {
					continue
				}
				seen[id] = struct{}{}
			}
			top.offer(id, dotF32(query, t.vecs[i*dim:(i+1)*dim:(i+1)*dim]))
		}
	}
	return top.sorted(), nil
}

var errNonFinite = errors.New("non-finite value")

func (m *MemoryVectors) check(vec []float32) error {
	if len(vec) != m.dim {
		return fmt.Errorf("dimension %d, want %d", len(vec), m.dim)
	}
	for _, x := range vec {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			return errNonFinite
		}
	}
	return nil
}

// dotF32 is the dot product of two equally long vectors. Four independent
// float32 accumulators let the CPU pipeline the loop; the summation order is
// fixed, so equal inputs always give equal scores.
func dotF32(a, b []float32) float64 {
	b = b[:len(a)]
	var s0, s1, s2, s3 float32
	for len(a) >= 4 {
		a4, b4 := a[:4:4], b[:4:4]
		s0 += a4[0] * b4[0]
		s1 += a4[1] * b4[1]
		s2 += a4[2] * b4[2]
		s3 += a4[3] * b4[3]
		a, b = a[4:], b[4:]
	}
	for i := range a {
		s0 += a[i] * b[i]
	}
	return float64(s0) + float64(s1) + float64(s2) + float64(s3)
}

// topK keeps the best k hits seen so far in a min-heap whose root is the
// worst kept hit (lowest score; on equal scores, greatest ID).
type topK struct {
	k    int
	heap []Hit
}

// hitBetter reports whether a ranks before b: higher score, then lower ID.
func hitBetter(a, b Hit) bool {
	if a.Score != b.Score {
		return a.Score > b.Score
	}
	return a.ID < b.ID
}

func (t *topK) offer(id string, score float64) {
	h := Hit{ID: id, Score: score}
	if len(t.heap) < t.k {
		t.heap = append(t.heap, h)
		t.up(len(t.heap) - 1)
		return
	}
	if !hitBetter(h, t.heap[0]) {
		return
	}
	t.heap[0] = h
	t.down(0)
}

func (t *topK) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !hitBetter(t.heap[p], t.heap[i]) { // parent must be worse or equal
			break
		}
		t.heap[p], t.heap[i] = t.heap[i], t.heap[p]
		i = p
	}
}

func (t *topK) down(i int) {
	n := len(t.heap)
	for {
		worst := i
		l, r := 2*i+1, 2*i+2
		if l < n && hitBetter(t.heap[worst], t.heap[l]) {
			worst = l
		}
		if r < n && hitBetter(t.heap[worst], t.heap[r]) {
			worst = r
		}
		if worst == i {
			return
		}
		t.heap[i], t.heap[worst] = t.heap[worst], t.heap[i]
		i = worst
	}
}

func (t *topK) sorted() []Hit {
	out := t.heap
	slices.SortFunc(out, func(a, b Hit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})
	return out
}
