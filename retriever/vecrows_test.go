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

// rowWrites are the writes a tenant's rows take: a new row (nil: zeros),
// the last row dropped, row i overwritten with row j (a delete's swap) or
// with v.
type rowWrites[T float32 | int8] struct {
	push func(v []T)
	pop  func()
	move func(i, j int)
	set  func(i int, v []T)
}

// mirror makes steps random writes to rows and the same to want, a plain
// slice of rows, calling check after each with want as it is then.
func mirror[T float32 | int8](rng *rand.Rand, width, steps int, rows rowWrites[T], want [][]T, value func() T, check func(step int, want [][]T)) {
	newRow := func() []T {
		v := make([]T, width)
		for j := range v {
			v[j] = value()
		}
		return v
	}
	for step := range steps {
		switch op := rng.Intn(4); {
		case op == 0 || len(want) == 0:
			var v []T
			if rng.Intn(2) == 0 {
				v = newRow()
			}
			rows.push(v)
			if v == nil {
				v = make([]T, width)
			}
			want = append(want, slices.Clone(v))
		case op == 1:
			rows.pop()
			want = want[:len(want)-1]
		case op == 2:
			i, j := rng.Intn(len(want)), rng.Intn(len(want))
			rows.move(i, j)
			want[i] = slices.Clone(want[j])
		default:
			i, v := rng.Intn(len(want)), newRow()
			rows.set(i, v)
			want[i] = v
		}
		check(step, want)
	}
}

// TestRowsFollowASliceOfRows: rows made from a flat array (as a snapshot's
// are), then pushed, overwritten, swapped and popped at random, hold what a
// plain slice of rows holds, and never write into the flat array beyond the
// rows it started with.
func TestRowsFollowASliceOfRows(t *testing.T) {
	for _, tc := range []struct{ width, start int }{
		{3, 0}, {3, 1}, {5, rowChunk - 1}, {2, rowChunk}, {4, 2*rowChunk + 7},
	} {
		rng := rand.New(rand.NewSource(int64(tc.width*1000 + tc.start)))
		value := func() int8 { return int8(rng.Intn(200) - 100) }
		flat := make([]int8, tc.start*tc.width+tc.width) // one spare row past the end
		for i := range flat {
			flat[i] = value()
		}
		spare := slices.Clone(flat[tc.start*tc.width:])
		got := fromFlat(tc.width, tc.start, flat[:tc.start*tc.width])
		var want [][]int8
		for i := range tc.start {
			want = append(want, slices.Clone(flat[i*tc.width:(i+1)*tc.width]))
		}
		writes := rowWrites[int8]{
			push: got.push, pop: got.pop,
			move: func(i, j int) { copy(got.row(i), got.row(j)) },
			set:  func(i int, v []int8) { copy(got.row(i), v) },
		}
		mirror(rng, tc.width, 3000, writes, want, value, func(step int, want [][]int8) {
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
		})
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
		value := func() float32 { return float32(rng.NormFloat64()) }
		flat := make([]float32, tc.start*tc.width+tc.width) // one spare row past the end
		for i := range flat {
			flat[i] = value()
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
		writes := rowWrites[float32]{push: got.push, pop: got.pop, move: got.move, set: got.set}
		mirror(rng, tc.width, 3000, writes, want, value, func(step int, want [][]float32) {
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
		})
		if file.reads == 0 {
			t.Errorf("width %d start %d: the file was never read", tc.width, tc.start)
		}
	}
}
