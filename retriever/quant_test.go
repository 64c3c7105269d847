package retriever

import (
	"fmt"
	"math"
	"math/rand/v2"
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
