package retriever

import (
	"io"
	"unsafe"
)

// rows are a tenant's vectors of one kind (float32 vectors, int8 codes),
// row after row, in chunks of rowChunk rows. A chunk is either the Go
// heap's or a window of a file mapping (a snapshot's floats and codes:
// placeFloats), so that the rows are not the heap's: the kernel maps the
// pages a scan touches, and may drop them under pressure (floatRows reads
// the floats from the file instead). A mapped chunk is
// never written in place beyond copy-on-write (the mapping is private), and
// one that must grow is copied to the heap by append (its capacity is its
// length): a card added after a restart copies one chunk, not the tenant.
type rows[T float32 | int8] struct {
	width  int // elements a row
	chunks [][]T
	n      int
}

// codeRows are the quantised codes, which every quantised scan reads:
// a snapshot's are read through its mapping, and resident.
type codeRows = rows[int8]

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

// floatRows are the float vectors, which a quantised scan reads only for the
// few rows it re-ranks (quant.go). A snapshot's are windows of its mapping
// (placeFloats), but a re-rank reads a row of one from the snapshot's file
// (read), not through the mapping: a fault on a mapped file maps the whole
// page-cache folio around it (up to 2 MiB on Linux 6.18, at least the 64 KiB
// fault-around window), so a re-rank of a few hundred scattered rows would
// make most of the floats resident. Read from the file, they cost the
// process no resident memory at all: the page cache holds them, shared and
// reclaimable. A row written since the load (set, move, or pushed into a
// mapped chunk) is a private copy in the mapping, and is read there.
type floatRows struct {
	rows[float32]
	snap  *snapFile
	dirty []uint64 // bit i: row i of a mapped chunk was written since the load
}

// snapFile is a snapshot file whose vectors are used in place: data is its
// private mapping, r reads the file itself.
type snapFile struct {
	r    io.ReaderAt
	data []byte
}

// mapFloats makes rows of n rows held in flat, a window of snap's mapping.
func mapFloats(snap *snapFile, width, n int, flat []float32) floatRows {
	return floatRows{rows: fromFlat(width, n, flat), snap: snap, dirty: make([]uint64, (n+63)/64)}
}

// chunkOffset is where chunk c lies in the snapshot file, if it is a window
// of the mapping (not a chunk of the heap).
func (f *floatRows) chunkOffset(c int) (int64, bool) {
	if f.snap == nil {
		return 0, false
	}
	off := uintptr(unsafe.Pointer(unsafe.SliceData(f.chunks[c]))) - uintptr(unsafe.Pointer(unsafe.SliceData(f.snap.data)))
	return int64(off), off < uintptr(len(f.snap.data))
}

// clean says row i, in a mapped chunk, holds what the file holds.
func (f *floatRows) clean(i int) bool { return i/64 < len(f.dirty) && f.dirty[i/64]&(1<<(i%64)) == 0 }

// written records that row i may differ from the file.
func (f *floatRows) written(i int) {
	if i/64 < len(f.dirty) {
		f.dirty[i/64] |= 1 << (i % 64)
	}
}

// read returns row i: read from the snapshot file into buf (len ≥ width)
// when the file holds it, else the row in place.
func (f *floatRows) read(i int, buf []float32) []float32 {
	if off, ok := f.chunkOffset(i / rowChunk); ok && f.clean(i) {
		b := buf[:f.width]
		if readFloats(f.snap.r, b, off+int64(4*(i%rowChunk)*f.width)) == nil {
			return b
		}
		// A failed read: the mapping holds the same bytes.
	}
	return f.row(i)
}

// chunk returns chunk c's rows: those of a mapped chunk read from the file
// (its written rows from the mapping) into buf, grown to the chunk's
// length; a chunk of the heap itself.
func (f *floatRows) chunk(c int, buf []float32) []float32 {
	data := f.chunks[c]
	off, ok := f.chunkOffset(c)
	if !ok {
		return data
	}
	if cap(buf) < len(data) {
		buf = make([]float32, len(data))
	}
	buf = buf[:len(data)]
	if readFloats(f.snap.r, buf, off) != nil {
		return data
	}
	for r := range len(data) / f.width {
		if i := c*rowChunk + r; !f.clean(i) {
			copy(buf[r*f.width:(r+1)*f.width], f.row(i))
		}
	}
	return buf
}

// readFloats reads len(dst) native float32s at off.
func readFloats(r io.ReaderAt, dst []float32, off int64) error {
	_, err := r.ReadAt(unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(dst))), 4*len(dst)), off)
	return err
}

// set overwrites row i with v.
func (f *floatRows) set(i int, v []float32) {
	copy(f.row(i), v)
	f.written(i)
}

// move overwrites row i with row j (a delete's swap).
func (f *floatRows) move(i, j int) {
	dst := f.row(i)
	copy(dst, f.read(j, dst))
	f.written(i)
}

// push appends a row (a copy of v, or zeros when v is nil). A mapped last
// chunk with no room left is first copied to the heap from the file (append
// would copy it through the mapping).
func (f *floatRows) push(v []float32) {
	if last := len(f.chunks) - 1; f.n%rowChunk != 0 {
		if c := f.chunks[last]; len(c) == cap(c) {
			if _, mapped := f.chunkOffset(last); mapped {
				f.chunks[last] = f.chunk(last, make([]float32, len(c), rowChunk*f.width))
			}
		}
	}
	f.rows.push(v)
	f.written(f.n - 1)
}

// pop drops the last row.
func (f *floatRows) pop() {
	f.rows.pop()
	if i := f.n; i/64 < len(f.dirty) {
		f.dirty[i/64] &^= 1 << (i % 64)
	}
}
