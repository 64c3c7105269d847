// Package replica keeps a cardex replica's in-process view (the retriever's
// bleve index and card map) current with a PostgreSQL store that other
// replicas write to: a LISTEN on the store's change channel triggers a sync
// at once, and a periodic check of the change sequence heals whatever a
// notification missed (a dropped listener connection, or a server such as
// PGlite that does not carry notifications across connections).
package replica

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/seed0cff8200/cardex/cards/postgres"
)

// Channel is the NOTIFY channel the store's change trigger signals.
const Channel = "cardex_changes"

// View is what the follower keeps current: *retriever.Retriever.
type View interface {
	Sync(ctx context.Context) error
	Seq() uint64
}

// Follower runs the listener and the sequence check.
type Follower struct {
	Store *postgres.Store
	View  View
	// Poll is how often the change sequence is compared with the view's
	// (default 500ms; it bounds how stale a replica can be when a
	// notification is lost).
	Poll time.Duration
	// NoListen turns the LISTEN/NOTIFY listener off (the sequence check
	// alone keeps the view current).
	NoListen bool
	Log      *slog.Logger
}

// DefaultPoll is Follower.Poll's default.
const DefaultPoll = 500 * time.Millisecond

// Run follows the store until ctx ends.
func (f *Follower) Run(ctx context.Context) {
	log := f.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	poll := f.Poll
	if poll <= 0 {
		poll = DefaultPoll
	}
	kick := make(chan struct{}, 1)
	signal := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	if !f.NoListen {
		go f.listen(ctx, signal, log)
	}
	t := time.NewTicker(poll)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			seq, err := f.Store.Seq(ctx)
			if err != nil {
				if ctx.Err() == nil && !failing {
					log.Warn("change sequence check failed; the view may be stale until the database answers", "err", err)
					failing = true
				}
				continue
			}
			if seq == f.View.Seq() {
				if failing {
					log.Info("database reachable again; the view is current", "seq", seq)
					failing = false
				}
				continue
			}
		case <-kick:
		}
		if err := f.View.Sync(ctx); err != nil {
			if ctx.Err() == nil && !failing {
				log.Warn("sync failed; retrying at the next check", "err", err)
				failing = true
			}
			continue
		}
		if failing {
			log.Info("sync succeeded again", "seq", f.View.Seq())
			failing = false
		}
	}
}

// listen holds a dedicated connection with LISTEN cardex_changes and
// signals on every notification; it reconnects after a failure, and
// signals after reconnecting too (changes may have come meanwhile).
func (f *Follower) listen(ctx context.Context, signal func(), log *slog.Logger) {
	backoff := 200 * time.Millisecond
	for ctx.Err() == nil {
		err := f.listenOnce(ctx, signal)
		if ctx.Err() != nil {
			return
		}
		log.Debug("change listener disconnected; reconnecting", "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 5*time.Second)
	}
}

func (f *Follower) listenOnce(ctx context.Context, signal func()) error {
	conn, err := pgx.ConnectConfig(ctx, f.Store.Pool().Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "LISTEN "+Channel); err != nil {
		return err
	}
	signal() // changes may have come while no one listened
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if n.Payload == f.Store.Schema() {
			signal()
		}
	}
}
