package enrich

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/seed0cff8200/cardex/cards"
)

// Leader decides which of several replicas enriches: exactly one may.
type Leader interface {
	// TryLead returns, when this process may lead now, a context that
	// ends when it no longer does (the lock was lost, or release was
	// called), and a release; ok is false when another process leads.
	TryLead(ctx context.Context) (lead context.Context, release func(), ok bool, err error)
}

// Solo is the Leader of a store only one process opens (the embedded
// store): it always leads.
type Solo struct{}

// TryLead always leads.
func (Solo) TryLead(ctx context.Context) (context.Context, func(), bool, error) {
	lead, cancel := context.WithCancel(ctx)
	return lead, cancel, true, nil
}

// Defaults of WorkerConfig.
const (
	DefaultWorkerRate  = 30 // cards a minute
	DefaultWorkerPoll  = 5 * time.Second
	DefaultRetryFailed = 10 * time.Minute
)

// WorkerConfig configures the service's enrichment worker.
type WorkerConfig struct {
	Store    cards.Store
	Enricher *Enricher
	// Leader elects the one replica that works (default Solo).
	Leader Leader
	// PerMinute bounds the cards enriched a minute (default 30).
	PerMinute int
	// Poll is how often the change sequence is read when there is nothing
	// to do, and how often a follower tries to lead (default 5s).
	Poll time.Duration
	// RetryFailed is how long a card whose enrichment failed waits before
	// it is tried again (unless it changes first; default 10m).
	RetryFailed time.Duration
	Logger      *slog.Logger
}

// Status is what the worker reports (the console and /metrics show it).
type Status struct {
	Model         string    `json:"model"`
	PromptVersion string    `json:"prompt_version"`
	Leader        bool      `json:"leader"`
	Backlog       int       `json:"backlog"` // cards waiting to be looked at
	Written       int64     `json:"written"`
	Unchanged     int64     `json:"unchanged"`
	KeptPerson    int64     `json:"kept_person"`
	Failed        int64     `json:"failed"`
	Calls         int64     `json:"model_calls"`
	CacheHits     int64     `json:"cache_hits"`
	LastWritten   time.Time `json:"last_written,omitzero"`
	LastError     string    `json:"last_error,omitempty"`
	LastErrorAt   time.Time `json:"last_error_at,omitzero"`
}

// Worker enriches new and changed cards in the background: it follows the
// store's change sequence and gives each card that lacks current examples
// (and has no person's) to the Enricher, one at a time, at a bounded rate,
// writing with the card's version like `cardex enrich`. With several
// replicas, only the Leader works; the others see its writes as any card
// change.
type Worker struct {
	cfg     WorkerConfig
	cat     StoreCatalog
	log     *slog.Logger
	limiter *rate.Limiter
	one     sync.Mutex // one card at a time, the console's too

	mu     sync.Mutex
	status Status
}

// NewWorker checks the configuration.
func NewWorker(cfg WorkerConfig) (*Worker, error) {
	if cfg.Store == nil || cfg.Enricher == nil {
		return nil, errors.New("enrichment worker: Store and Enricher are required")
	}
	if cfg.Leader == nil {
		cfg.Leader = Solo{}
	}
	if cfg.PerMinute <= 0 {
		cfg.PerMinute = DefaultWorkerRate
	}
	if cfg.Poll <= 0 {
		cfg.Poll = DefaultWorkerPoll
	}
	if cfg.RetryFailed <= 0 {
		cfg.RetryFailed = DefaultRetryFailed
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	w := &Worker{cfg: cfg, cat: NewStoreCatalog(cfg.Store), log: cfg.Logger,
		limiter: rate.NewLimiter(rate.Limit(float64(cfg.PerMinute)/60), 1)}
	w.status.Model, w.status.PromptVersion = cfg.Enricher.Model(), PromptVersion
	return w, nil
}

// Status returns the worker's status now.
func (w *Worker) Status() Status {
	w.mu.Lock()
	defer w.mu.Unlock()
	s := w.status
	s.Calls, s.CacheHits = w.cfg.Enricher.Calls(), w.cfg.Enricher.CacheHits()
	return s
}

func (w *Worker) update(f func(*Status)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	f(&w.status)
}

// Run works until ctx ends: it tries to lead every Poll, and while it
// leads, follows the change sequence from the start (so every card is
// looked at once per leadership) and enriches what needs it.
func (w *Worker) Run(ctx context.Context) {
	for ctx.Err() == nil {
		lead, release, ok, err := w.cfg.Leader.TryLead(ctx)
		if err != nil {
			w.fail("leadership", err)
		}
		if ok {
			w.update(func(s *Status) { s.Leader = true })
			w.log.Info("enrichment worker leads", "model", w.cfg.Enricher.Model())
			w.follow(lead)
			release()
			w.update(func(s *Status) { s.Leader, s.Backlog = false, 0 })
			if ctx.Err() == nil {
				w.log.Warn("enrichment worker lost its leadership; trying again")
			}
		}
		sleep(ctx, w.cfg.Poll)
	}
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func (w *Worker) fail(what string, err error) {
	w.log.Warn("enrichment worker: "+what+" failed", "err", err)
	w.update(func(s *Status) { s.LastError, s.LastErrorAt = cards.Cut(what+": "+err.Error(), 300), time.Now().UTC() })
}

// follow reads the change sequence and enriches changed cards until lead
// ends.
func (w *Worker) follow(lead context.Context) {
	var since uint64
	var pending []cards.Key
	queued := map[cards.Key]bool{}
	failed := map[cards.Key]time.Time{} // when to try again
	const page = 1000
	for lead.Err() == nil {
		chs, err := w.cfg.Store.Changes(lead, since, page)
		if err != nil {
			if lead.Err() == nil {
				w.fail("reading the change sequence", err)
				sleep(lead, w.cfg.Poll)
			}
			continue
		}
		for _, ch := range chs {
			since = ch.Seq
			if ch.Deleted || ch.Key.IsServer() || queued[ch.Key] {
				continue
			}
			delete(failed, ch.Key) // changed: worth another try at once
			queued[ch.Key] = true
			pending = append(pending, ch.Key)
		}
		if len(chs) == page {
			continue // read the rest first
		}
		now := time.Now()
		for k, at := range failed {
			if now.After(at) && !queued[k] {
				delete(failed, k)
				queued[k] = true
				pending = append(pending, k)
			}
		}
		w.update(func(s *Status) { s.Backlog = len(pending) })
		if len(pending) == 0 {
			sleep(lead, w.cfg.Poll)
			continue
		}
		servers := &serverCache{cat: w.cat, m: map[string]*cards.ServerInfo{}}
		for len(pending) > 0 && lead.Err() == nil {
			k := pending[0]
			pending = pending[1:]
			delete(queued, k)
			if it, done := w.tryCard(lead, servers, k); done && it.Outcome == Failed {
				failed[k] = time.Now().Add(w.cfg.RetryFailed)
			}
			w.update(func(s *Status) { s.Backlog = len(pending) })
		}
	}
}

// tryCard enriches the card at k if it needs it; done says whether it
// was tried.
func (w *Worker) tryCard(ctx context.Context, servers *serverCache, k cards.Key) (Item, bool) {
	c, err := w.cat.Get(ctx, k)
	if err != nil {
		if !errors.Is(err, cards.ErrNotFound) && ctx.Err() == nil {
			w.fail("reading "+k.String(), err)
		}
		return Item{}, false
	}
	if w.cfg.Enricher.reason(&c, SelectDefault) != "" {
		return Item{}, false
	}
	if err := w.limiter.Wait(ctx); err != nil {
		return Item{}, false
	}
	return w.enrich(ctx, servers, c, false), true
}

// enrich runs one card through the Enricher and records the outcome.
func (w *Worker) enrich(ctx context.Context, servers *serverCache, c cards.Card, fresh bool) Item {
	w.one.Lock()
	defer w.one.Unlock()
	it := enrichOne(ctx, w.cat, w.cfg.Enricher, servers, c, Options{Select: SelectDefault, Fresh: fresh})
	if ctx.Err() != nil && it.Outcome == Failed {
		return it
	}
	w.update(func(s *Status) {
		switch it.Outcome {
		case Written:
			s.Written++
			s.LastWritten = time.Now().UTC()
		case Unchanged:
			s.Unchanged++
		case KeptPerson:
			s.KeptPerson++
		case Failed:
			s.Failed++
		}
	})
	if it.Outcome == Failed {
		w.fail("enriching "+it.Key.String(), errors.New(it.Error))
	} else {
		w.log.Debug("enriched", "card", it.Key.String(), "outcome", it.Outcome, "cached", it.Cached)
	}
	return it
}

// EnrichNow enriches one card at once (the console's button) with a fresh
// answer of the model, whatever its examples' state, except that a
// person's examples are never replaced (ErrPersonExamples). It waits for
// the card in progress, if any, but not for the rate limit.
func (w *Worker) EnrichNow(ctx context.Context, k cards.Key) (Item, error) {
	c, err := w.cat.Get(ctx, k)
	if err != nil {
		return Item{}, err
	}
	switch w.cfg.Enricher.reason(&c, SelectAll) {
	case "person":
		return Item{}, ErrPersonExamples
	case "revoked":
		return Item{}, cards.Invalid("status", "the card is revoked: it is not enriched")
	}
	servers := &serverCache{cat: w.cat, m: map[string]*cards.ServerInfo{}}
	it := w.enrich(ctx, servers, c, true)
	if it.Outcome == Failed {
		return it, fmt.Errorf("enrich %s: %s", k, it.Error)
	}
	return it, nil
}

// ErrPersonExamples: the card's examples are a person's, which a model
// never replaces.
var ErrPersonExamples = fmt.Errorf("%w: the card's search examples were written by a person; a model never replaces them (remove them first)", cards.ErrInvalid)
