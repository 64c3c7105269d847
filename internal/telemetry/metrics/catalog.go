package metrics

import (
	"context"
	"log/slog"
	"time"

	"github.com/seed0cff8200/cardex/cards"
)

// View is a replica's view of the catalogue (the retriever).
type View interface {
	Len() int
	Seq() uint64
	Changed() <-chan struct{}
}

// Store is what the catalogue gauges read from the store.
type Store interface {
	Seq(ctx context.Context) (uint64, error)
	Changes(ctx context.Context, since uint64, limit int) ([]cards.Change, error)
}

// Catalogue gauge timing: a burst of changes updates the gauges at most
// every catalogGap, and a store read gives up after storeTimeout.
const (
	catalogGap   = 200 * time.Millisecond
	storeTimeout = 2 * time.Second
)

// FollowCatalog keeps the catalogue gauges current until ctx ends: active
// cards and the view's sequence at every change of the view, the store's
// sequence (and so the replica lag) at those times and every poll (a
// replica that falls behind does not change), and the server entries from
// the store's change sequence, read from the start once and then as it
// grows. It returns when ctx ends.
func (m *Metrics) FollowCatalog(ctx context.Context, view View, store Store, poll time.Duration, log *slog.Logger) {
	if m == nil {
		return
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if poll <= 0 {
		poll = 5 * time.Second
	}
	f := &catalogFollower{m: m, view: view, store: store, log: log, servers: map[cards.Key]bool{}}
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		changed := view.Changed()
		f.update(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-changed:
			select {
			case <-ctx.Done():
				return
			case <-time.After(catalogGap):
			}
		}
	}
}

type catalogFollower struct {
	m       *Metrics
	view    View
	store   Store
	log     *slog.Logger
	servers map[cards.Key]bool // server entries seen in the change sequence
	since   uint64             // the last change read
	failing bool
}

func (f *catalogFollower) update(ctx context.Context) {
	m := f.m
	viewSeq := f.view.Seq()
	m.cards.Set(float64(f.view.Len()))
	m.viewSeq.Set(float64(viewSeq))
	m.syncs.Inc()

	sctx, cancel := context.WithTimeout(ctx, storeTimeout)
	defer cancel()
	storeSeq, err := f.store.Seq(sctx)
	if err == nil {
		err = f.readServers(sctx)
	}
	if err != nil {
		if ctx.Err() == nil {
			m.storeSeqErrors.Inc()
			if !f.failing {
				f.log.Debug("catalogue metrics: reading the store failed; the gauges keep their last values", "err", err)
			}
			f.failing = true
		}
		return
	}
	f.failing = false
	m.storeSeq.Set(float64(storeSeq))
	lag := 0.0
	if storeSeq > viewSeq {
		lag = float64(storeSeq - viewSeq)
	}
	m.lag.Set(lag)
	m.servers.Set(float64(len(f.servers)))
}

// readServers follows the change sequence to its end, keeping the set of
// server entries.
func (f *catalogFollower) readServers(ctx context.Context) error {
	for {
		chs, err := f.store.Changes(ctx, f.since, 1000)
		if err != nil {
			return err
		}
		if len(chs) == 0 {
			return nil
		}
		for _, ch := range chs {
			if ch.Key.IsServer() {
				if ch.Deleted {
					delete(f.servers, ch.Key)
				} else {
					f.servers[ch.Key] = true
				}
			}
			f.since = ch.Seq
		}
	}
}
