package retriever

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// A snapshot is what a restart rebuilds, kept beside the store: the
// lexical index (analysed postings and field lengths, by field name) and
// the vectors (floats, codes and their quantisation), with the store's
// change sequence they reflect and, per card, fingerprints of the lexical
// document and of the vector's text. Close writes it (WithSnapshot); New
// loads it when its format, embedder, lexical fields and sequence are the
// current ones, and then still reads every card from the store, as without
// it, but analyses only the cards whose lexical fingerprint differs and
// embeds or reads from the store only the vectors whose text does. A
// snapshot that is stale, corrupt or truncated is ignored (and logged), and
// the view is built from the store as without one.

// snapMagic starts every snapshot; snapVersion changes with its format or
// with what its parts mean (the analysis, the quantisation).
const (
	snapMagic   = "cardex retriever snapshot\n"
	snapVersion = 1
)

// WithSnapshot keeps a snapshot of the view at path (written by Close,
// read by New). Only the in-memory vector index is snapshotted: with
// another (WithVectors) the option does nothing.
func WithSnapshot(path string) Option { return func(r *Retriever) { r.snapPath = path } }

// snapCheck is one card's fingerprints in a loaded snapshot.
type snapCheck struct {
	lex uint64 // lexHash of its lexical document
	vec string // EmbeddingHash of its vector's text
}

// lexHash fingerprints a lexical document as the index reads it: its ID
// and tenant, then every value of every field of the index (fieldValues),
// by field, each length-prefixed. A field added to the index is in it
// without a change here.
func (x *LexicalIndex) lexHash(d *LexicalDoc) uint64 {
	h := fnv.New64a()
	var n [8]byte
	put := func(s string) {
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		h.Write([]byte(s))
	}
	put(d.ID)
	put(d.Tenant)
	for _, f := range x.fields {
		vs := fieldValues(d, f.name)
		binary.LittleEndian.PutUint64(n[:], uint64(len(vs)))
		h.Write(n[:])
		for _, v := range vs {
			put(v)
		}
	}
	return h.Sum64()
}

// snapshotable says the view can be snapshotted: a path and the in-memory
// vector index.
func (r *Retriever) snapshotable() (*MemoryVectors, bool) {
	mi, ok := r.vec.(memoryIndex)
	return mi.m, ok && r.snapPath != ""
}

// WriteSnapshot writes the view's snapshot to the WithSnapshot path (a
// temporary file renamed over it once synced). Close calls it.
func (r *Retriever) WriteSnapshot() error {
	mv, ok := r.snapshotable()
	if !ok {
		return nil
	}
	start := time.Now()
	r.mu.RLock()
	defer r.mu.RUnlock()
	tmp, err := os.CreateTemp(filepath.Dir(r.snapPath), filepath.Base(r.snapPath)+".tmp*")
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, nothing is there
	w := newSnapWriter(tmp)
	w.str(snapMagic)
	w.uint(snapVersion)
	w.uint(r.seq)
	w.str(r.emb.Model())
	w.uint(uint64(len(r.byID)))
	for id, e := range r.byID {
		params := schemaParams(e.card.InputSchema)
		d := lexicalDoc(e, params)
		w.str(id)
		w.uint(r.lex.lexHash(&d))
		w.str(EmbeddingHash(e.embeddingText(params)))
	}
	r.lex.writeSnapshot(w)
	mv.writeSnapshot(w)
	err = errors.Join(w.finish(), tmp.Sync(), tmp.Close())
	if err == nil {
		err = os.Rename(tmp.Name(), r.snapPath)
	}
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	r.log.Info("snapshot written", "path", r.snapPath, "cards", len(r.byID), "seq", r.seq, "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// loadSnapshot fills the empty indexes from the snapshot when it is the
// store's current state, and returns the cards' fingerprints (nil when
// there is no usable snapshot; why is logged).
func (r *Retriever) loadSnapshot(ctx context.Context) map[string]snapCheck {
	mv, ok := r.snapshotable()
	if !ok {
		return nil
	}
	start := time.Now()
	checks, err := r.readSnapshot(ctx, mv)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		r.log.Warn("snapshot not used; rebuilding the view from the store", "path", r.snapPath, "reason", err)
		// The indexes may hold part of it: start them afresh.
		lex, lerr := NewLexicalIndexWithWeights(r.lexWeights)
		if lerr == nil {
			r.lex = lex
		}
		r.vec = memoryIndex{NewMemoryVectors(r.emb.Dim())}
		return nil
	}
	r.log.Info("snapshot loaded", "path", r.snapPath, "cards", len(checks), "took", time.Since(start).Round(time.Millisecond))
	return checks
}

func (r *Retriever) readSnapshot(ctx context.Context, mv *MemoryVectors) (map[string]snapCheck, error) {
	f, err := os.Open(r.snapPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	rd, err := newSnapReader(f)
	if err != nil {
		return nil, err
	}
	if rd.str() != snapMagic || rd.uint() != snapVersion {
		return nil, fmt.Errorf("%w: not a snapshot of this version", errSnapCorrupt)
	}
	seq, model := rd.uint(), rd.str()
	if rd.err != nil {
		return nil, rd.err
	}
	if model != r.emb.Model() {
		return nil, fmt.Errorf("snapshot of the embedder %q, not %q", model, r.emb.Model())
	}
	now, err := r.store.Seq(ctx)
	if err != nil {
		return nil, fmt.Errorf("store sequence: %w", err)
	}
	if seq != now {
		return nil, fmt.Errorf("stale: snapshot at change %d, store at %d", seq, now)
	}
	n := rd.count(3)
	checks := make(map[string]snapCheck, n)
	for range n {
		id := rd.str()
		checks[id] = snapCheck{lex: rd.uint(), vec: rd.str()}
	}
	if rd.err != nil {
		return nil, rd.err
	}
	if err := r.lex.readSnapshot(rd); err != nil {
		return nil, err
	}
	regions, err := mv.readSnapshot(rd)
	if err != nil {
		return nil, err
	}
	// Only a whole snapshot with its checksum right is used (the indexes
	// are started afresh otherwise: loadSnapshot).
	if err := rd.check(); err != nil {
		return nil, err
	}
	return checks, mv.placeFloats(f, regions)
}

// dropUnlisted removes from the indexes every doc a snapshot brought that
// the view does not hold (a card the first Sync did not find active). Call
// with r.mu held.
func (r *Retriever) dropUnlisted(ctx context.Context, checks map[string]snapCheck) error {
	var gone []string
	for id := range checks {
		if r.byID[id] == nil {
			gone = append(gone, id)
		}
	}
	for _, id := range gone {
		r.vec.Delete(ctx, id)
	}
	return r.lex.Delete(gone)
}
