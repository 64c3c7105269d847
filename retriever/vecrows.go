package retriever

// floatRows are a tenant's float vectors, row after row, in chunks of
// floatChunkRows rows. A chunk is either the Go heap's or a window of a
// file mapping (a snapshot's floats: mapFloats), so that the vectors the
// quantised scan re-ranks need not be resident: the kernel reads the pages
// the re-ranks touch. A mapped chunk is never written in place beyond
// copy-on-write (the mapping is private), and one that must grow is copied
// to the heap by append (its capacity is its length).
type floatRows struct {
	dim    int
	chunks [][]float32
	n      int
}

const floatChunkRows = 256

// row is row i.
func (f *floatRows) row(i int) []float32 {
	c := f.chunks[i/floatChunkRows]
	o := (i % floatChunkRows) * f.dim
	return c[o : o+f.dim : o+f.dim]
}

// push appends a row.
func (f *floatRows) push(v []float32) {
	if f.n%floatChunkRows == 0 {
		f.chunks = append(f.chunks, make([]float32, 0, floatChunkRows*f.dim))
	}
	last := len(f.chunks) - 1
	f.chunks[last] = append(f.chunks[last], v...)
	f.n++
}

// pop drops the last row.
func (f *floatRows) pop() {
	f.n--
	last := len(f.chunks) - 1
	f.chunks[last] = f.chunks[last][:len(f.chunks[last])-f.dim]
	if len(f.chunks[last]) == 0 {
		f.chunks[last] = nil
		f.chunks = f.chunks[:last]
	}
}

// fromFlat makes rows of n rows held in flat (n·dim floats), chunked as
// windows of it (capacity cut to length, so that growing one copies it).
func fromFlat(dim, n int, flat []float32) floatRows {
	f := floatRows{dim: dim, n: n}
	for start := 0; start < n; start += floatChunkRows {
		end := min(start+floatChunkRows, n)
		f.chunks = append(f.chunks, flat[start*dim:end*dim:end*dim])
	}
	return f
}
