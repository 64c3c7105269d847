package retriever

import (
	"bytes"
	"errors"
	"io"
	"math"
	"math/rand"
	"slices"
	"testing"
	"unsafe"
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

// countingReader counts its reads; fail makes every read fail.
type countingReader struct {
	r     io.ReaderAt
	reads int
	fail  bool
}

func (c *countingReader) ReadAt(p []byte, off int64) (int, error) {
	c.reads++
	if c.fail {
		return 0, errors.New("read failed")
	}
	return c.r.ReadAt(p, off)
}

// TestFloatRowsReadTheFile: float rows that are windows of a snapshot's
// mapping, pushed, overwritten, moved and popped at random, read what a
// plain slice of rows holds, and read every row not written since the load
// from the file, never through the mapping: the mapping's copy of those
// rows is spoiled here, and no read returns it. The snapshot writer's chunks
// (chunk) hold the same rows. When the file cannot be read, the rows come
// from the mapping.
func TestFloatRowsReadTheFile(t *testing.T) {
	for _, tc := range []struct {
		width, start int
		failing      bool
	}{
		{3, 1, false}, {5, rowChunk - 1, false}, {2, rowChunk, false}, {4, 2*rowChunk + 7, false}, {4, rowChunk + 3, true},
	} {
		rng := rand.New(rand.NewSource(int64(tc.width*1000 + tc.start)))
		flat := make([]float32, tc.start*tc.width+tc.width) // one spare row past the end
		for i := range flat {
			flat[i] = float32(rng.NormFloat64())
		}
		bytesOf := func(v []float32) []byte { return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v)) }
		file := &countingReader{r: bytes.NewReader(slices.Clone(bytesOf(flat))), fail: tc.failing}
		var want [][]float32
		for i := range tc.start {
			want = append(want, slices.Clone(flat[i*tc.width:(i+1)*tc.width]))
		}
		if !tc.failing {
			for i := range flat[:tc.start*tc.width] {
				flat[i] = float32(math.NaN()) // the mapping's copy: never read
			}
		}
		spare := slices.Clone(flat[tc.start*tc.width:])
		got := mapFloats(&snapFile{r: file, data: bytesOf(flat)}, tc.width, tc.start, flat[:tc.start*tc.width])
		buf := make([]float32, tc.width)
		for step := range 3000 {
			switch op := rng.Intn(5); {
			case op == 0 || len(want) == 0:
				var v []float32
				if rng.Intn(2) == 0 {
					v = make([]float32, tc.width)
					for j := range v {
						v[j] = float32(rng.NormFloat64())
					}
				}
				got.push(v)
				if v == nil {
					v = make([]float32, tc.width)
				}
				want = append(want, slices.Clone(v))
			case op == 1:
				got.pop()
				want = want[:len(want)-1]
			case op == 2: // a delete's swap
				i, j := rng.Intn(len(want)), rng.Intn(len(want))
				got.move(i, j)
				want[i] = slices.Clone(want[j])
			default: // an overwrite, or nothing
				if i := rng.Intn(len(want)); rng.Intn(2) == 0 {
					v := make([]float32, tc.width)
					for j := range v {
						v[j] = float32(rng.NormFloat64())
					}
					got.set(i, v)
					want[i] = v
				}
			}
			if got.n != len(want) {
				t.Fatalf("width %d start %d step %d: %d rows, want %d", tc.width, tc.start, step, got.n, len(want))
			}
			var all []float32
			for i := range want {
				if r := got.read(i, buf); !slices.Equal(r, want[i]) {
					t.Fatalf("width %d start %d step %d: row %d reads %v, want %v", tc.width, tc.start, step, i, r, want[i])
				}
				all = append(all, want[i]...)
			}
			var chunks []float32
			for c := range got.chunks {
				chunks = append(chunks, got.chunk(c, nil)...)
			}
			if !slices.Equal(chunks, all) {
				t.Fatalf("width %d start %d step %d: the chunks hold other rows", tc.width, tc.start, step)
			}
			if !slices.Equal(flat[tc.start*tc.width:], spare) {
				t.Fatalf("width %d start %d step %d: a push wrote past the flat array's rows", tc.width, tc.start, step)
			}
		}
		if file.reads == 0 {
			t.Errorf("width %d start %d: the file was never read", tc.width, tc.start)
		}
	}
}
