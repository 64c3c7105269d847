// Package pglog records discoveries and feedback signals in PostgreSQL
// (the discoveries and outcomes tables of migrations/), when cardex runs on
// the PostgreSQL store: every replica writes to the same tables, so the
// learning loop and `cardex eval --from-log` see the whole fleet.
//
// Writes are asynchronous: a bounded queue and one writer goroutine, so a
// slow or unreachable database never slows discovery down; when the queue
// is full, records are dropped and counted (the JSON Lines logs in the data
// directory still have them).
package pglog

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/seed0cff8200/cardex/internal/telemetry/discoverylog"
	"github.com/seed0cff8200/cardex/internal/telemetry/feedback"
)

// QueueSize bounds the records waiting to be written.
const QueueSize = 4096

// Writer is safe for concurrent use.
type Writer struct {
	pool    *pgxpool.Pool
	schema  string
	log     *slog.Logger
	queue   chan func(context.Context) error
	done    chan struct{}
	once    sync.Once
	Dropped atomic.Int64
	Failed  atomic.Int64
}

// New starts a writer on the tables of schema.
func New(pool *pgxpool.Pool, schema string, log *slog.Logger) *Writer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	w := &Writer{pool: pool, schema: pgx.Identifier{schema}.Sanitize(), log: log,
		queue: make(chan func(context.Context) error, QueueSize), done: make(chan struct{})}
	go w.run()
	return w
}

func (w *Writer) run() {
	defer close(w.done)
	for f := range w.queue {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		if err := f(ctx); err != nil {
			if w.Failed.Add(1)%100 == 1 {
				w.log.Warn("recording to PostgreSQL failed (the JSON Lines logs keep the record)", "err", err, "failures", w.Failed.Load())
			}
		}
		cancel()
	}
}

func (w *Writer) enqueue(f func(context.Context) error) {
	select {
	case w.queue <- f:
	default:
		if w.Dropped.Add(1)%100 == 1 {
			w.log.Warn("PostgreSQL record queue full; dropping records", "dropped", w.Dropped.Load())
		}
	}
}

// CloseWait bounds how long Close waits for queued records on shutdown.
const CloseWait = 5 * time.Second

// Close writes what is queued and stops, waiting at most CloseWait: a
// database that does not answer must not hold up a shutdown.
func (w *Writer) Close() {
	w.once.Do(func() { close(w.queue) })
	select {
	case <-w.done:
	case <-time.After(CloseWait):
		w.log.Warn("PostgreSQL records still queued at shutdown were not written", "queued", len(w.queue))
	}
}

// Discovery implements discoverylog.Sink: one discoveries row.
func (w *Writer) Discovery(e discoverylog.Entry) {
	returned, _ := json.Marshal(e.Returned)
	w.enqueue(func(ctx context.Context) error {
		_, err := w.pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.discoveries
			(id, at, tenant, subject_hash, session_id, query, query_hash, top_k, returned, candidate_count, latency_ms, low_confidence, degraded)
			VALUES ($1, $2, $3, $4, $5, NULLIF($6, ''), NULLIF($7, ''), $8, $9::jsonb, $10, $11, $12, $13)
			ON CONFLICT (id) DO NOTHING`, w.schema),
			e.ID, e.Time, e.Tenant, e.SubjectHash, e.SessionID, e.Query, e.QueryHash, e.TopK, string(returned),
			e.CandidateCount, e.LatencyMS, e.LowConfidence, e.Degraded)
		return err
	})
}

// Event implements feedback.Sink: outcomes and implicit misses become
// outcomes rows; a low-confidence discovery is already flagged on its row.
func (w *Writer) Event(e feedback.Event) {
	if e.Type == feedback.TypeLowConfidence || e.DiscoveryID == "" {
		return
	}
	var server, name *string
	if e.Tool != nil {
		server, name = &e.Tool.Server, &e.Tool.Name
	}
	w.enqueue(func(ctx context.Context) error {
		_, err := w.pool.Exec(ctx, fmt.Sprintf(`INSERT INTO %s.outcomes
			(discovery_id, at, tenant, used_server, used_name, none_fit, miss, source)
			SELECT $1, $2, $3, $4, $5, $6, $7, $8 WHERE EXISTS (SELECT 1 FROM %s.discoveries WHERE id = $1)`, w.schema, w.schema),
			e.DiscoveryID, e.Time, e.Tenant, server, name, e.NoneFit, e.Miss, e.Type)
		return err
	})
}
