package retriever

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
)

func mvRandUnit(r *rand.Rand, dim int) []float32 {
	v := make([]float32, dim)
	var ss float64
	for i := range v {
		x := r.NormFloat64()
		v[i] = float32(x)
		ss += x * x
	}
	inv := float32(1 / math.Sqrt(ss))
	for i := range v {
		v[i] *= inv
	}
	return v
}

// mvBruteForce ranks every (id, vec) of the tenant allowed by ids (nil = all).
func mvBruteForce(vecs map[string][]float32, query []float32, ids []string, k int) []Hit {
	var allowed map[string]bool
	if ids != nil {
		allowed = map[string]bool{}
		for _, id := range ids {
			allowed[id] = true
		}
	}
	var hs []Hit
	for id, v := range vecs {
		if allowed != nil && !allowed[id] {
			continue
		}
		hs = append(hs, Hit{ID: id, Score: dotF32(query, v)})
	}
	slices.SortFunc(hs, func(a, b Hit) int { // score descending, then ID
		if a.Score != b.Score {
			if a.Score > b.Score {
				return -1
			}
			return 1
		}
		return strings.Compare(a.ID, b.ID)
	})
	if len(hs) > k {
		hs = hs[:k]
	}
	if hs == nil {
		hs = []Hit{}
	}
	return hs
}

func mvSameHits(t *testing.T, label string, got, want []Hit) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: got %d hits, want %d\n got %v\nwant %v", label, len(got), len(want), got, want)
	}
	for i := range got {
		if got[i].ID != want[i].ID || got[i].Score != want[i].Score {
			t.Fatalf("%s: hit %d = %v, want %v", label, i, got[i], want[i])
		}
	}
}

func TestMemoryVectorsMatchesBruteForce(t *testing.T) {
	const dim = 16
	r := rand.New(rand.NewPCG(7, 11))
	m := NewMemoryVectors(dim)
	ref := map[string]map[string][]float32{} // tenant → id → vec
	for _, tenant := range []string{"acme", "globex"} {
		ref[tenant] = map[string][]float32{}
		for i := range 300 {
			id := fmt.Sprintf("%s/s%d/tool%03d", tenant, i%4, i)
			v := mvRandUnit(r, dim)
			ref[tenant][id] = v
			if err := m.Upsert(id, tenant, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	if m.Len() != 600 {
		t.Fatalf("Len = %d, want 600", m.Len())
	}
	for trial := range 50 {
		q := mvRandUnit(r, dim)
		tenant := []string{"acme", "globex"}[trial%2]
		for _, k := range []int{1, 5, 50, 1000} {
			got, err := m.Search(q, Filter{Tenant: tenant}, k)
			if err != nil {
				t.Fatal(err)
			}
			mvSameHits(t, fmt.Sprintf("trial %d k=%d", trial, k), got, mvBruteForce(ref[tenant], q, nil, k))
		}
	}
}

func TestMemoryVectorsTenantIsolation(t *testing.T) {
	m := NewMemoryVectors(2)
	mvMustUpsert(t, m, "a/s/x", "a", []float32{1, 0})
	mvMustUpsert(t, m, "b/s/x", "b", []float32{1, 0})
	mvMustUpsert(t, m, "b/s/y", "b", []float32{0, 1})

	got, _ := m.Search([]float32{1, 0}, Filter{Tenant: "a"}, 10)
	mvSameHits(t, "tenant a", got, []Hit{{ID: "a/s/x", Score: 1}})

	// Another tenant's IDs in the filter are ignored.
	got, _ = m.Search([]float32{1, 0}, Filter{Tenant: "a", IDs: []string{"b/s/x", "b/s/y"}}, 10)
	mvSameHits(t, "foreign ids", got, []Hit{})

	got, _ = m.Search([]float32{1, 0}, Filter{Tenant: "nobody"}, 10)
	mvSameHits(t, "unknown tenant", got, []Hit{})

	// Moving an id to another tenant removes it from the first.
	mvMustUpsert(t, m, "a/s/x", "b", []float32{0, 1})
	got, _ = m.Search([]float32{1, 0}, Filter{Tenant: "a"}, 10)
	mvSameHits(t, "after move, a", got, []Hit{})
	got, _ = m.Search([]float32{0, 1}, Filter{Tenant: "b"}, 10)
	mvSameHits(t, "after move, b", got, []Hit{{ID: "a/s/x", Score: 1}, {ID: "b/s/y", Score: 1}, {ID: "b/s/x", Score: 0}})
	if m.Len() != 3 {
		t.Errorf("Len = %d, want 3", m.Len())
	}
}

func mvMustUpsert(t *testing.T, m *MemoryVectors, id, tenant string, v []float32) {
	t.Helper()
	if err := m.Upsert(id, tenant, v); err != nil {
		t.Fatal(err)
	}
}

func TestMemoryVectorsIDsFilter(t *testing.T) {
	const dim = 8
	r := rand.New(rand.NewPCG(3, 4))
	m := NewMemoryVectors(dim)
	ref := map[string][]float32{}
	var all []string
	for i := range 100 {
		id := fmt.Sprintf("t/s/n%03d", i)
		v := mvRandUnit(r, dim)
		ref[id] = v
		all = append(all, id)
		mvMustUpsert(t, m, id, "t", v)
	}
	q := mvRandUnit(r, dim)

	got, err := m.Search(q, Filter{Tenant: "t", IDs: []string{}}, 5)
	if err != nil {
		t.Fatal(err)
	}
	mvSameHits(t, "empty non-nil IDs", got, []Hit{})

	for trial := range 20 {
		var ids []string
		for _, id := range all {
			if r.IntN(4) == 0 {
				ids = append(ids, id)
			}
		}
		// Unknown and duplicate IDs are harmless.
		ids = append(ids, "t/s/missing")
		if len(ids) > 1 {
			ids = append(ids, ids[0])
		}
		idsIn := slices.Clone(ids)
		got, err := m.Search(q, Filter{Tenant: "t", IDs: ids}, 7)
		if err != nil {
			t.Fatal(err)
		}
		mvSameHits(t, fmt.Sprintf("trial %d", trial), got, mvBruteForce(ref, q, ids, 7))
		if !slices.Equal(ids, idsIn) {
			t.Fatal("Search modified f.IDs")
		}
	}
}

func TestMemoryVectorsDelete(t *testing.T) {
	const dim = 8
	r := rand.New(rand.NewPCG(5, 6))
	m := NewMemoryVectors(dim)
	ref := map[string][]float32{}
	for i := range 50 {
		id := fmt.Sprintf("t/s/n%02d", i)
		ref[id] = mvRandUnit(r, dim)
		mvMustUpsert(t, m, id, "t", ref[id])
	}
	// Delete in a scrambled order, checking results after each step; this
	// exercises the swap of the last row into every kind of hole.
	order := make([]string, 0, len(ref))
	for id := range ref {
		order = append(order, id)
	}
	slices.Sort(order)
	r.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for n, id := range order {
		m.Delete(id)
		m.Delete(id) // idempotent
		delete(ref, id)
		if m.Len() != len(ref) {
			t.Fatalf("after %d deletes Len = %d, want %d", n+1, m.Len(), len(ref))
		}
		q := mvRandUnit(r, dim)
		got, err := m.Search(q, Filter{Tenant: "t"}, 100)
		if err != nil {
			t.Fatal(err)
		}
		mvSameHits(t, fmt.Sprintf("after deleting %s", id), got, mvBruteForce(ref, q, nil, 100))
	}
	m.Delete("never/was/here")
	if len(m.tenants) != 0 {
		t.Errorf("empty tenant not released: %v", m.tenants)
	}
}

func TestMemoryVectorsUpsertReplaces(t *testing.T) {
	m := NewMemoryVectors(2)
	mvMustUpsert(t, m, "t/s/a", "t", []float32{1, 0})
	mvMustUpsert(t, m, "t/s/a", "t", []float32{0, 1})
	if m.Len() != 1 {
		t.Fatalf("Len = %d, want 1", m.Len())
	}
	got, _ := m.Search([]float32{0, 1}, Filter{Tenant: "t"}, 1)
	mvSameHits(t, "replaced", got, []Hit{{ID: "t/s/a", Score: 1}})

	// The store keeps a copy: changing the caller's slice changes nothing.
	v := []float32{1, 0}
	mvMustUpsert(t, m, "t/s/b", "t", v)
	v[0] = -1
	got, _ = m.Search([]float32{1, 0}, Filter{Tenant: "t"}, 1)
	mvSameHits(t, "copied", got, []Hit{{ID: "t/s/b", Score: 1}})
}

func TestMemoryVectorsErrors(t *testing.T) {
	m := NewMemoryVectors(3)
	for _, v := range [][]float32{nil, {1, 0}, {1, 0, 0, 0}, {float32(math.NaN()), 0, 0}, {float32(math.Inf(1)), 0, 0}} {
		if err := m.Upsert("t/s/a", "t", v); err == nil {
			t.Errorf("Upsert(%v): no error", v)
		}
	}
	if m.Len() != 0 {
		t.Errorf("Len = %d after failed upserts", m.Len())
	}
	mvMustUpsert(t, m, "t/s/a", "t", []float32{1, 0, 0})
	if _, err := m.Search([]float32{1, 0}, Filter{Tenant: "t"}, 1); err == nil {
		t.Error("Search with wrong dim: no error")
	}
	if _, err := m.Search([]float32{float32(math.NaN()), 0, 0}, Filter{Tenant: "t"}, 1); err == nil {
		t.Error("Search with NaN: no error")
	}
	for _, k := range []int{0, -1} {
		if _, err := m.Search([]float32{1, 0, 0}, Filter{Tenant: "t"}, k); err == nil {
			t.Errorf("Search k=%d: no error", k)
		}
	}
}

func TestMemoryVectorsTies(t *testing.T) {
	m := NewMemoryVectors(2)
	// Equal vectors, inserted in descending ID order.
	for _, id := range []string{"t/z/a", "t/m/b", "t/m/a", "t/a/z", "t/a/a"} {
		mvMustUpsert(t, m, id, "t", []float32{0.6, 0.8})
	}
	mvMustUpsert(t, m, "t/0/low", "t", []float32{1, 0})
	got, _ := m.Search([]float32{0.6, 0.8}, Filter{Tenant: "t"}, 3)
	want := []string{"t/a/a", "t/a/z", "t/m/a"}
	for i, h := range got {
		if h.ID != want[i] {
			t.Fatalf("ties: got %v, want IDs %v", got, want)
		}
	}
	all, _ := m.Search([]float32{0.6, 0.8}, Filter{Tenant: "t"}, 10)
	if len(all) != 6 || all[5].ID != "t/0/low" || all[4].ID != "t/z/a" {
		t.Fatalf("ties, k=10: got %v", all)
	}
}

func TestMemoryVectorsConcurrent(t *testing.T) {
	const dim = 8
	m := NewMemoryVectors(dim)
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for i := range 200 {
				id := fmt.Sprintf("t/w%d/n%d", w, i%20)
				switch r.IntN(3) {
				case 0:
					m.Delete(id)
				default:
					if err := m.Upsert(id, "t", mvRandUnit(r, dim)); err != nil {
						t.Error(err)
						return
					}
				}
				if _, err := m.Search(mvRandUnit(r, dim), Filter{Tenant: "t"}, 5); err != nil {
					t.Error(err)
					return
				}
				_ = m.Len()
			}
		}()
	}
	wg.Wait()
}

func BenchmarkMemoryVectorsSearch(b *testing.B) {
	const dim, n, k = 384, 10_000, 10
	r := rand.New(rand.NewPCG(1, 1))
	m := NewMemoryVectors(dim)
	for i := range n {
		if err := m.Upsert(fmt.Sprintf("t/s%d/tool%05d", i%20, i), "t", mvRandUnit(r, dim)); err != nil {
			b.Fatal(err)
		}
	}
	q := mvRandUnit(r, dim)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.Search(q, Filter{Tenant: "t"}, k); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDotSparseIsDotF32: skipping a sparse query's zeros gives dotF32's
// result to the bit, whatever the length.
func TestDotSparseIsDotF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	for _, dim := range []int{1, 3, 4, 7, 64, 383, 584} {
		for range 50 {
			q, v := make([]float32, dim), make([]float32, dim)
			var nz []int32
			for j := range dim {
				v[j] = rng.Float32()*2 - 1
				if rng.IntN(3) == 0 {
					q[j] = rng.Float32()*2 - 1
					nz = append(nz, int32(j))
				}
			}
			if a, b := dotSparse(q, nz, v), dotF32(q, v); a != b {
				t.Fatalf("dim %d: dotSparse %v, dotF32 %v", dim, a, b)
			}
		}
	}
}

// TestDotKernelIsPortable: the AVX2 kernel (where it runs) and the portable
// loop give the same lanes, so the same scores, to the bit.
func TestDotKernelIsPortable(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, n := range []int{32, 64, 384, 576, 4096} {
		a, b := make([]float32, n), make([]float32, n)
		for j := range n {
			a[j], b[j] = rng.Float32()*2-1, rng.Float32()*2-1
		}
		var fast, slow [dotLanes]float32
		dotBlocks(a, b, &fast)
		dotBlocksGeneric(a, b, &slow)
		if fast != slow {
			t.Fatalf("n=%d: kernel lanes %v, portable %v (AVX2 %v)", n, fast, slow, useAVX2)
		}
	}
	t.Logf("AVX2 kernel in use: %v", useAVX2)
}

// TestSearchSetMulti: queries scanned together answer each as it is
// answered alone (searchSetInto), hit for hit and bit for bit, over the
// whole tenant and a subset, at small k and the pipeline's depth, one to
// nine queries at a time, with a query among them that the quantised scan
// cannot take (exact scan).
func TestSearchSetMulti(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const dim = 96
	m := NewMemoryVectors(dim)
	var subset []string
	for i := range 1500 {
		id := fmt.Sprintf("t\x1fs\x1f%04d", i)
		mvMustUpsert(t, m, id, "t", mvRandUnit(rng, dim))
		if i%3 != 0 {
			subset = append(subset, id)
		}
	}
	pool := [][]float32{mvRandUnit(rng, dim), mvRandUnit(rng, dim), make([]float32, dim), mvRandUnit(rng, dim)}
	for range 5 {
		pool = append(pool, mvRandUnit(rng, dim))
	}
	// Every count of queries up to nine: the code kernels take them four,
	// three, two or one at a time (dotCodesMulti).
	for nq := 1; nq <= len(pool); nq++ {
		queries := pool[:nq]
		for _, f := range []Filter{{Tenant: "t"}, {Tenant: "t", IDs: subset}, {Tenant: "t", IDs: []string{}}, {Tenant: "other"}} {
			for _, k := range []int{1, 5, LegDepth, 2000} {
				got, err := m.searchSetMulti(make([][]Hit, len(queries)), queries, nil, f, k, nil)
				if err != nil {
					t.Fatal(err)
				}
				for j, q := range queries {
					want, err := m.searchSetInto(nil, q, nil, f, k, nil)
					if err != nil {
						t.Fatal(err)
					}
					mvSameHits(t, fmt.Sprintf("%d queries, %d IDs, k=%d, query %d", nq, len(f.IDs), k, j), got[j], want)
				}
			}
		}
	}
	if _, err := m.searchSetMulti(make([][]Hit, 1), [][]float32{make([]float32, dim-1)}, nil, Filter{Tenant: "t"}, 5, nil); err == nil {
		t.Error("a query of the wrong dimension was searched")
	}
}

// TestExactScanSelects holds the exact scan, which orders only the rows of
// the best score buckets, to the brute force over catalogues with many
// equal scores (few distinct vectors), scores crowded in one bucket (short
// vectors) and past the buckets' ends (long ones), restricted and not, at
// every k around the sizes.
func TestExactScanSelects(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	const dim = 8
	for _, c := range []struct {
		distinct int
		scale    float32
	}{{1, 1}, {3, 1}, {40, 1}, {400, 1}, {400, 1e-4}, {400, 30}} {
		distinct := c.distinct
		m := NewMemoryVectors(dim)
		ref := map[string][]float32{}
		pool := make([][]float32, distinct)
		for i := range pool {
			pool[i] = mvScaled(mvRandUnit(r, dim), c.scale)
		}
		var ids []string
		for i := range 120 {
			id := fmt.Sprintf("t/s%d/tool%03d", r.IntN(5), r.IntN(1000)*1000+i)
			v := pool[r.IntN(distinct)]
			ref[id] = v
			mvMustUpsert(t, m, id, "t", v)
			if i%3 != 0 {
				ids = append(ids, id)
			}
		}
		for trial := range 20 {
			q := mvRandUnit(r, dim)
			if trial%4 == 0 {
				q = pool[r.IntN(distinct)] // ties at the top
			}
			for _, k := range []int{1, 2, 5, 39, 79, 80, 81, 119, 120, 121, 500} {
				for _, f := range []Filter{{Tenant: "t"}, {Tenant: "t", IDs: ids}} {
					got, err := m.SearchExact(q, f, k)
					if err != nil {
						t.Fatal(err)
					}
					mvSameHits(t, fmt.Sprintf("distinct %d scale %g trial %d k=%d restricted=%v", distinct, c.scale, trial, k, f.IDs != nil),
						got, mvBruteForce(ref, q, f.IDs, k))
				}
			}
		}
	}
}

// TestKthLargest holds the selection to a sort, duplicates included.
func TestKthLargest(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	for trial := range 2000 {
		n := 1 + r.IntN(60)
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = float64(r.IntN(1 + trial%20))
		}
		sorted := slices.Sorted(slices.Values(xs))
		slices.Reverse(sorted)
		k := 1 + r.IntN(n)
		if got := kthLargest(slices.Clone(xs), k); got != sorted[k-1] {
			t.Fatalf("kthLargest(%v, %d) = %v, want %v", xs, k, got, sorted[k-1])
		}
	}
}

// TestDotMultiIsDotF32: the exact scores of one row against several queries
// at once (dotMulti: the AVX2 kernels of two and three queries, grouped)
// are each query's dotF32 and its definition, to the bit, for every query
// count up to seven, every length a multiple of 8 to past 600, values whose
// rounding decides, zeros of both signs, products that overflow (±Inf, NaN),
// and slices off any alignment.
func TestDotMultiIsDotF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 8))
	value := func(kind int) float32 { return dotTestValue(rng, kind) }
	same := func(a, b float64) bool {
		return math.Float64bits(a) == math.Float64bits(b) || (math.IsNaN(a) && math.IsNaN(b))
	}
	for nq := 1; nq <= 7; nq++ {
		for dim := 8; dim <= 680; dim += 8 {
			for kind := range 4 {
				off := (dim / 8) % 4 // 0–3 floats off the allocation's start
				row := make([]float32, dim+off)[off:]
				for j := range row {
					row[j] = value(kind)
				}
				qs := make([][]float32, nq)
				for x := range qs {
					qs[x] = make([]float32, dim+x+(off+x)%4)[(off+x)%4:]
					for j := range qs[x] {
						qs[x][j] = value(kind)
					}
				}
				got := make([]float64, nq)
				if !dotMulti(qs, row, got) {
					if useAVX2 {
						t.Fatalf("dotMulti declined dim %d with the AVX2 kernel", dim)
					}
					t.Skip("no multi-query kernel here")
				}
				for x, q := range qs {
					var lanes [dotLanes]float32
					for j := range dim {
						lanes[j%dotLanes] += float32(q[j] * row[j])
					}
					if want, one := sumLanes(&lanes), dotF32(q[:dim], row); !same(got[x], want) || !same(one, want) {
						t.Fatalf("%d queries, dim %d, values %d: query %d: dotMulti %v, dotF32 %v, definition %v", nq, dim, kind, x, got[x], one, want)
					}
				}
			}
		}
	}
}

// TestDotF32IsItsDefinition: dotF32 (the kernel where it runs: whole
// blocks, its tail and the sum of the lanes in registers; the portable
// code elsewhere and for other lengths) is its definition — element j's
// product, rounded to float32, added to lane j%32 in increasing j, the lanes
// summed by sumLanes — to the bit, at every length up to 100, many past it
// (the built-in embedder's 584 among them), with values of every scale and
// sign, and zeros.
func TestDotF32IsItsDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	dims := []int{384, 576, 584, 592, 1536, 1544}
	for dim := 1; dim <= 1100; dim += 1 + dim/100 {
		dims = append(dims, dim)
	}
	value := func(kind int) float32 { return dotTestValue(rng, kind) }
	for _, dim := range dims {
		for kind := range 3 {
			a, b := make([]float32, dim), make([]float32, dim)
			for j := range dim {
				a[j], b[j] = value(kind), value(kind)
			}
			var lanes [dotLanes]float32
			for j := range dim {
				lanes[j%dotLanes] += float32(a[j] * b[j])
			}
			if got, want := dotF32(a, b), sumLanes(&lanes); math.Float64bits(got) != math.Float64bits(want) {
				t.Fatalf("dim %d, values %d: dotF32 %v, definition %v (AVX2 %v)", dim, kind, got, want, useAVX2)
			}
		}
	}
}

// BenchmarkDotMulti: the exact scores of rows of the built-in embedder's
// length (584) against two and three queries, one query at a time (dotF32,
// as the exact scan did) and all in one pass (dotMulti).
func BenchmarkDotMulti(b *testing.B) {
	const dim, rowCount = 584, 1000
	rng := rand.New(rand.NewPCG(5, 6))
	rows := make([]float32, dim*rowCount)
	for j := range rows {
		rows[j] = rng.Float32()*2 - 1
	}
	for _, nq := range []int{2, 3} {
		qs := make([][]float32, nq)
		for x := range qs {
			qs[x] = mvRandUnit(rng, dim)
		}
		out := make([]float64, nq)
		b.Run(fmt.Sprintf("queries=%d/one-at-a-time", nq), func(b *testing.B) {
			r := 0
			for b.Loop() {
				row := rows[r*dim : (r+1)*dim]
				for x, q := range qs {
					out[x] = dotF32(q, row)
				}
				r = (r + 1) % rowCount
			}
		})
		b.Run(fmt.Sprintf("queries=%d/multi", nq), func(b *testing.B) {
			r := 0
			for b.Loop() {
				if !dotMulti(qs, rows[r*dim:(r+1)*dim], out) {
					b.Skip("no multi-query kernel here")
				}
				r = (r + 1) % rowCount
			}
		})
	}
}

// dotTestValue is a vector element of the dot product tests by kind: 0 in
// [-1, 1); 1 of scales far apart, so that rounding decides; 2 zeros of
// both signs among the values; 3 (and on) products past float32's range
// (±Inf lanes, NaN sums).
func dotTestValue(rng *rand.Rand, kind int) float32 {
	switch kind {
	case 0:
		return rng.Float32()*2 - 1
	case 1:
		return float32(math.Ldexp(rng.Float64()*2-1, rng.IntN(40)-20))
	case 2:
		return []float32{0, float32(math.Copysign(0, -1)), 1e-30, -3}[rng.IntN(4)]
	default:
		return []float32{3e38, -3e38, 1, 1e-45}[rng.IntN(4)]
	}
}
