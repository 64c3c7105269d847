package retriever

// rows are a tenant's vectors of one kind (float32 vectors, int8 codes),
// row after row, in chunks of rowChunk rows. A chunk is either the Go
// heap's or a window of a file mapping (a snapshot's floats and codes:
// placeFloats), so that the rows need not be resident: the kernel reads the
// pages a scan touches, and drops them under pressure. A mapped chunk is
// never written in place beyond copy-on-write (the mapping is private), and
// one that must grow is copied to the heap by append (its capacity is its
// length): a card added after a restart copies one chunk, not the tenant.
type rows[T float32 | int8] struct {
	width  int // elements a row
	chunks [][]T
	n      int
}

// floatRows are the float vectors; codeRows the quantised codes.
type (
	floatRows = rows[float32]
	codeRows  = rows[int8]
)

const rowChunk = 256

// row is row i.
func (f *rows[T]) row(i int) []T {
	c := f.chunks[i/rowChunk]
	o := (i % rowChunk) * f.width
	return c[o : o+f.width : o+f.width]
}

// push appends a row: a copy of v, or zeros when v is nil.
func (f *rows[T]) push(v []T) {
	if f.n%rowChunk == 0 {
		f.chunks = append(f.chunks, make([]T, 0, rowChunk*f.width))
	}
	last := len(f.chunks) - 1
	if v == nil {
		f.chunks[last] = append(f.chunks[last], make([]T, f.width)...)
	} else {
		f.chunks[last] = append(f.chunks[last], v...)
	}
	f.n++
}

// pop drops the last row.
func (f *rows[T]) pop() {
	f.n--
	last := len(f.chunks) - 1
	f.chunks[last] = f.chunks[last][:len(f.chunks[last])-f.width]
	if len(f.chunks[last]) == 0 {
		f.chunks[last] = nil
		f.chunks = f.chunks[:last]
	}
}

// fromFlat makes rows of n rows held in flat (n·width elements), chunked as
// windows of it (capacity cut to length, so that growing one copies it).
func fromFlat[T float32 | int8](width, n int, flat []T) rows[T] {
	f := rows[T]{width: width, n: n}
	for start := 0; start < n; start += rowChunk {
		end := min(start+rowChunk, n)
		f.chunks = append(f.chunks, flat[start*width:end*width:end*width])
	}
	return f
}
