package retriever

import (
	"math/rand"
	"slices"
	"testing"
)

// TestRowsFollowASliceOfRows: rows made from a flat array (as a snapshot's
// are), then pushed, overwritten, swapped and popped at random, hold what a
// plain slice of rows holds, and never write into the flat array beyond the
// rows it started with.
func TestRowsFollowASliceOfRows(t *testing.T) {
	for _, tc := range []struct{ width, start int }{
		{3, 0}, {3, 1}, {5, rowChunk - 1}, {2, rowChunk}, {4, 2*rowChunk + 7},
	} {
		rng := rand.New(rand.NewSource(int64(tc.width*1000 + tc.start)))
		flat := make([]int8, tc.start*tc.width+tc.width) // one spare row past the end
		for i := range flat {
			flat[i] = int8(rng.Intn(200) - 100)
		}
		spare := slices.Clone(flat[tc.start*tc.width:])
		got := fromFlat(tc.width, tc.start, flat[:tc.start*tc.width])
		var want [][]int8
		for i := range tc.start {
			want = append(want, slices.Clone(flat[i*tc.width:(i+1)*tc.width]))
		}
		for step := range 3000 {
			switch op := rng.Intn(4); {
			case op == 0 || len(want) == 0:
				var v []int8
				if rng.Intn(2) == 0 {
					v = make([]int8, tc.width)
					for j := range v {
						v[j] = int8(rng.Intn(200) - 100)
					}
				}
				got.push(v)
				if v == nil {
					v = make([]int8, tc.width)
				}
				want = append(want, slices.Clone(v))
			case op == 1:
				got.pop()
				want = want[:len(want)-1]
			default: // a delete's swap, or an overwrite
				i, j := rng.Intn(len(want)), rng.Intn(len(want))
				copy(got.row(i), got.row(j))
				want[i] = slices.Clone(want[j])
			}
			if got.n != len(want) {
				t.Fatalf("width %d start %d step %d: %d rows, want %d", tc.width, tc.start, step, got.n, len(want))
			}
			for i := range want {
				if !slices.Equal(got.row(i), want[i]) {
					t.Fatalf("width %d start %d step %d: row %d is %v, want %v", tc.width, tc.start, step, i, got.row(i), want[i])
				}
			}
			if !slices.Equal(flat[tc.start*tc.width:], spare) {
				t.Fatalf("width %d start %d step %d: a push wrote past the flat array's rows", tc.width, tc.start, step)
			}
		}
	}
}
