package retriever

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"unsafe"
)

// The indexes' parts of a snapshot (snapshot.go): what a restart would
// otherwise rebuild by analysing every card and reading every vector.

// writeSnapshot writes the lexical index: its field names (a snapshot of
// other fields is not loaded), the docs with their tenants and field
// lengths, the free doc numbers, and every term's postings.
func (x *LexicalIndex) writeSnapshot(w *snapWriter) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	w.uint(uint64(len(x.fields)))
	for _, f := range x.fields {
		w.str(f.name)
	}
	w.uint(uint64(len(x.tenantNo)))
	for name, no := range x.tenantNo {
		w.str(name)
		w.uint(uint64(no))
	}
	w.uint(uint64(len(x.docs)))
	for i := range x.docs {
		d := &x.docs[i]
		w.str(d.id)
		tenant := x.tenantOf[i]
		if d.id == "" {
			tenant = 0 // as before tenantOf: a dead doc's was zero
		}
		w.uint(uint64(tenant))
		for f := range x.fields {
			w.uint(uint64(d.n[f]))
		}
	}
	w.uint(uint64(len(x.free)))
	for _, n := range x.free {
		w.uint(uint64(n))
	}
	w.uint(uint64(len(x.termNo)))
	for term, no := range x.termNo {
		ps := x.postings[no]
		w.str(term)
		w.uint(uint64(len(ps)))
		prev := uint32(0)
		for _, p := range ps {
			w.uint(uint64(p.doc - prev)) // in doc order: deltas
			prev = p.doc
			tf := x.unpackTF(p.tf)
			var mask uint64
			for f := range x.fields {
				if tf[f] != 0 {
					mask |= 1 << f
				}
			}
			w.uint(mask)
			for f := range x.fields {
				if tf[f] != 0 {
					w.uint(uint64(tf[f]))
				}
			}
		}
	}
}

// fieldList are the names of the index's fields, in order.
func (x *LexicalIndex) fieldList() []string {
	out := make([]string, len(x.fields))
	for i, f := range x.fields {
		out[i] = f.name
	}
	return out
}

// readSnapshot fills an empty index from r. It fails on a snapshot of
// other fields (the analysis it holds is not this index's).
func (x *LexicalIndex) readSnapshot(r *snapReader) error {
	nf := r.count(1)
	names := make([]string, 0, nf)
	for range nf {
		names = append(names, r.str())
	}
	if r.err == nil && !slices.Equal(names, x.fieldList()) {
		return fmt.Errorf("snapshot of the lexical fields %v, not %v", names, x.fieldList())
	}
	docs := []lexDoc{}
	byID := map[string]uint32{}
	// y gathers the terms, postings and wide frequencies (x's are swapped
	// for its at the end).
	y := &LexicalIndex{termNo: map[string]uint32{}}
	tenantNo := map[string]uint32{}
	byNo := map[uint32]string{}
	for range r.count(2) {
		name, no := r.str(), uint32(r.uint())
		tenantNo[name], byNo[no] = no, name
	}
	nd := r.count(2 + nf)
	docs = make([]lexDoc, nd)
	tenantOf := make([]uint32, nd)
	for i := range docs {
		d := &docs[i]
		d.id, tenantOf[i] = r.str(), uint32(r.uint())
		for f := range nf {
			d.n[f] = int32(r.uint())
		}
		if d.id == "" {
			tenantOf[i] = lexNoTenant
		} else {
			if _, ok := byNo[tenantOf[i]]; !ok {
				r.fail()
			}
			byID[d.id] = uint32(i)
		}
	}
	free := make([]uint32, r.count(1))
	for i := range free {
		if free[i] = uint32(r.uint()); int(free[i]) >= nd {
			r.fail()
		}
	}
	held := make([]uint32, nd) // bytes of a doc's term list (then lengths)
	for range r.count(2) {
		term := r.str()
		if _, dup := y.termNo[term]; dup {
			r.fail()
		}
		ps := make([]posting, r.count(2))
		doc, bound := uint32(0), lexTF(0)
		for j := range ps {
			doc += uint32(r.uint())
			mask := r.uint()
			if int(doc) >= nd || docs[doc].id == "" || mask>>nf != 0 || (j > 0 && doc == ps[j-1].doc) {
				r.fail()
				break
			}
			var tf [maxLexFields]uint16
			for f := range nf {
				if mask&(1<<f) != 0 {
					tf[f] = uint16(r.uint())
				}
			}
			ps[j] = posting{doc: doc, tf: y.packTF(&tf)}
			bound = raiseBound(bound, &tf)
		}
		if r.err != nil {
			break
		}
		no := y.term(term)
		y.postings[no], y.bound[no] = ps, bound
	}
	if r.err != nil {
		return r.err
	}
	// The docs' term lists, in one array: their lengths, then the lists,
	// each doc's terms met in ascending order.
	prev := make([]uint32, nd)
	total := 0
	for no, ps := range y.postings {
		for _, p := range ps {
			k := uvarintLen(uint64(uint32(no) - prev[p.doc]))
			held[p.doc] += uint32(k)
			total += k
			prev[p.doc] = uint32(no)
		}
	}
	flat := make([]byte, total)
	for i := range docs {
		docs[i].terms, flat = flat[:0:held[i]], flat[held[i]:]
		prev[i] = 0
	}
	for no, ps := range y.postings {
		for _, p := range ps {
			d := &docs[p.doc]
			d.terms = binary.AppendUvarint(d.terms, uint64(uint32(no)-prev[p.doc]))
			prev[p.doc] = uint32(no)
		}
	}
	tenants := map[string]*lexTenant{}
	for i := range docs {
		d := &docs[i]
		if d.id == "" {
			continue
		}
		name := byNo[tenantOf[i]]
		t := tenants[name]
		if t == nil {
			t = &lexTenant{no: tenantOf[i]}
			tenants[name] = t
		}
		t.docs++
		for f, v := range d.n {
			t.sum[f] += int64(v)
		}
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.version++
	x.docs, x.tenantOf, x.free, x.byID, x.tenants, x.tenantNo = docs, tenantOf, free, byID, tenants, tenantNo
	x.termNo, x.termName, x.postings, x.bound, x.freeTerms, x.wide, x.freeWide = y.termNo, y.termName, y.postings, y.bound, nil, y.wide, nil
	return nil
}

// floatMapMax is the most float bytes of a snapshot's tenant that are read
// through the mapping like its codes: a fault on the mapping maps the
// whole page-cache folio around it (up to 2 MiB), so a query's re-rank of
// some LegDepth (200) scattered rows maps nearly all of a region of a
// couple of folios anyway, and reading them from the file (a system call
// each, about 1 µs) would cost such a tenant's answer more than the rest of
// it. A larger tenant's floats are read from the file (floatRows).
const floatMapMax = 4 << 20

// readsFloatsFromFile says a snapshot's tenant of n rows has its floats
// read from the file rather than through the mapping (floatMapMax).
func (m *MemoryVectors) readsFloatsFromFile(n int) bool {
	return 4*int64(n)*int64(m.dim) > m.floatMapMax
}

// writeSnapshot writes every tenant's IDs, codes and their quantisations,
// then every tenant's float vectors in the same order: the floats after all
// that the scans read through the mapping, and first the tenants whose
// floats are read from the file, so that the folios mapped around theirs
// are two at most (one holding the last quantisations, which the load
// reads, one the first floats read through the mapping).
func (m *MemoryVectors) writeSnapshot(w *snapWriter) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	w.uint(uint64(m.dim))
	w.uint(uint64(len(m.tenants)))
	ts := make([]*tenantVectors, 0, len(m.tenants))
	for _, fromFile := range []bool{true, false} {
		for _, t := range m.tenants {
			if m.readsFloatsFromFile(len(t.ids)) == fromFile {
				ts = append(ts, t)
			}
		}
	}
	for _, t := range ts {
		w.str(t.name)
		w.uint(uint64(len(t.ids)))
		for _, id := range t.ids {
			w.str(id)
		}
		w.align4()
		for _, c := range t.codes.chunks {
			w.int8s(c)
		}
		for _, q := range t.quant {
			w.f32(q.scale)
			w.f32(q.codeN)
			w.f32(q.errN2)
			w.f32(q.errNI)
		}
	}
	w.align4()
	var buf []float32 // a mapped chunk's floats, read from its file
	for _, t := range ts {
		for c := range t.vecs.chunks {
			buf = t.vecs.chunk(c, buf)
			w.floats(buf)
		}
	}
}

// floatRegion is where a tenant's rows lie in a snapshot file: n float
// vectors from byte offset at, n code rows from codesAt, their n
// quantisations from quantAt.
type floatRegion struct {
	t                    *tenantVectors
	at, codesAt, quantAt int64
	n                    int
}

// readSnapshot fills an empty store from r, all but the float vectors,
// their codes and quantisations, whose places in the file it returns: they
// are mapped, or read, once the whole snapshot is checked (placeFloats).
func (m *MemoryVectors) readSnapshot(r *snapReader) ([]floatRegion, error) {
	if dim := r.uint(); r.err == nil && dim != uint64(m.dim) {
		return nil, fmt.Errorf("snapshot of %d-dimensional vectors, not %d", dim, m.dim)
	}
	var regions []floatRegion
	pad := quantPad(m.dim)
	tenants := map[string]*tenantVectors{}
	rows := map[string]vecRow{}
	for range r.count(2) {
		name := r.str()
		n := r.count(1 + 4*m.dim + pad + 16)
		t := &tenantVectors{name: name, ids: make([]string, n), keys: make([]uint32, n)}
		for i := range t.ids {
			id := r.str()
			if _, dup := rows[id]; dup {
				r.fail()
			}
			t.ids[i], rows[id] = id, vecRow{t, int32(i)}
		}
		r.align4()
		g := floatRegion{t: t, n: n}
		g.codesAt = r.skip(int64(n) * int64(pad))
		g.quantAt = r.skip(int64(n) * int64(unsafe.Sizeof(rowQuant{})))
		regions = append(regions, g)
		if r.err != nil {
			return nil, r.err
		}
		if n > 0 {
			tenants[name] = t
		}
	}
	r.align4()
	for i := range regions {
		regions[i].at = r.skip(4 * int64(regions[i].n) * int64(m.dim))
	}
	if r.err != nil {
		return nil, r.err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.version++
	m.tenants, m.rows = tenants, rows
	return regions, nil
}

// placeFloats gives the tenants read by readSnapshot their float vectors,
// codes and quantisations from the checked snapshot file f: a private
// mapping of it where the system has one (mapFile), kept open beside it for
// the float rows a re-rank reads of the tenants that read them from the
// file (floatRows, readsFloatsFromFile), else copies read into the heap. Either way the tenant's rows are windows of one flat array
// (fromFlat); its quantisations are one slice (whose capacity is its
// length: a mapped one is copied to the heap at the tenant's next new
// vector). It closes f unless it keeps it (release closes it then).
func (m *MemoryVectors) placeFloats(f *os.File, regions []floatRegion) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(regions) == 0 {
		return f.Close()
	}
	pad := quantPad(m.dim)
	data, err := mapFile(f)
	if err == nil && nativeLittleEndian {
		m.snap = &snapFile{r: f, data: data}
		for _, g := range regions {
			floats, codes, quant := []float32{}, []int8{}, []rowQuant{}
			if g.n > 0 {
				floats = unsafe.Slice((*float32)(unsafe.Pointer(&data[g.at])), g.n*m.dim)
				codes = unsafe.Slice((*int8)(unsafe.Pointer(&data[g.codesAt])), g.n*pad)
				quant = unsafe.Slice((*rowQuant)(unsafe.Pointer(&data[g.quantAt])), g.n)
			}
			g.t.vecs, g.t.codes = floatRows{rows: fromFlat(m.dim, g.n, floats)}, fromFlat(pad, g.n, codes)
			if m.readsFloatsFromFile(g.n) {
				g.t.vecs = mapFloats(m.snap, m.dim, g.n, floats)
			}
			g.t.setQuant(quant)
		}
		return nil
	}
	defer f.Close()
	if err == nil {
		_ = unmapFile(data)
	}
	for _, g := range regions {
		b := make([]byte, 4*g.n*m.dim)
		if _, err := f.ReadAt(b, g.at); err != nil {
			return err
		}
		floats := make([]float32, g.n*m.dim)
		for i := range floats {
			floats[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
		codes := make([]int8, g.n*pad)
		if len(codes) > 0 {
			if _, err := f.ReadAt(unsafe.Slice((*byte)(unsafe.Pointer(&codes[0])), len(codes)), g.codesAt); err != nil {
				return err
			}
		}
		qb := make([]byte, 16*g.n)
		if _, err := f.ReadAt(qb, g.quantAt); err != nil {
			return err
		}
		quant := make([]rowQuant, g.n)
		for i := range quant {
			f32 := func(k int) float32 { return math.Float32frombits(binary.LittleEndian.Uint32(qb[16*i+4*k:])) }
			quant[i] = rowQuant{scale: f32(0), codeN: f32(1), errN2: f32(2), errNI: f32(3)}
		}
		g.t.vecs, g.t.codes = floatRows{rows: fromFlat(m.dim, g.n, floats)}, fromFlat(pad, g.n, codes)
		g.t.setQuant(quant)
	}
	return nil
}

// setQuant gives t its rows' quantisations, counting the wild ones and
// taking the others' maxima.
func (t *tenantVectors) setQuant(quant []rowQuant) {
	t.quant, t.wild, t.max = quant, 0, quantMax{}
	for i, q := range quant {
		if t.isWild(i) {
			t.wild++
		}
		t.max.add(q)
	}
}

// The snapshot's quantisations are used in place: four little-endian
// float32s, as rowQuant is laid out.
var _ [unsafe.Sizeof(rowQuant{}) - 16]struct{}
var _ [16 - unsafe.Sizeof(rowQuant{})]struct{}

// release unmaps and closes the snapshot the vectors were mapped from; the
// store is empty afterwards. Call when nothing searches it any more
// (Retriever.Close).
func (m *MemoryVectors) release() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.snap == nil {
		return nil
	}
	m.tenants, m.rows = map[string]*tenantVectors{}, map[string]vecRow{}
	m.version++
	snap := m.snap
	m.snap = nil
	err := unmapFile(snap.data)
	if c, ok := snap.r.(io.Closer); ok {
		err = errors.Join(err, c.Close())
	}
	return err
}
