package retriever

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/seed0cff8200/cardex/cards"
)

// A snapshot is the view as a restart would rebuild it, kept beside the
// store: every held entry (the card, its learned phrasings and co-usage
// table, what the view derived from them: snapview.go), the server
// entries, the lexical index (analysed postings and field lengths, by
// field name) and the vectors (floats, codes and their quantisation), with
// the store's change sequence they reflect and that sequence's last
// change. Close writes it (WithSnapshot). New loads it when its format,
// derivations (derivationPrint), embedder and lexical fields are the
// current ones and its sequence and last change are the store's: then
// nothing can have changed since, and the view is the snapshot's, built
// without reading a card, a phrasing, a table or a vector from the store.
// Every store write the view depends on (a card's put, deletion or
// deprecation, its search examples, learned phrasings and co-usage table,
// a server entry's put or deletion) moves the store's change sequence, so
// a snapshot that missed any is stale. Only a view of every tenant is
// snapshotted; one under Residency loads a snapshot and keeps the tenants
// it holds. A snapshot that is stale, corrupt
// or truncated is ignored (and logged), and the view is built from the
// store as without one: the store stays the truth.

// snapMagic starts every snapshot; snapVersion changes with its format or
// with what its parts mean (the analysis, the quantisation, what the view
// derives from a card).
const (
	snapMagic   = "cardex retriever snapshot\n"
	snapVersion = 3
)

// WithSnapshot keeps a snapshot of the view at path (written by Close,
// read by New). Only the in-memory vector index is snapshotted: with
// another (WithVectors) the option does nothing.
func WithSnapshot(path string) Option { return func(r *Retriever) { r.snapPath = path } }

// snapshotable says the view can be snapshotted: a path and the in-memory
// vector index.
func (r *Retriever) snapshotable() (*MemoryVectors, bool) {
	mi, ok := r.vec.(memoryIndex)
	return mi.m, ok && r.snapPath != ""
}

// lastChange is the store's change at seq (the latest one), which a
// snapshot records beside the sequence: a store that reached the same
// sequence by other writes (one restored from a backup, then written to)
// is not taken for the one the snapshot saw.
func lastChange(ctx context.Context, store interface {
	Changes(context.Context, uint64, int) ([]cards.Change, error)
}, seq uint64) (cards.Change, error) {
	if seq == 0 {
		return cards.Change{}, nil
	}
	chs, err := store.Changes(ctx, seq-1, 1)
	if err != nil || len(chs) == 0 || chs[0].Seq != seq {
		return cards.Change{}, errors.Join(err, fmt.Errorf("the store has no change %d", seq))
	}
	return chs[0], nil
}

// WriteSnapshot writes the view's snapshot to the WithSnapshot path (a
// temporary file renamed over it once synced). Close calls it.
func (r *Retriever) WriteSnapshot() error {
	mv, ok := r.snapshotable()
	if !ok {
		return nil
	}
	if r.res != nil {
		// The view holds some tenants only: a snapshot of it would not be
		// the store's view (an earlier one, of every tenant, is kept).
		r.log.Info("snapshot not written: the view holds some tenants only (residency)", "path", r.snapPath)
		return nil
	}
	start := time.Now()
	r.mu.RLock()
	defer r.mu.RUnlock()
	last, err := lastChange(context.Background(), r.store, r.seq)
	if err != nil { // the store moved on (or is closed): the snapshot would be stale
		r.log.Info("snapshot not written", "path", r.snapPath, "seq", r.seq, "reason", err)
		return nil
	}
	tmp, err := os.CreateTemp(filepath.Dir(r.snapPath), filepath.Base(r.snapPath)+".tmp*")
	if err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, nothing is there
	w := newSnapWriter(tmp)
	w.str(snapMagic)
	w.uint(snapVersion)
	w.uint(r.derivationPrint())
	w.uint(r.seq)
	writeChange(w, last)
	w.str(r.emb.Model())
	r.writeView(w)
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

func writeChange(w *snapWriter, ch cards.Change) {
	w.str(ch.Key.Tenant)
	w.str(ch.Key.Server)
	w.str(ch.Key.Name)
	if ch.Deleted {
		w.uint(1)
	} else {
		w.uint(0)
	}
}

func readChange(rd *snapReader, seq uint64) cards.Change {
	ch := cards.Change{Seq: seq, Key: cards.Key{Tenant: rd.str(), Server: rd.str(), Name: rd.str()}, Deleted: rd.uint() == 1}
	if seq == 0 {
		ch.Key = cards.Key{}
	}
	return ch
}

// loadSnapshot builds the empty view from the snapshot when it is the
// store's current state; when it is not (why is logged), the view stays
// empty for Sync to build from the store. Only a failure to read the
// store's sequence, or of the indexes, is an error.
func (r *Retriever) loadSnapshot(ctx context.Context) error {
	mv, ok := r.snapshotable()
	if !ok {
		return nil
	}
	start := time.Now()
	err := r.readSnapshot(ctx, mv)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case errors.Is(err, errStoreSeq):
		return err
	case err != nil:
		r.log.Warn("snapshot not used; rebuilding the view from the store", "path", r.snapPath, "reason", err)
		// The view and the indexes may hold part of it: start them afresh.
		lex, lerr := NewLexicalIndexWithWeights(r.lexWeights)
		if lerr != nil {
			return lerr
		}
		r.lex = lex
		r.vec = memoryIndex{NewMemoryVectors(r.emb.Dim())}
		r.resetView()
		return nil
	}
	if err := r.finishView(ctx, mv); err != nil {
		return err
	}
	r.log.Info("snapshot loaded", "path", r.snapPath, "cards", r.Len(), "seq", r.Seq(), "took", time.Since(start).Round(time.Millisecond))
	return nil
}

// errStoreSeq is a failure to read the store's change sequence.
var errStoreSeq = errors.New("store sequence")

// readSnapshot fills the empty view and indexes from the snapshot, or
// fails. The view's entries are decoded and filed on another goroutine
// while the indexes are read.
func (r *Retriever) readSnapshot(ctx context.Context, mv *MemoryVectors) error {
	f, err := os.Open(r.snapPath)
	if err != nil {
		return err
	}
	placed := false // placeFloats has f: it keeps it or closes it
	defer func() {
		if !placed {
			f.Close()
		}
	}()
	rd, err := newSnapReader(f)
	if err != nil {
		return err
	}
	if rd.str() != snapMagic || rd.uint() != snapVersion {
		return fmt.Errorf("%w: not a snapshot of this version", errSnapCorrupt)
	}
	derived, seq := rd.uint(), rd.uint()
	last := readChange(rd, seq)
	model := rd.str()
	if rd.err != nil {
		return rd.err
	}
	if derived != r.derivationPrint() {
		return errors.New("snapshot of other derivations (written by another version of cardex)")
	}
	if model != r.emb.Model() {
		return fmt.Errorf("snapshot of the embedder %q, not %q", model, r.emb.Model())
	}
	now, err := r.store.Seq(ctx)
	if err != nil {
		return fmt.Errorf("%w: %w", errStoreSeq, err)
	}
	if seq != now {
		return fmt.Errorf("stale: snapshot at change %d, store at %d", seq, now)
	}
	if have, err := lastChange(ctx, r.store, now); err != nil {
		return fmt.Errorf("%w: %w", errStoreSeq, err)
	} else if have != last {
		return fmt.Errorf("stale: the store's change %d is not the one the snapshot saw", now)
	}
	v := readView(rd)
	if rd.err != nil {
		return rd.err
	}
	var filled error
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.mu.Lock()
		defer r.mu.Unlock()
		r.snapGone, filled = r.fillView(v.entries)
	}()
	err = r.lex.readSnapshot(rd)
	var regions []floatRegion
	if err == nil {
		regions, err = mv.readSnapshot(rd)
	}
	// Only a whole snapshot with its checksum right is used (the view and
	// the indexes are started afresh otherwise: loadSnapshot).
	if err == nil {
		err = rd.check()
	}
	<-done
	if err = errors.Join(err, filled); err != nil {
		return err
	}
	r.mu.Lock()
	r.snapServers, r.seq = v.servers, seq
	r.mu.Unlock()
	placed = true
	return mv.placeFloats(f, regions)
}

// finishView ends a snapshot's load: the indexes' docs get their entries'
// numbers, the docs of tenants the view does not hold (Residency) leave
// them, and the server entries are recorded.
func (r *Retriever) finishView(ctx context.Context, mv *MemoryVectors) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.entries {
		if e != nil {
			r.lex.setKey(e.id, e.no)
			mv.setKey(e.id, e.no)
		}
	}
	gone, sis := r.snapGone, r.snapServers
	r.snapGone, r.snapServers = nil, nil
	for _, id := range gone {
		r.vec.Delete(ctx, id)
	}
	if err := r.lex.Delete(gone); err != nil {
		return err
	}
	servers := map[cards.Key]*cards.ServerInfo{}
	for i := range sis {
		if si := &sis[i]; r.holds(si.Tenant) {
			servers[si.Key()] = si
		}
	}
	return r.setServers(servers)
}
