package retriever

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestCodeKernelIsPortable: the AVX2 code product (where it runs) is the
// portable loop's, at the extremes of both codes' ranges too.
func TestCodeKernelIsPortable(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for _, n := range []int{32, 64, 608, 1024, 1536} {
		qmax := queryCodeMax(n)
		q, c := make([]int16, n), make([]int8, n)
		for trial := range 20 {
			for j := range n {
				switch trial {
				case 0: // every product at its largest, one sign
					q[j], c[j] = int16(qmax), quantRowMax
				case 1: // and the other
					q[j], c[j] = int16(-qmax), quantRowMax
				default:
					q[j], c[j] = int16(rng.IntN(2*qmax+1)-qmax), int8(rng.IntN(2*quantRowMax+1)-quantRowMax)
				}
			}
			var want int64
			for j := range n {
				want += int64(q[j]) * int64(c[j])
			}
			if got, slow := dotCodes(q, c), dotCodesGeneric(q, c); int64(got) != want || int64(slow) != want {
				t.Fatalf("n=%d trial %d: kernel %d, portable %d, want %d (AVX2 %v)", n, trial, got, slow, want, useAVX2)
			}
		}
	}
}

// TestCodeMultiKernelIsPortable: the code products of one row against
// several queries at once (dotCodesMulti: the AVX2 kernels of two, three and
// four queries where they run, grouped; and the portable loop) are each
// query's own dotCodesGeneric, for every query count up to nine, rows of
// every padded length to past 600, the extremes of both codes' ranges, and
// slices that start off any alignment.
func TestCodeMultiKernelIsPortable(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 3))
	type shape struct {
		name string
		fill func(q [][]int16, c []int8, qmax int)
	}
	shapes := []shape{
		{"random", func(q [][]int16, c []int8, qmax int) {
			for j := range c {
				c[j] = int8(rng.IntN(2*quantRowMax+1) - quantRowMax)
			}
			for _, qj := range q {
				for i := range qj {
					qj[i] = int16(rng.IntN(2*qmax+1) - qmax)
				}
			}
		}},
		{"extremes", func(q [][]int16, c []int8, qmax int) { // every product at its largest; the queries' signs differ
			for j := range c {
				c[j] = quantRowMax
			}
			for x, qj := range q {
				for i := range qj {
					qj[i] = int16(qmax)
					if x%2 == 1 {
						qj[i] = int16(-qmax)
					}
				}
			}
		}},
		{"mixed extremes", func(q [][]int16, c []int8, qmax int) { // ±127 codes, ±qmax or 0 query codes
			for j := range c {
				c[j] = int8([]int{-quantRowMax, quantRowMax}[rng.IntN(2)])
			}
			for _, qj := range q {
				for i := range qj {
					qj[i] = int16([]int{-qmax, 0, qmax}[rng.IntN(3)])
				}
			}
		}},
		{"one hot", func(q [][]int16, c []int8, qmax int) { // query x only at x's own code: a swapped lane or result shows
			for j := range c {
				c[j] = int8(rng.IntN(2*quantRowMax+1) - quantRowMax)
			}
			for x, qj := range q {
				clear(qj)
				qj[(x*37)%len(c)] = int16(x + 1)
			}
		}},
	}
	for nq := 1; nq <= 9; nq++ {
		for n := 32; n <= 672; n += 32 {
			for _, sh := range shapes {
				for _, off := range []int{0, 1, 3} {
					name := fmt.Sprintf("queries=%d/n=%d/%s/off=%d", nq, n, sh.name, off)
					// Misaligned slices: codes from byte off, queries from
					// element off (2·off bytes) and longer than the row.
					c := make([]int8, n+off)[off:]
					qs := make([][]int16, nq)
					for x := range qs {
						qs[x] = make([]int16, n+off+x)[off:]
					}
					sh.fill(qs, c, queryCodeMax(n))
					got, slow := make([]int32, nq), make([]int32, nq)
					dotCodesMulti(qs, c, got)
					dotCodesMultiGeneric(qs, c, slow)
					for x, q := range qs {
						var want int64
						for j := range c {
							want += int64(q[j]) * int64(c[j])
						}
						if int64(got[x]) != want || int64(slow[x]) != want || int64(dotCodesGeneric(q, c)) != want {
							t.Fatalf("%s: query %d: kernel %d, portable %d, want %d (AVX2 %v)", name, x, got[x], slow[x], want, useAVX2)
						}
					}
				}
			}
		}
	}
}

// TestQuantisedBoundHolds: every exact score lies inside the bounds the
// quantised codes give, for random, sparse, skewed and tiny vectors.
func TestQuantisedBoundHolds(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	for _, dim := range []int{3, 32, 100, 584, 1536} {
		pad := quantPad(dim)
		codes := make([]int8, pad)
		var qq queryQuant
		for trial := range 300 {
			q, v := mvShaped(rng, dim, trial), mvShaped(rng, dim, trial/7)
			rq, ok := quantizeRow(v, codes)
			if !ok || !qq.quantize(q) {
				t.Fatalf("dim %d trial %d: not quantised", dim, trial)
			}
			exact := dotF32(q, v)
			lo, hi := qq.bounds(rq, dotCodes(qq.codes, codes))
			if !(lo <= exact && exact <= hi) {
				t.Fatalf("dim %d trial %d: exact %v outside [%v, %v]", dim, trial, exact, lo, hi)
			}
		}
	}
}

// TestPrefilterHolds: a row the full test keeps (upper bound a + b at
// least τ) always passes the prefilter, with τ set at every row's own upper
// bound (the hardest case) and between them, for every vector shape, the
// rows' own maxima and larger ones; and on dense unit vectors the
// prefilter passes over most rows at a τ most rows are under (it prunes).
func TestPrefilterHolds(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 12))
	type row struct {
		q   rowQuant
		dot int32
		hi  float64
	}
	rowsOf := func(qq *queryQuant, quants []rowQuant, codes [][]int8) []row {
		out := make([]row, len(quants))
		for i := range quants {
			d := dotCodes(qq.codes, codes[i])
			r := quants[i].terms()
			a, b := qq.bound(&r, d)
			out[i] = row{quants[i], d, a + b}
		}
		return out
	}
	for _, dim := range []int{3, 32, 584} {
		const rowCount = 400
		codes := make([][]int8, rowCount)
		quants := make([]rowQuant, rowCount)
		var mx quantMax
		for i := range codes {
			codes[i] = make([]int8, quantPad(dim))
			rq, ok := quantizeRow(mvShaped(rng, dim, i), codes[i])
			if !ok {
				t.Fatalf("dim %d row %d: not quantised", dim, i)
			}
			quants[i] = rq
			mx.add(rq)
		}
		wide := quantMax{scale: 2 * mx.scale, codeN: 2 * mx.codeN, errN2: 2 * mx.errN2, norm: 2 * mx.norm}
		var qq queryQuant
		for trial := range 30 {
			if !qq.quantize(mvShaped(rng, dim, trial)) {
				t.Fatalf("dim %d trial %d: query not quantised", dim, trial)
			}
			rows := rowsOf(&qq, quants, codes)
			taus := []float64{math.Inf(-1), math.Nextafter(rows[0].hi, math.Inf(1))}
			for _, r := range rows {
				taus = append(taus, r.hi, math.Nextafter(r.hi, math.Inf(-1)))
			}
			for _, m := range []*quantMax{&mx, &wide} {
				for _, tau := range taus {
					lim := qq.limit(m, tau)
					for i, r := range rows {
						if r.hi >= tau && !passes(&r.q, r.dot, lim) {
							t.Fatalf("dim %d trial %d τ %v: row %d kept (a + b = %v, product %d, scale %v) fails the prefilter's limit %v", dim, trial, tau, i, r.hi, r.dot, r.q.scale, lim)
						}
					}
				}
			}
		}
	}
	// Pruning: dense unit rows and query, τ the 95th percentile of the
	// upper bounds.
	const dim, rowCount = 584, 2000
	var mx quantMax
	codes := make([][]int8, rowCount)
	quants := make([]rowQuant, rowCount)
	for i := range codes {
		codes[i] = make([]int8, quantPad(dim))
		quants[i], _ = quantizeRow(mvRandUnit(rng, dim), codes[i])
		mx.add(quants[i])
	}
	var qq queryQuant
	qq.quantize(mvRandUnit(rng, dim))
	rows := rowsOf(&qq, quants, codes)
	his := make([]float64, rowCount)
	for i, r := range rows {
		his[i] = r.hi
	}
	slices.Sort(his)
	lim := qq.limit(&mx, his[rowCount*95/100])
	passed := 0
	for _, r := range rows {
		if passes(&r.q, r.dot, lim) {
			passed++
		}
	}
	if passed > rowCount/10 {
		t.Errorf("the prefilter at the 95th percentile passes %d of %d rows", passed, rowCount)
	}
	t.Logf("the prefilter at the 95th percentile passes %d of %d rows", passed, rowCount)
}

// mvShaped is a vector of one of several shapes: dense unit, sparse, one
// large component among small ones, tiny (near float32's smallest), zero,
// or not unit length.
func mvShaped(rng *rand.Rand, dim, shape int) []float32 {
	v := mvRandUnit(rng, dim)
	switch shape % 6 {
	case 1:
		for j := range v {
			if rng.IntN(8) != 0 {
				v[j] = 0
			}
		}
	case 2:
		for j := range v {
			v[j] *= 1e-3
		}
		v[rng.IntN(dim)] = 1
	case 3:
		for j := range v {
			v[j] *= 1e-41
		}
	case 4:
		clear(v)
	case 5:
		for j := range v {
			v[j] *= 1e6
		}
	}
	return v
}

// TestQuantisedSearchIsExact: Search (the pre-scan and re-rank) answers
// like SearchExact, to the bit, through upserts, replacements and deletes,
// with ties, zero vectors and candidate subsets, at every k; rows too large
// for the bound make their tenant's search exact, and it stays right.
func TestQuantisedSearchIsExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	for _, dim := range []int{24, 584} {
		m := NewMemoryVectors(dim)
		ids := make([]string, 600)
		for i := range ids {
			ids[i] = fmt.Sprintf("t\x1fs%d\x1ftool%03d", i%7, i)
		}
		twin := mvRandUnit(rng, dim)
		for i, id := range ids {
			v := mvShaped(rng, dim, i%3)
			if i%50 == 0 {
				v = twin // exact ties, broken by ID
			}
			mvMustUpsert(t, m, id, "t", v)
		}
		check := func(label string) {
			t.Helper()
			var sub []string
			for i, id := range ids {
				if i%4 != 0 {
					sub = append(sub, id)
				}
			}
			for qi := range 30 {
				q := mvShaped(rng, dim, qi%3)
				if qi == 0 {
					q = twin
				}
				for _, f := range []Filter{{Tenant: "t"}, {Tenant: "t", IDs: sub}} {
					for _, k := range []int{1, 5, 50, 200, 1000} {
						want, err := m.SearchExact(q, f, k)
						if err != nil {
							t.Fatal(err)
						}
						got, err := m.Search(q, f, k)
						if err != nil {
							t.Fatal(err)
						}
						if i := firstDiff(got, want); i >= 0 {
							t.Fatalf("%s dim %d k %d query %d: %d and %d hits, first difference at %d", label, dim, k, qi, len(got), len(want), i)
						}
					}
				}
			}
		}
		check("fresh")
		for i := 0; i < len(ids); i += 3 { // replace a third, delete a sixth
			mvMustUpsert(t, m, ids[i], "t", mvShaped(rng, dim, i))
			if i%2 == 0 {
				m.Delete(ids[i+1])
			}
		}
		check("changed")
		mvMustUpsert(t, m, ids[1], "t", mvScaled(mvRandUnit(rng, dim), 1e30)) // beyond the bound
		if m.tenants["t"].wild != 1 {
			t.Fatalf("wild rows: %d, want 1", m.tenants["t"].wild)
		}
		check("wild")
		m.Delete(ids[1])
		if m.tenants["t"].wild != 0 {
			t.Fatalf("wild rows after the delete: %d, want 0", m.tenants["t"].wild)
		}
		before := m.KeptRows()
		check("tame again")
		if m.KeptRows() == before {
			t.Error("no row scored by the quantised path after the wild row went")
		}
	}
}

func mvScaled(v []float32, f float32) []float32 {
	for i := range v {
		v[i] *= f
	}
	return v
}

// firstDiff is the first position where two answers differ in ID or score
// bits (-1: none).
func firstDiff(got, want []Hit) int {
	for i := range min(len(got), len(want)) {
		if got[i].ID != want[i].ID || math.Float64bits(got[i].Score) != math.Float64bits(want[i].Score) {
			return i
		}
	}
	if len(got) != len(want) {
		return min(len(got), len(want))
	}
	return -1
}

// BenchmarkCodeKernels: the code products of rows of the built-in
// embedder's padded length (608) against three queries, one query at a time
// (dotCodes, as scans did) and all three in one pass (dotCodesMulti).
func BenchmarkCodeKernels(b *testing.B) {
	const n, rowCount, nq = 608, 4096, 3
	rng := rand.New(rand.NewPCG(1, 2))
	rows := make([]int8, n*rowCount)
	for j := range rows {
		rows[j] = int8(rng.IntN(2*quantRowMax+1) - quantRowMax)
	}
	qs := make([][]int16, nq)
	for x := range qs {
		qs[x] = make([]int16, n)
		for j := range qs[x] {
			qs[x][j] = int16(rng.IntN(2*quantQueryMax+1) - quantQueryMax)
		}
	}
	out := make([]int32, nq)
	b.Run("one-at-a-time", func(b *testing.B) {
		r := 0
		for b.Loop() {
			c := rows[r*n : (r+1)*n]
			for x, q := range qs {
				out[x] = dotCodes(q, c)
			}
			r = (r + 1) % rowCount
		}
	})
	b.Run("multi", func(b *testing.B) {
		r := 0
		for b.Loop() {
			dotCodesMulti(qs, rows[r*n:(r+1)*n], out)
			r = (r + 1) % rowCount
		}
	})
}
