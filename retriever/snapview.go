package retriever

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/seed0cff8200/cardex/cards"
)

// The view's part of a snapshot (snapshot.go): every held entry as the
// store's card, learned phrasings and co-usage table made it, with what the
// view derived from them once (token estimate, duplicate key, summary
// words), and the store's server entries. A restart whose snapshot is
// current builds the view from it without reading a card from the store.
//
// Each entry is one length-prefixed record, decoded from one buffer that
// its strings then share (one allocation for a card's text, one for its
// string lists): the view holds each card as compactly as the store's
// JSON decoded it, with far fewer objects for the collector to trace.

// viewSnap is a view part as read: its entries' records, not yet
// decoded, and its server entries.
type viewSnap struct {
	entries [][]byte
	servers []cards.ServerInfo
}

// writeView writes the view's entries, in number order, and its server
// entries. Call with r.mu held.
func (r *Retriever) writeView(w *snapWriter) {
	w.uint(uint64(len(r.byID)))
	var rec recWriter
	for _, e := range r.entries {
		if e == nil {
			continue
		}
		rec.b = rec.b[:0]
		rec.entry(e)
		w.uint(uint64(len(rec.b)))
		w.bytes(rec.b)
	}
	n := 0
	for _, byName := range r.servers {
		n += len(byName)
	}
	w.uint(uint64(n))
	for _, byName := range r.servers {
		for _, si := range byName {
			rec.b = rec.b[:0]
			rec.server(&si)
			w.uint(uint64(len(rec.b)))
			w.bytes(rec.b)
		}
	}
}

// readView reads the view part: its entries' records (decoded by
// fillView) and its server entries. Nothing of it is trusted before the
// snapshot's checksum is (rd.check).
func readView(rd *snapReader) *viewSnap {
	v := &viewSnap{entries: make([][]byte, rd.count(8))}
	for i := range v.entries {
		v.entries[i] = rd.blob()
	}
	v.servers = make([]cards.ServerInfo, rd.count(8))
	for i := range v.servers {
		b := rd.blob()
		if rd.err != nil {
			return nil
		}
		d := recReader{b: b}
		if v.servers[i] = d.server(); d.bad || d.i != len(b) {
			rd.fail()
		}
	}
	if rd.err != nil {
		return nil
	}
	return v
}

// fillView decodes the entries' records into the empty view, at their
// tenants' final map sizes. Residency's tenants that the view does not
// hold are left out: it returns their IDs, for the indexes to drop. The
// indexes' docs get the entries' numbers later (finishView). Call with
// r.mu held for writing.
func (r *Retriever) fillView(recs [][]byte) (gone []string, err error) {
	es := make([]*entry, len(recs))
	perTenant := map[string]int{}
	for i, b := range recs {
		if es[i] = decodeEntry(b); es[i] == nil {
			return nil, fmt.Errorf("%w: entry %d", errSnapCorrupt, i)
		}
		perTenant[es[i].card.Tenant]++
	}
	r.byID = make(map[string]*entry, len(es))
	r.entries = slices.Grow(r.entries, len(es))
	for t, n := range perTenant {
		if r.holds(t) {
			r.byTenant[t], r.byName[t] = make(map[string]*entry, n), make(map[string][]*entry, n)
		}
	}
	for _, e := range es {
		switch {
		case !r.holds(e.card.Tenant):
			gone = append(gone, e.id)
		case r.byID[e.id] != nil:
			return nil, fmt.Errorf("%w: card %s twice", errSnapCorrupt, e.id)
		default:
			r.add(e)
		}
	}
	return gone, nil
}

// recWriter builds one record: unsigned varints, length-prefixed strings,
// lists and byte strings whose length is written plus one (0: nil), so that
// nil and empty come back as they were.
type recWriter struct{ b []byte }

func (w *recWriter) uint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }

func (w *recWriter) str(s string) {
	w.uint(uint64(len(s)))
	w.b = append(w.b, s...)
}

func (w *recWriter) raw(p []byte) {
	if p == nil {
		w.uint(0)
		return
	}
	w.uint(uint64(len(p)) + 1)
	w.b = append(w.b, p...)
}

func (w *recWriter) list(ss []string) {
	if ss == nil {
		w.uint(0)
		return
	}
	w.uint(uint64(len(ss)) + 1)
	for _, s := range ss {
		w.str(s)
	}
}

func (w *recWriter) f64(f float64) { w.b = binary.LittleEndian.AppendUint64(w.b, math.Float64bits(f)) }

func (w *recWriter) time(t time.Time) {
	b, err := t.MarshalBinary()
	if err != nil { // a zone offset that is not whole minutes: never a store's
		b = nil
	}
	w.raw(b)
}

// tri encodes an optional bool: 0 nil, 1 false, 2 true.
func tri(p *bool) uint64 {
	switch {
	case p == nil:
		return 0
	case *p:
		return 2
	}
	return 1
}

// entry writes an entry: the card its answers are made of (without search
// examples, which the entry holds apart), then its examples, learned
// phrasings, co-usage table as stored, token estimate, duplicate key and
// summary words.
func (w *recWriter) entry(e *entry) {
	c := &e.card
	w.uint(uint64(len(c.Aliases) + len(c.Tags) + len(c.RequiredScopes) + len(e.examples) + len(e.learned)))
	for _, s := range []string{e.id, string(c.Kind), c.Summary, c.Description, c.WhenNotToUse, string(c.Status)} {
		w.str(s)
	}
	w.list(c.Aliases)
	w.list(c.Tags)
	w.list(c.RequiredScopes)
	a := &c.Annotations
	w.uint(tri(a.ReadOnly) | tri(a.Destructive)<<2 | tri(a.Idempotent)<<4 | tri(a.OpenWorld)<<6)
	w.raw(c.InputSchema)
	w.raw(c.OutputSchema)
	w.uint(uint64(c.Version))
	w.time(c.UpdatedAt)
	w.list(e.examples)
	w.list(e.learned)
	var stored cards.Companions
	if e.co != nil {
		stored = e.co.stored
	}
	w.companions(&stored)
	w.uint(uint64(e.tokens))
	w.str(e.dup)
	w.uint(uint64(len(e.words)))
	for _, x := range e.words {
		w.b = binary.LittleEndian.AppendUint64(w.b, x)
	}
}

func (w *recWriter) companions(cs *cards.Companions) {
	if cs.Tools == nil {
		w.uint(0)
		return
	}
	w.uint(uint64(len(cs.Tools)) + 1)
	w.time(cs.At)
	w.f64(cs.Uses)
	for _, t := range cs.Tools {
		w.str(t.Server)
		w.str(t.Name)
		w.f64(t.Before)
		w.f64(t.After)
	}
}

func (w *recWriter) server(si *cards.ServerInfo) {
	w.str(si.Tenant)
	w.str(si.Name)
	w.str(si.Title)
	w.str(si.Description)
	w.uint(uint64(si.Version))
	w.time(si.UpdatedAt)
}

// recReader decodes one record in place: its strings point into b, which
// they keep alive. bad is set by any read past the end.
type recReader struct {
	b    []byte
	i    int
	bad  bool
	strs []string // the record's string lists, cut from one allocation
}

func (d *recReader) uint() uint64 {
	v, n := binary.Uvarint(d.b[min(d.i, len(d.b)):])
	if n <= 0 {
		d.bad = true
		return 0
	}
	d.i += n
	return v
}

// take returns the next n bytes (capacity n, so no append can reach past
// them).
func (d *recReader) take(n uint64) []byte {
	if d.bad || n > uint64(len(d.b)-d.i) {
		d.bad = true
		return nil
	}
	p := d.b[d.i : d.i+int(n) : d.i+int(n)]
	d.i += int(n)
	return p
}

func (d *recReader) str() string {
	p := d.take(d.uint())
	if len(p) == 0 {
		return ""
	}
	return unsafe.String(&p[0], len(p))
}

func (d *recReader) raw() []byte {
	n := d.uint()
	if n == 0 {
		return nil
	}
	p := d.take(n - 1)
	if p == nil {
		return []byte{}
	}
	return p
}

func (d *recReader) list() []string {
	n := d.uint()
	if n == 0 {
		return nil
	}
	n--
	if n > uint64(len(d.strs)) {
		d.bad = true
		return nil
	}
	out := d.strs[:n:n]
	d.strs = d.strs[n:]
	for i := range out {
		out[i] = d.str()
	}
	return out
}

func (d *recReader) f64() float64 { return math.Float64frombits(d.u64()) }

func (d *recReader) u64() uint64 {
	p := d.take(8)
	if p == nil {
		return 0
	}
	return binary.LittleEndian.Uint64(p)
}

func (d *recReader) time() time.Time {
	var t time.Time
	if p := d.raw(); len(p) > 0 && t.UnmarshalBinary(p) != nil {
		d.bad = true
	}
	return t
}

func untri(v uint64) *bool {
	switch v & 3 {
	case 1:
		return new(bool)
	case 2:
		t := true
		return &t
	}
	return nil
}

// decodeEntry decodes an entry record (nil if it is malformed). Its
// number is not taken yet.
func decodeEntry(b []byte) *entry {
	d := recReader{b: b}
	nstr := d.uint()
	if nstr > uint64(len(b)) { // every string takes at least a byte
		return nil
	}
	d.strs = make([]string, nstr)
	e := &entry{}
	c := &e.card
	// The ID holds the key, its parts separated by idSep (which no name
	// holds): the card's tenant, server and name are parts of it.
	e.id = d.str()
	var ok1, ok2 bool
	c.Tenant, c.Name, ok1 = strings.Cut(e.id, idSep)
	c.Server, c.Name, ok2 = strings.Cut(c.Name, idSep)
	if !ok1 || !ok2 || strings.Contains(c.Name, idSep) {
		return nil
	}
	c.Kind = cards.Kind(d.str())
	c.Summary, c.Description, c.WhenNotToUse, c.Status = d.str(), d.str(), d.str(), cards.Status(d.str())
	c.Aliases, c.Tags, c.RequiredScopes = d.list(), d.list(), d.list()
	a := d.uint()
	c.Annotations = cards.Annotations{ReadOnly: untri(a), Destructive: untri(a >> 2), Idempotent: untri(a >> 4), OpenWorld: untri(a >> 6)}
	c.InputSchema, c.OutputSchema = d.raw(), d.raw()
	c.Version = int64(d.uint())
	c.UpdatedAt = d.time()
	e.examples, e.learned = d.list(), d.list()
	e.co = newCoUsage(d.companions())
	e.tokens = int(d.uint())
	e.dup = d.str()
	nw := d.uint()
	if nw > uint64(len(b)) {
		return nil
	}
	if nw > 0 {
		e.words = make([]uint64, nw)
		for i := range e.words {
			e.words[i] = d.u64()
		}
	}
	if d.bad || d.i != len(b) {
		return nil
	}
	return e
}

func (d *recReader) companions() cards.Companions {
	n := d.uint()
	if n == 0 {
		return cards.Companions{}
	}
	n--
	if n > uint64(len(d.b)) {
		d.bad = true
		return cards.Companions{}
	}
	cs := cards.Companions{At: d.time(), Uses: d.f64(), Tools: make([]cards.Companion, n)}
	for i := range cs.Tools {
		cs.Tools[i] = cards.Companion{Server: d.str(), Name: d.str(), Before: d.f64(), After: d.f64()}
	}
	return cs
}

func (d *recReader) server() cards.ServerInfo {
	si := cards.ServerInfo{Tenant: d.str(), Name: d.str(), Title: d.str(), Description: d.str()}
	si.Version = int64(d.uint())
	si.UpdatedAt = d.time()
	return si
}

// derivationPrint fingerprints what the view derives from a card, on a
// probe card that has every field the derivations read: the lexical
// document's values and their analysis, the embedded text, the token
// estimate, the duplicate key and summary words, and the quantisation of a
// vector. A snapshot is loaded only when the code reading it derives as
// the code that wrote it did, so a change to any of these (which should
// also change snapVersion) cannot leave a view built by other rules.
func (r *Retriever) derivationPrint() uint64 {
	destructive := true
	e := newEntry(cards.Card{
		Tenant: "probe-tenant", Server: "probeServer_v2", Name: "getProbeItems_byID",
		Summary: "Lists the probe's items; (filtered) by owner ID.", Description: "Reads items: HTTP/JSON, 3 pages at most.",
		Aliases: []string{"fetchProbeItems", "probe list"}, Tags: []string{"read-only", cards.TagDeprecated},
		InputSchema:    []byte(`{"type":"object","properties":{"ownerId":{"type":"string"},"page":{"type":"object","properties":{"size":{"type":"integer"}}},"ids":{"type":"array","items":{"type":"object","properties":{"itemID":{"type":"string"}}}}}}`),
		SearchExamples: []string{"which items does owner 42 have", "list my probe items"},
		Annotations:    cards.Annotations{Destructive: &destructive},
	})
	e.learned = []string{"show the owner's items"}
	params := schemaParams(e.card.InputSchema)
	d := lexicalDoc(e, params)
	h := fnv.New64a()
	put := func(s string) {
		h.Write(binary.AppendUvarint(nil, uint64(len(s))))
		h.Write([]byte(s))
	}
	put(EmbeddingText(&e.card))
	put(e.embeddingText(params))
	// Every field's values and their analysis, whichever fields this
	// index weighs (the lexical part of the snapshot checks those).
	for _, f := range []string{lexFieldServer, lexFieldName, lexFieldSummary, lexFieldDescription, lexFieldAliases, lexFieldLearned, lexFieldExamples, lexFieldTags, lexFieldParams} {
		put(f)
		for _, v := range fieldValues(&d, f) {
			put(v)
			for _, tok := range r.lex.analyzer.Analyze([]byte(v)) {
				put(string(tok.Term))
				h.Write(binary.AppendUvarint(nil, uint64(tok.Position)))
			}
		}
	}
	put(e.dup)
	for _, x := range e.words {
		h.Write(binary.LittleEndian.AppendUint64(nil, x))
	}
	h.Write(binary.AppendUvarint(nil, uint64(e.tokens)))
	dim := r.emb.Dim()
	v := make([]float32, dim)
	for i := range v {
		v[i] = float32(math.Sin(float64(i)*0.7)) / float32(math.Sqrt(float64(dim)))
	}
	codes := make([]int8, quantPad(dim))
	q, ok := quantizeRow(v, codes)
	h.Write(unsafe.Slice((*byte)(unsafe.Pointer(&codes[0])), len(codes)))
	h.Write(unsafe.Slice((*byte)(unsafe.Pointer(&q)), unsafe.Sizeof(q)))
	if ok {
		h.Write([]byte{1})
	}
	return h.Sum64()
}
