package retriever

import (
	"errors"
	"os"
	"unsafe"
)

// ResidentPages counts the pages of a loaded snapshot's mapped float
// vectors and codes that are resident in the process: mapped by its page
// table, as Linux's /proc/self/pagemap reports (bit 63 of a page's entry).
func ResidentPages(r *Retriever) (floats, codes int, err error) {
	mv, ok := r.snapshotable()
	if !ok {
		return 0, 0, errors.New("no in-memory vectors with a snapshot")
	}
	mv.mu.RLock()
	defer mv.mu.RUnlock()
	if mv.snap == nil {
		return 0, 0, errors.New("no snapshot mapped")
	}
	pagemap, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return 0, 0, err
	}
	defer pagemap.Close()
	seen := map[uintptr]bool{}
	count := func(p unsafe.Pointer, n int) (int, error) {
		size := uintptr(os.Getpagesize())
		first, last := uintptr(p)/size, (uintptr(p)+uintptr(n)-1)/size
		entries := make([]byte, 8*(last-first+1))
		if _, err := pagemap.ReadAt(entries, int64(8*first)); err != nil {
			return 0, err
		}
		resident := 0
		for i := range last - first + 1 {
			if !seen[first+i] && entries[8*i+7]&0x80 != 0 {
				resident++
			}
			seen[first+i] = true
		}
		return resident, nil
	}
	for _, t := range mv.tenants {
		for c, data := range t.vecs.chunks {
			if _, mapped := t.vecs.chunkOffset(c); mapped {
				n, err := count(unsafe.Pointer(unsafe.SliceData(data)), 4*len(data))
				if err != nil {
					return 0, 0, err
				}
				floats += n
			}
		}
		for _, data := range t.codes.chunks {
			n, err := count(unsafe.Pointer(unsafe.SliceData(data)), len(data))
			if err != nil {
				return 0, 0, err
			}
			codes += n
		}
	}
	return floats, codes, nil
}

// KeptRows is the rows the quantised scans of r's in-memory vectors scored
// exactly (MemoryVectors.KeptRows).
func KeptRows(r *Retriever) uint64 {
	mi, _ := r.vec.(memoryIndex)
	return mi.m.KeptRows()
}

// FloatMapMax is floatMapMax.
const FloatMapMax = floatMapMax

// WithFloatMapMax sets the float bytes up to which a snapshot's tenant
// reads its floats through the mapping (floatMapMax; 0: every tenant reads
// them from the file).
func WithFloatMapMax(n int64) Option {
	return func(r *Retriever) {
		if mi, ok := r.vec.(memoryIndex); ok {
			mi.m.floatMapMax = n
		}
	}
}
