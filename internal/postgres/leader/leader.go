// Package leader elects one replica among several for a job that exactly
// one may do (the enrichment worker), with a PostgreSQL session-level
// advisory lock held on a dedicated connection: the lock is the session's,
// so it goes when the connection does (a crashed or partitioned replica
// frees it), and the holder checks its connection so it knows when it has
// lost it.
package leader

import (
	"context"
	"hash/fnv"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultCheck is how often the leader checks that its connection (and so
// its lock) is alive.
const DefaultCheck = 2 * time.Second

// Lock is one named advisory lock of a database.
type Lock struct {
	config *pgx.ConnConfig
	key    int64
	check  time.Duration
}

// New names a lock on the database of config (a copy is kept). Replicas
// that share the database and the name elect one leader; name should hold
// the store's schema, so that two catalogues in one database do not
// compete.
func New(config *pgx.ConnConfig, name string, check time.Duration) *Lock {
	h := fnv.New64a()
	h.Write([]byte("cardex leader: " + name))
	if check <= 0 {
		check = DefaultCheck
	}
	return &Lock{config: config.Copy(), key: int64(h.Sum64()), check: check}
}

// Key is the lock's key, as pg_locks shows it (classid and objid are its
// high and low halves).
func (l *Lock) Key() int64 { return l.key }

// TryLead takes the lock if it is free. It returns a context that ends
// when the lock is lost (the connection failed its check) or released,
// and the release, which closes the connection (and so frees the lock);
// ok is false when another session holds it.
func (l *Lock) TryLead(ctx context.Context) (context.Context, func(), bool, error) {
	conn, err := pgx.ConnectConfig(ctx, l.config)
	if err != nil {
		return nil, nil, false, err
	}
	var ok bool
	if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", l.key).Scan(&ok); err != nil || !ok {
		conn.Close(context.WithoutCancel(ctx))
		return nil, nil, false, err
	}
	lead, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(l.check)
		defer t.Stop()
		for {
			select {
			case <-lead.Done():
				return
			case <-t.C:
				pctx, pcancel := context.WithTimeout(lead, l.check)
				err := conn.Ping(pctx)
				pcancel()
				if err != nil {
					cancel() // the session, and the lock with it, may be gone
					return
				}
			}
		}
	}()
	release := func() {
		cancel()
		<-done
		cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer ccancel()
		conn.Close(cctx)
	}
	return lead, release, true, nil
}
