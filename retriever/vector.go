package retriever

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
)

// MemoryVectors is the embedded mode's vector searcher: an exact scan over
// unit vectors kept in memory, grouped by tenant so a search touches only the
// tenant's vectors. It is safe for concurrent use.
type MemoryVectors struct {
	dim int

	mu      sync.RWMutex
	tenants map[string]*tenantVectors
	rows    map[string]vecRow // id → its tenant and row there
	version uint64            // counts mutations: a VecSet of another version is stale

	snap        *snapFile     // the snapshot the vectors of loaded tenants are windows of (release)
	floatMapMax int64         // floatMapMax (tests lower it)
	scratch     sync.Pool     // *quantScratch
	kept        atomic.Uint64 // rows the quantised scans scored exactly (KeptRows)
}

// tenantVectors holds one tenant's vectors densely: row i of vecs (dim
// floats), of codes (quantPad(dim) int8) and of quant belongs to ids[i].
// Deleting swaps the last row into the hole.
type tenantVectors struct {
	name string
	ids  []string
	// keys are the rows' keys (the retriever's entry numbers, setKey; 0:
	// none), which hits carry so that the pipeline joins them without the
	// IDs.
	keys  []uint32
	vecs  floatRows
	codes codeRows
	quant []rowQuant
	// max bounds the rows' terms of the bound (the scan's prefilter).
	max quantMax
	// wild counts the rows the quantised bound does not cover (norm over
	// quantNormMax): while there are any, the tenant is scanned exactly.
	wild int
}

// vecRow is where a vector is: its tenant's vectors and its row there.
type vecRow struct {
	t *tenantVectors
	i int32
}

// setRow quantises row i (whose floats were just written in place) into
// codes and quant.
func (t *tenantVectors) setRow(i, dim int, wasWild bool) {
	q, ok := quantizeRow(t.vecs.row(i), t.codes.row(i))
	if wasWild {
		t.wild--
	}
	if !ok {
		t.wild++
		q = rowQuant{codeN: float32(math.Inf(1))}
	}
	t.quant[i] = q
	t.max.add(q)
}

// isWild says row i is one the bound does not cover.
func (t *tenantVectors) isWild(i int) bool { return math.IsInf(float64(t.quant[i].codeN), 1) }

// NewMemoryVectors returns an empty store for vectors of length dim.
func NewMemoryVectors(dim int) *MemoryVectors {
	return &MemoryVectors{
		dim:         dim,
		floatMapMax: floatMapMax,
		tenants:     make(map[string]*tenantVectors),
		rows:        make(map[string]vecRow),
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
	m.version++
	if old, ok := m.rows[id]; ok {
		if old.t.name == tenant {
			i := int(old.i)
			old.t.vecs.set(i, vec)
			old.t.setRow(i, m.dim, old.t.isWild(i))
			return nil
		}
		m.deleteLocked(id)
	}
	t := m.tenants[tenant]
	if t == nil {
		t = &tenantVectors{name: tenant, vecs: floatRows{rows: rows[float32]{width: m.dim}}, codes: codeRows{width: quantPad(m.dim)}}
		m.tenants[tenant] = t
	}
	i := len(t.ids)
	m.rows[id] = vecRow{t, int32(i)}
	t.ids = append(t.ids, id)
	t.keys = append(t.keys, 0)
	t.vecs.push(vec)
	t.codes.push(nil)
	t.quant = append(t.quant, rowQuant{})
	t.setRow(i, m.dim, false)
	return nil
}

// Delete removes id; deleting an absent id does nothing.
func (m *MemoryVectors) Delete(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.version++
	m.deleteLocked(id)
}

func (m *MemoryVectors) deleteLocked(id string) {
	at, ok := m.rows[id]
	if !ok {
		return
	}
	delete(m.rows, id)
	t, i := at.t, int(at.i)
	last := len(t.ids) - 1
	if t.isWild(i) {
		t.wild--
	}
	if i != last {
		moved := t.ids[last]
		t.ids[i] = moved
		t.keys[i] = t.keys[last]
		m.rows[moved] = vecRow{t, int32(i)}
		t.vecs.move(i, last)
		copy(t.codes.row(i), t.codes.row(last))
		t.quant[i] = t.quant[last]
	}
	t.ids[last] = ""
	t.ids = t.ids[:last]
	t.keys = t.keys[:last]
	t.vecs.pop()
	t.codes.pop()
	t.quant = t.quant[:last]
	if last == 0 {
		delete(m.tenants, t.name)
	}
}

// setKey gives id's row the key its hits carry (Hit.key), and the row the
// string id for its ID; an absent id is ignored. Call with the store not
// being searched (the retriever holds its view's lock for writing).
func (m *MemoryVectors) setKey(id string, key uint32) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if at, ok := m.rows[id]; ok {
		at.t.keys[at.i] = key
		if unsafe.StringData(at.t.ids[at.i]) != unsafe.StringData(id) {
			// One string for the ID, the caller's: a snapshot's load read
			// its own.
			delete(m.rows, id)
			m.rows[id], at.t.ids[at.i] = at, id
		}
	}
}

// Len is the number of stored vectors over all tenants.
func (m *MemoryVectors) Len() int {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return len(m.rows)
}

// VecSet is a candidate set prepared for MemoryVectors: the rows of the
// filter's vectors. It is valid until the vectors change (SearchSet
// prepares it again then).
type VecSet struct {
	m       *MemoryVectors
	version uint64
	tenant  *tenantVectors
	rows    []int32 // nil: every row of the tenant
}

// Prepare builds the VecSet of a filter.
func (m *MemoryVectors) Prepare(f Filter) *VecSet {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.prepare(f)
}

func (m *MemoryVectors) prepare(f Filter) *VecSet {
	s := &VecSet{m: m, version: m.version, tenant: m.tenants[f.Tenant]}
	if s.tenant == nil || f.IDs == nil {
		return s
	}
	s.rows = make([]int32, 0, len(f.IDs))
	for _, id := range f.IDs {
		if at, ok := m.rows[id]; ok && at.t == s.tenant {
			s.rows = append(s.rows, at.i)
		}
	}
	slices.Sort(s.rows)
	s.rows = slices.Compact(s.rows) // an ID given twice counts once
	return s
}

// Search returns the k vectors of f.Tenant most similar to query (cosine
// similarity, which is the dot product for unit vectors), restricted to f.IDs
// when it is non-nil (a non-nil empty f.IDs gives no hits; IDs that are
// absent or belong to another tenant are ignored). Hits are sorted by score
// descending, then ID ascending. The query must have length Dim and finite
// values; k must be positive.
//
// It scans the quantised codes and scores exactly only the vectors that can
// still reach the top k (quant.go): the answer is SearchExact's.
func (m *MemoryVectors) Search(query []float32, f Filter, k int) ([]Hit, error) {
	return m.search(nil, query, nil, f, k, scanQuantisedMode, nil)
}

// SearchExact is Search by the exact score of every candidate: the
// reference the quantised scan answers like, and the benchmarks' bare scan.
func (m *MemoryVectors) SearchExact(query []float32, f Filter, k int) ([]Hit, error) {
	return m.search(nil, query, nil, f, k, scanExactMode, nil)
}

// SearchSet is Search inside a prepared candidate set (from Prepare with
// f, or nil to prepare it here), by the scan that costs less for its size
// and k (exactCheaper): the answer is the same.
func (m *MemoryVectors) SearchSet(query []float32, set *VecSet, f Filter, k int) ([]Hit, error) {
	return m.search(nil, query, set, f, k, scanCheaperMode, nil)
}

// scanMode says which scan a search runs: the quantised pre-scan and
// re-rank (Search: the tests of quant.go's proof hold it to the exact scan
// at every size and k), the exact scan (SearchExact), or whichever costs
// less for the set's size and k (the pipeline's).
type scanMode int

const (
	scanQuantisedMode scanMode = iota
	scanExactMode
	scanCheaperMode
)

// search is Search, SearchExact or SearchSet, appending the hits to
// dst[:0].
func (m *MemoryVectors) search(dst []Hit, query []float32, set *VecSet, f Filter, k int, mode scanMode, share *rowShare) ([]Hit, error) {
	if k <= 0 {
		return nil, fmt.Errorf("vector search: k must be positive, got %d", k)
	}
	if err := m.check(query); err != nil {
		return nil, fmt.Errorf("vector search query: %w", err)
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if f.IDs != nil && len(f.IDs) == 0 {
		return []Hit{}, nil
	}
	if set == nil || set.m != m || set.version != m.version {
		set = m.prepare(f)
	}
	t := set.tenant
	if t == nil {
		return []Hit{}, nil
	}
	if mode == scanExactMode {
		return m.scanExact(dst, query, set, k), nil
	}
	return m.scanQuantisedMulti([][]Hit{dst}, [][]float32{query}, set, k, mode, share)[0], nil
}

// rowCount is the number of rows a set searches.
func (s *VecSet) rowCount() int {
	if s.rows != nil {
		return len(s.rows)
	}
	return len(s.tenant.ids)
}

// scoreRow is the exact scan's score of a row: dotF32, or dotSparse of the
// query's non-zero dimensions nz (the same value to the bit) when they are
// fewer than half.
func scoreRow(query []float32, nz []int32, row []float32) float64 {
	if nz != nil {
		return dotSparse(query, nz, row)
	}
	return dotF32(query, row)
}

// sparseDims are the query's non-zero dimensions when the exact score is
// faster computed from them alone (no AVX2 kernel, and the query is
// sparse, as the built-in embedder's hashed part is); nil otherwise.
func sparseDims(query []float32) []int32 {
	if useAVX2 {
		return nil
	}
	nz := make([]int32, 0, len(query))
	for j, x := range query {
		if x != 0 {
			nz = append(nz, int32(j))
		}
	}
	if 2*len(nz) >= len(query) {
		return nil
	}
	return nz
}

// scanExact scores every row of the set with the exact score. The scores
// go to scratch in row order (the floats read front to back), a count by
// score bucket finds the buckets that hold the best k, and only their rows
// are put in order: the answer is rowTop's (the best k by score, then ID),
// without a heap offer per row. It reads every row, a snapshot's through
// its mapping (unlike the re-rank's few, floatRows): it scans a set of few
// rows, rows the bound does not cover, or is the reference scan.
func (m *MemoryVectors) scanExact(dst []Hit, query []float32, set *VecSet, k int) []Hit {
	t := set.tenant
	nz := sparseDims(query)
	sc := m.getScratch()
	defer m.scratch.Put(sc)
	n := set.rowCount()
	scores := slices.Grow(sc.scores[:0], n)
	if set.rows == nil {
		for i := range n {
			scores = append(scores, scoreRow(query, nz, t.vecs.row(i)))
		}
	} else {
		for p, i := range set.rows {
			if p+prefetchAhead < n {
				prefetchRow(t.vecs.row(int(set.rows[p+prefetchAhead])))
			}
			scores = append(scores, scoreRow(query, nz, t.vecs.row(int(i))))
		}
	}
	sc.scores = scores
	return sc.exactTop(dst, set, k)
}

// scanExactMulti is scanExact of several queries (dsts[j] receives
// queries[j]'s hits), each row read once for all of them and scored by
// dotMulti — each score the one scanExact gives, to the bit — where its
// kernels run; scanExact of each query elsewhere.
func (m *MemoryVectors) scanExactMulti(dsts [][]Hit, queries [][]float32, set *VecSet, k int) [][]Hit {
	out := make([][]Hit, len(queries))
	if len(queries) < 2 || !dotMultiRuns(m.dim) {
		for j, q := range queries {
			out[j] = m.scanExact(dsts[j], q, set, k)
		}
		return out
	}
	t := set.tenant
	n := set.rowCount()
	scs := make([]*quantScratch, len(queries))
	cols := make([][]float64, len(queries)) // the scores by query, then position
	for j := range scs {
		scs[j] = m.getScratch()
		scs[j].scores = slices.Grow(scs[j].scores[:0], n)[:n]
		cols[j] = scs[j].scores
	}
	scores := make([]float64, len(queries))
	p := 0
	forRows(set, len(t.ids), func(i int32) {
		dotMulti(queries, t.vecs.row(int(i)), scores)
		for j, s := range scores {
			cols[j][p] = s
		}
		p++
	})
	for j, sc := range scs {
		out[j] = sc.exactTop(dsts[j], set, k)
		m.scratch.Put(sc)
	}
	return out
}

// exactTop is the end of an exact scan of set: the best k rows by the
// scores in sc.scores (by position in the set).
func (sc *quantScratch) exactTop(dst []Hit, set *VecSet, k int) []Hit {
	t := set.tenant
	n := set.rowCount()
	scores := sc.scores
	row := func(p int) int32 {
		if set.rows == nil {
			return int32(p)
		}
		return set.rows[p]
	}
	top := sc.rowTop(t, k)
	defer sc.keepTop(&top)
	if k >= n || slices.ContainsFunc(scores, math.IsNaN) {
		// Every row, or scores that do not order (a NaN, from vectors
		// whose products overflow): rowTop's own order decides.
		for p, s := range scores {
			top.offer(row(p), s)
		}
		return top.hits(dst)
	}
	// The rows by score bucket: the best buckets that hold k rows between
	// them hold the k best rows, and a few more, which the sort puts past
	// the k-th.
	count := sc.buckets[:]
	clear(count)
	for _, s := range scores {
		count[scoreBucket(s)]++
	}
	b, above := scoreBuckets-1, int32(0)
	for above+count[b] < int32(k) {
		above += count[b]
		b--
	}
	for p, s := range scores {
		if scoreBucket(s) >= b {
			top.heap = append(top.heap, scoredRow{s, row(p)})
		}
	}
	top.sort()
	top.heap = top.heap[:k]
	return top.emit(dst)
}

// scoreBuckets is how many buckets scoreBucket maps scores to.
const scoreBuckets = 2048

// scoreBucket is the bucket of a score (not NaN): [-1, 1] cut into
// scoreBuckets equal parts, the scores past either end in the end buckets.
// A higher score is never in a lower bucket: adding 1 and scaling by a
// power of two keep the order, and so does taking the whole part.
func scoreBucket(s float64) int {
	x := (s + 1) * (scoreBuckets / 2)
	switch {
	case !(x > 0):
		return 0
	case x >= scoreBuckets-1:
		return scoreBuckets - 1
	}
	return int(x)
}

// kthLargest is the k-th largest of xs (1 ≤ k ≤ len(xs), no NaN), which
// it reorders: a quickselect with the median of three as pivot.
func kthLargest(xs []float64, k int) float64 {
	lo, hi, want := 0, len(xs)-1, k-1 // want: the index in decreasing order
	for lo < hi {
		mid := lo + (hi-lo)/2
		// Order xs[lo], xs[mid], xs[hi] decreasingly; the median is the
		// pivot, at hi-1 when the range is long enough.
		if xs[mid] > xs[lo] {
			xs[mid], xs[lo] = xs[lo], xs[mid]
		}
		if xs[hi] > xs[lo] {
			xs[hi], xs[lo] = xs[lo], xs[hi]
		}
		if xs[hi] > xs[mid] {
			xs[hi], xs[mid] = xs[mid], xs[hi]
		}
		if hi-lo < 3 {
			break // ordered by the three above
		}
		pivot := xs[mid]
		// Hoare partition of (lo, hi): larger than pivot to the left.
		i, j := lo, hi
		for {
			for i++; xs[i] > pivot; i++ {
			}
			for j--; xs[j] < pivot; j-- {
			}
			if i >= j {
				break
			}
			xs[i], xs[j] = xs[j], xs[i]
		}
		// xs[lo..j] ≥ pivot ≥ xs[j+1..hi]
		if want <= j {
			hi = j
		} else {
			lo = j + 1
		}
	}
	return xs[want]
}

// quantScratch is one query's reusable memory for a quantised scan: its
// codes, the k largest lower bounds (τ the least of them), the rows kept.
type quantScratch struct {
	qq   queryQuant
	lows lowTop
	keep []keptRow
	// top, topKeys and topSorted are a rowTop's memory (its heap and its
	// sort's).
	top       []scoredRow
	topKeys   []uint64
	topSorted []scoredRow
	// scores are an exact scan's, by position in its set; buckets count
	// them by scoreBucket.
	scores  []float64
	buckets [scoreBuckets]int32
	// row is a row the re-rank read from a snapshot's file.
	row []float32
}

// rowTop is a top k of t's rows in the scratch's memory (keepTop gives
// it back).
func (sc *quantScratch) rowTop(t *tenantVectors, k int) rowTop {
	return rowTop{k: k, ids: t.ids, keys: t.keys, heap: sc.top[:0], keyBuf: sc.topKeys, sorted: sc.topSorted}
}

// keepTop keeps top's memory for the scratch's next use.
func (sc *quantScratch) keepTop(top *rowTop) {
	sc.top, sc.topKeys, sc.topSorted = top.heap[:0], top.keyBuf[:0], top.sorted[:0]
}

// getScratch lends a scan's scratch (back to m.scratch when done).
func (m *MemoryVectors) getScratch() *quantScratch {
	sc, _ := m.scratch.Get().(*quantScratch)
	if sc == nil {
		sc = &quantScratch{}
	}
	return sc
}

type keptRow struct {
	hi  float64
	row int32
}

// scanQuantisedMulti is scanExact's answer from the quantised pre-scan and
// an exact re-rank of the rows it keeps (quant.go proves they are the same)
// for several queries in one pass over the rows: each row's codes are read
// once and scored for every query, so the queries of one request share the
// scan's memory traffic. dsts[j] receives queries[j]'s hits. In
// scanCheaperMode a query whose exact scan costs less is scanned exactly.
// With share, another goroutine may scan some of the rows (rowShare).
func (m *MemoryVectors) scanQuantisedMulti(dsts [][]Hit, queries [][]float32, set *VecSet, k int, mode scanMode, share *rowShare) [][]Hit {
	t := set.tenant
	n := set.rowCount()
	out := make([][]Hit, len(queries))
	var scans []*quantScratch // the queries that scan quantised
	var which []int           // their indices
	var exact []int           // the queries that scan exactly
	for j, q := range queries {
		sc := m.getScratch()
		if n <= k || (mode == scanCheaperMode && t.vecs.snap == nil && exactCheaper(n, k)) || t.wild > 0 || !sc.qq.quantize(q) {
			m.scratch.Put(sc)
			exact = append(exact, j)
			continue
		}
		sc.lows.reset(k)
		sc.keep = sc.keep[:0]
		scans, which = append(scans, sc), append(which, j)
	}
	if len(exact) == 1 {
		j := exact[0]
		out[j] = m.scanExact(dsts[j], queries[j], set, k)
	} else if len(exact) > 1 {
		eDsts, eQueries := make([][]Hit, len(exact)), make([][]float32, len(exact))
		for x, j := range exact {
			eDsts[x], eQueries[x] = dsts[j], queries[j]
		}
		for x, hits := range m.scanExactMulti(eDsts, eQueries, set, k) {
			out[exact[x]] = hits
		}
	}
	if len(scans) == 0 {
		return out
	}
	pass := newQuantPass(t, set, scans)
	if share != nil && n >= 2*shareChunk {
		share.scanShared(pass, m, k, n)
	} else {
		pass.scan(scans, 0, n)
	}
	for x, sc := range scans {
		j := which[x]
		out[j] = m.rerank(dsts[j], sc, queries[j], t, k)
		m.scratch.Put(sc)
	}
	return out
}

// prefetchAhead is how many rows of a scattered set (a restricted caller's)
// ahead of the one it scores a scan asks for (prefetchRow): the hardware
// prefetches a run of consecutive rows by itself, not rows far apart.
// Measured at 100,000 cards, a restricted caller (26% of the rows), the
// semantic leg: 3.0–6.4 ms without, 1.5–2.0 ms at 2 or 4 rows ahead, no
// better at 8 or 16.
const prefetchAhead = 4

// scanBlock is how many rows a quantised scan reads between two updates
// of its prefilter's limits (τ rises as the scan goes).
const scanBlock = 256

// quantPass is a quantised scan of a set for several queries: each row's
// codes are read once and scored for every query (by one kernel call for
// all of them), the row's terms of the bound converted once.
type quantPass struct {
	t      *tenantVectors
	set    *VecSet
	scans  []*quantScratch // a query's codes and bound (queryQuant) each
	qcodes [][]int16       // the scans' codes, for the kernel of several queries (nil for one)
}

func newQuantPass(t *tenantVectors, set *VecSet, scans []*quantScratch) quantPass {
	qp := quantPass{t: t, set: set, scans: scans}
	if len(scans) > 1 {
		qp.qcodes = make([][]int16, len(scans))
		for x, sc := range scans {
			qp.qcodes[x] = sc.qq.codes
		}
	}
	return qp
}

// scan reads the set's rows at positions [p0, p1): query x's lower bounds
// and kept rows go to parts[x] (its codes and bound are scans[x]'s). A row
// that does not pass the query's prefilter is passed over: its upper bound
// is under τ (quant.go).
func (qp *quantPass) scan(parts []*quantScratch, p0, p1 int) {
	t, rows := qp.t, qp.set.rows
	// row is the row at position p, whose codes it asks the caches for
	// prefetchAhead rows before, in a scattered set.
	row := func(p int) int32 {
		if rows == nil {
			return int32(p)
		}
		if p+prefetchAhead < len(rows) {
			prefetchRow(t.codes.row(int(rows[p+prefetchAhead])))
		}
		return rows[p]
	}
	nq := len(qp.scans)
	lims := make([]float64, nq)
	var dots []int32 // the row's products with several queries (nil for one)
	if nq > 1 {
		dots = make([]int32, nq)
	}
	for b0 := p0; b0 < p1; b0 += scanBlock {
		b1 := min(b0+scanBlock, p1)
		for x, sc := range parts {
			lims[x] = qp.scans[x].qq.limit(&t.max, sc.lows.tau)
		}
		if nq == 1 {
			qq, sc, lim := &qp.scans[0].qq, parts[0], lims[0]
			for p := b0; p < b1; p++ {
				i := row(p)
				d := dotCodes(qq.codes, t.codes.row(int(i)))
				if !passes(&t.quant[i], d, lim) {
					continue
				}
				r := t.quant[i].terms()
				if a, b := qq.bound(&r, d); a+b >= sc.lows.tau { // else lo ≤ hi < τ: neither offered nor kept
					sc.see(i, a, b)
				}
			}
			continue
		}
		for p := b0; p < b1; p++ {
			i := row(p)
			dotCodesMulti(qp.qcodes, t.codes.row(int(i)), dots)
			var r rowTerms
			converted := false
			for x, d := range dots {
				if !passes(&t.quant[i], d, lims[x]) {
					continue
				}
				if !converted {
					r, converted = t.quant[i].terms(), true
				}
				sc := parts[x]
				if a, b := qp.scans[x].qq.bound(&r, d); a+b >= sc.lows.tau {
					sc.see(i, a, b)
				}
			}
		}
	}
}

// forRows calls visit with each row of set, in order (n: the tenant's row
// count, for a set of all of them).
func forRows(set *VecSet, n int, visit func(i int32)) {
	if set.rows == nil {
		for i := range int32(n) {
			visit(i)
		}
		return
	}
	for _, i := range set.rows {
		visit(i)
	}
}

// see takes row i, whose bounds are [a − b, a + b], into a quantised scan:
// its lower bound offered for τ, the row kept while its upper bound reaches
// τ.
func (sc *quantScratch) see(i int32, a, b float64) {
	lo, hi := a-b, a+b
	if lo > sc.lows.tau {
		sc.lows.offer(lo)
	}
	if hi >= sc.lows.tau {
		sc.keep = append(sc.keep, keptRow{hi, i})
	}
}

// exactCheaper says the exact scan of n rows costs less than the quantised
// one for a top k: the quantised scan reads every row's codes and then
// scores at least k rows exactly out of order (several times an in-order
// row's time), so it saves time only past about 25·k rows. Measured (thread
// CPU, the synthetic catalogue, the built-in embedder), exact against
// quantised: 1,000 rows k 200: 55 against 96 µs; k 50: 45 against 51;
// k 5: 42 against 32; 3,000 rows k 200: 140 against 180; k 50: 127 against
// 113; 5,000 rows k 200: 237 against 244; 10,000 rows k 200: 515 against
// 460. The answers are the same either way (quant.go). A tenant whose floats
// a snapshot's file holds (floatRows) is not scanned exactly on this
// account: every row read through the mapping would make its floats
// resident, which the re-rank's reads from the file avoid.
func exactCheaper(n, k int) bool { return n < 24*k }

// rerank is the end of a quantised scan: the exact top k of the rows it
// kept. Once k rows are held, a row whose upper bound is under the k-th
// exact score cannot enter, nor can any with a lower bound. The rows come
// off a heap by upper bound, so that only the ones re-ranked are put in
// order (rows of equal bounds may come in any order: a row passed over is
// in no top k whatever came before it). A row a snapshot's file holds is
// read from it into sc.row (floatRows.read).
func (m *MemoryVectors) rerank(dst []Hit, sc *quantScratch, query []float32, t *tenantVectors, k int) []Hit {
	tau := sc.lows.final()
	keep := slices.DeleteFunc(sc.keep, func(kr keptRow) bool { return kr.hi < tau })
	for i := len(keep)/2 - 1; i >= 0; i-- {
		siftKept(keep, i)
	}
	nz := sparseDims(query)
	if t.vecs.snap != nil && len(sc.row) < m.dim {
		sc.row = make([]float32, m.dim)
	}
	top := sc.rowTop(t, k)
	scored := 0
	for n := len(keep); n > 0; n-- {
		kr := keep[0]
		if len(top.heap) == k && kr.hi < top.heap[0].score {
			break
		}
		top.offer(kr.row, scoreRow(query, nz, t.vecs.read(int(kr.row), sc.row)))
		scored++
		keep[0] = keep[n-1]
		siftKept(keep[:n-1], 0)
	}
	m.kept.Add(uint64(scored))
	sc.keep = keep
	sc.keepTop(&top)
	return top.hits(dst)
}

// lowTop finds the k-th largest lower bound of a scan, τ: it holds the
// bounds offered over the τ it knows (a lower one while the scan runs, −∞
// until k are held), and from 2k of them selects the k largest, which raises
// τ — an amortised constant cost a row, where a heap of k moves each bound
// offered through log k levels.
type lowTop struct {
	k    int
	tau  float64 // at most the k-th largest bound offered so far
	vals []float64
}

func (l *lowTop) reset(k int) {
	l.k, l.tau, l.vals = k, math.Inf(-1), l.vals[:0]
}

// offer adds a bound over tau (NaN never is).
func (l *lowTop) offer(x float64) {
	l.vals = append(l.vals, x)
	if len(l.vals) >= 2*l.k+16 {
		l.cut()
	}
}

// cut keeps the k largest bounds held, and τ the least of them.
func (l *lowTop) cut() {
	l.tau = kthLargest(l.vals, l.k) // the k largest are vals[:k]
	l.vals = l.vals[:l.k]
}

// final is τ at the end of the scan: the k-th largest bound offered, −∞
// when fewer than k were.
func (l *lowTop) final() float64 {
	if len(l.vals) >= l.k {
		l.cut()
	}
	return l.tau
}

// siftKept moves keep[i] down the max-heap (by upper bound) of keep.
func siftKept(keep []keptRow, i int) {
	for n := len(keep); ; {
		big, l, r := i, 2*i+1, 2*i+2
		if l < n && keep[l].hi > keep[big].hi {
			big = l
		}
		if r < n && keep[r].hi > keep[big].hi {
			big = r
		}
		if big == i {
			return
		}
		keep[i], keep[big] = keep[big], keep[i]
		i = big
	}
}

// rowTop keeps the best k rows seen so far, as topK does for hits, but with
// a row number in place of the ID (looked up only on equal scores and at
// the end).
type rowTop struct {
	k    int
	ids  []string // row → ID
	keys []uint32 // row → key
	heap []scoredRow
	// keyBuf and sorted are sort's scratch.
	keyBuf []uint64
	sorted []scoredRow
}

type scoredRow struct {
	score float64
	row   int32
}

func (t *rowTop) better(a, b scoredRow) bool {
	if a.score != b.score {
		return a.score > b.score
	}
	return t.ids[a.row] < t.ids[b.row]
}

func (t *rowTop) offer(row int32, score float64) {
	s := scoredRow{score, row}
	if len(t.heap) < t.k {
		t.heap = append(t.heap, s)
		for i := len(t.heap) - 1; i > 0; {
			p := (i - 1) / 2
			if !t.better(t.heap[p], t.heap[i]) { // the parent must be worse or equal
				break
			}
			t.heap[p], t.heap[i] = t.heap[i], t.heap[p]
			i = p
		}
		return
	}
	if !t.better(s, t.heap[0]) {
		return
	}
	t.heap[0] = s
	for i, n := 0, len(t.heap); ; {
		worst, l, r := i, 2*i+1, 2*i+2
		if l < n && t.better(t.heap[worst], t.heap[l]) {
			worst = l
		}
		if r < n && t.better(t.heap[worst], t.heap[r]) {
			worst = r
		}
		if worst == i {
			break
		}
		t.heap[i], t.heap[worst] = t.heap[worst], t.heap[i]
		i = worst
	}
}

// hits appends the kept rows as hits, best first, to dst[:0].
func (t *rowTop) hits(dst []Hit) []Hit {
	t.sort()
	return t.emit(dst)
}

// sort puts the rows held in order, best first: by score, then ID (as
// sortFused orders a fused list: integer keys, runs of near-equal scores by
// comparison), or, with a NaN among them, by comparisons (a NaN last).
func (t *rowTop) sort() {
	h := t.heap
	if len(h) > 1<<16 || slices.ContainsFunc(h, func(s scoredRow) bool { return s.score != s.score }) {
		slices.SortFunc(h, func(a, b scoredRow) int {
			return cmp.Or(cmp.Compare(b.score, a.score), strings.Compare(t.ids[a.row], t.ids[b.row]))
		})
		return
	}
	keys := slices.Grow(t.keyBuf[:0], len(h))
	for i, s := range h {
		keys = append(keys, scoreKey(s.score, i))
	}
	orderKeys(keys, func(i, j int) int {
		return cmp.Or(cmp.Compare(h[j].score, h[i].score), strings.Compare(t.ids[h[i].row], t.ids[h[j].row]))
	})
	sorted := slices.Grow(t.sorted[:0], len(h))
	for _, k := range keys {
		sorted = append(sorted, h[k&0xffff])
	}
	copy(h, sorted)
	t.keyBuf, t.sorted = keys, sorted
}

// emit appends the rows held, in their order, as hits to dst[:0].
func (t *rowTop) emit(dst []Hit) []Hit {
	out := slices.Grow(dst[:0], len(t.heap))
	for _, s := range t.heap {
		out = append(out, Hit{ID: t.ids[s.row], Score: s.score, key: t.keys[s.row]})
	}
	return out
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

// searchSetMulti is searchSetInto of several queries in one candidate set,
// scanned together (scanQuantisedMulti): dsts[j] receives queries[j]'s
// hits, each answer the one searchSetInto gives its query (share as there).
func (m *MemoryVectors) searchSetMulti(dsts [][]Hit, queries [][]float32, set *VecSet, f Filter, k int, share *rowShare) ([][]Hit, error) {
	if k <= 0 {
		return nil, fmt.Errorf("vector search: k must be positive, got %d", k)
	}
	for _, q := range queries {
		if err := m.check(q); err != nil {
			return nil, fmt.Errorf("vector search query: %w", err)
		}
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	out := make([][]Hit, len(queries))
	if f.IDs != nil && len(f.IDs) == 0 {
		for j := range out {
			out[j] = []Hit{}
		}
		return out, nil
	}
	if set == nil || set.m != m || set.version != m.version {
		set = m.prepare(f)
	}
	if set.tenant == nil {
		for j := range out {
			out[j] = []Hit{}
		}
		return out, nil
	}
	return m.scanQuantisedMulti(dsts, queries, set, k, scanCheaperMode, share), nil
}

// searchSetInto is SearchSet appending the hits to dst[:0] (the pipeline's
// reused buffer), its rows shared with whoever helps through share (nil:
// none).
func (m *MemoryVectors) searchSetInto(dst []Hit, query []float32, set *VecSet, f Filter, k int, share *rowShare) ([]Hit, error) {
	return m.search(dst, query, set, f, k, scanCheaperMode, share)
}

// KeptRows counts the rows the quantised scans scored exactly since the
// store was made (tests and benchmarks read it to see the pre-scan prune).
func (m *MemoryVectors) KeptRows() uint64 { return m.kept.Load() }
