package enrich

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"

	"github.com/seed0cff8200/cardex/cards"
)

// Catalog is where a run reads cards and writes their examples: the gRPC
// CatalogService for the CLI, the store itself in the service.
type Catalog interface {
	// List returns the tenant's cards (of one server when server is not
	// ""), schemas included, in any status.
	List(ctx context.Context, tenant, server string) ([]cards.Card, error)
	// Get returns one card as stored.
	Get(ctx context.Context, key cards.Key) (cards.Card, error)
	// Put writes one card whose Version is the expected stored version;
	// an error wrapping cards.ErrConflict says the card moved meanwhile.
	Put(ctx context.Context, c cards.Card) (cards.PutResult, error)
	// Server returns a server entry, or nil when there is none.
	Server(ctx context.Context, tenant, name string) (*cards.ServerInfo, error)
}

// Select says which cards a run enriches. Cards whose examples a person
// wrote are never selected, nor revoked cards, nor cards whose examples
// are current (this model, this prompt version, the card's present text):
// that is what makes an interrupted run resume where it stopped.
type Select uint8

const (
	// SelectMissing: cards without examples.
	SelectMissing Select = 1 << iota
	// SelectStale: cards with a model's examples written from other text.
	SelectStale
	// SelectAll: every card but those above, including cards with a
	// model's examples by another model or prompt version.
	SelectAll

	// SelectDefault is missing and stale.
	SelectDefault = SelectMissing | SelectStale
)

// Outcomes of one card.
const (
	Written    = "written"     // the examples were written
	Unchanged  = "unchanged"   // the store already held exactly these
	DryRun     = "dry_run"     // nothing written (--dry-run)
	KeptPerson = "kept_person" // a person's examples appeared meanwhile; the store kept them
	Failed     = "failed"      // the model's answer could not be had or used; nothing written
)

// Item is the outcome of one card.
type Item struct {
	Key      cards.Key             `json:"card"`
	Outcome  string                `json:"outcome"`
	Version  int64                 `json:"version,omitempty"`
	Phrases  []string              `json:"search_examples,omitempty"`
	Source   *cards.ExamplesSource `json:"search_examples_source,omitempty"`
	Rejected []Rejected            `json:"rejected,omitempty"`
	Cached   bool                  `json:"cached,omitempty"`
	Error    string                `json:"error,omitempty"`
}

// Report is the outcome of a run.
type Report struct {
	Items []Item `json:"items"`
	// Skipped counts the cards left alone, by reason: "person" (a
	// person's examples), "current", "revoked", "not selected".
	Skipped map[string]int `json:"skipped"`
	// Calls is how many answers came from the model, CacheHits from the
	// cache.
	Calls     int64 `json:"model_calls"`
	CacheHits int64 `json:"cache_hits"`
}

// Count is how many items have the outcome.
func (r *Report) Count(outcome string) int {
	n := 0
	for _, it := range r.Items {
		if it.Outcome == outcome {
			n++
		}
	}
	return n
}

// Options of a run.
type Options struct {
	Tenant string
	Server string // "" for every server of the tenant
	// Names, when not empty, limits the run to these cards of Server
	// (every one must exist).
	Names  []string
	Select Select
	// Concurrency is how many cards are in flight at once (default 4).
	Concurrency int
	// DryRun asks the model (or the cache) but writes nothing.
	DryRun bool
	// Fresh asks the model even when the cache holds an answer (which the
	// new answer replaces).
	Fresh bool
	// Progress, when set, is called with the cards done and the total,
	// once before the first and after each card.
	Progress func(done, total int)
	Logger   *slog.Logger
}

// maxConflicts is how many times one card is re-read after a version
// conflict before it is given up.
const maxConflicts = 3

// reason says why a card is not selected ("" when it is).
func (e *Enricher) reason(c *cards.Card, sel Select) string {
	switch {
	case c.Status == cards.StatusRevoked:
		return "revoked"
	case c.ExamplesSource != nil && c.ExamplesSource.Author == cards.AuthorPerson && len(c.SearchExamples) > 0:
		return "person"
	case e.Current(c):
		return "current"
	case len(c.SearchExamples) == 0:
		if sel&(SelectMissing|SelectAll) != 0 {
			return ""
		}
	case c.ExamplesStale():
		if sel&(SelectStale|SelectAll) != 0 {
			return ""
		}
	case sel&SelectAll != 0:
		return ""
	}
	return "not selected"
}

// Run enriches the selected cards of a tenant: each is read, its prompt
// answered (from the cache or the model), the answer validated, and the
// examples written with the card's version, so that a concurrent change
// is never overwritten (the card is re-read and redone, or given up after
// maxConflicts). A card that fails does not stop the others. When ctx ends,
// Run stops taking cards and returns what was done with ctx's error; the
// next run resumes, since done cards are current and answered ones cached.
func Run(ctx context.Context, cat Catalog, e *Enricher, opt Options) (Report, error) {
	log := opt.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opt.Select == 0 {
		opt.Select = SelectDefault
	}
	workers := opt.Concurrency
	if workers <= 0 {
		workers = 4
	}
	all, err := cat.List(ctx, opt.Tenant, opt.Server)
	if err != nil {
		return Report{}, fmt.Errorf("read the cards: %w", err)
	}
	for _, n := range opt.Names {
		if !slices.ContainsFunc(all, func(c cards.Card) bool { return c.Name == n }) {
			return Report{}, fmt.Errorf("%w: no card %s/%s/%s", cards.ErrNotFound, opt.Tenant, opt.Server, n)
		}
	}
	rep := Report{Skipped: map[string]int{}}
	var todo []cards.Card
	for _, c := range all {
		if len(opt.Names) > 0 && !slices.Contains(opt.Names, c.Name) {
			continue
		}
		if why := e.reason(&c, opt.Select); why != "" {
			rep.Skipped[why]++
			continue
		}
		todo = append(todo, c)
	}
	progress := opt.Progress
	if progress == nil {
		progress = func(int, int) {}
	}
	progress(0, len(todo))
	calls0, hits0 := e.Calls(), e.CacheHits()

	servers := &serverCache{cat: cat, m: map[string]*cards.ServerInfo{}}
	jobs := make(chan cards.Card)
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range min(workers, max(len(todo), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c := range jobs {
				it := enrichOne(ctx, cat, e, servers, c, opt)
				if it.Outcome == Failed && ctx.Err() != nil {
					continue // interrupted, not failed: the next run does it
				}
				if it.Outcome == Failed {
					log.Warn("enrichment failed", "card", it.Key.String(), "err", it.Error)
				}
				mu.Lock()
				rep.Items = append(rep.Items, it)
				progress(len(rep.Items), len(todo))
				mu.Unlock()
			}
		}()
	}
feed:
	for _, c := range todo {
		select {
		case jobs <- c:
		case <-ctx.Done():
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	slices.SortFunc(rep.Items, func(a, b Item) int { return strings.Compare(a.Key.String(), b.Key.String()) })
	rep.Calls, rep.CacheHits = e.Calls()-calls0, e.CacheHits()-hits0
	return rep, ctx.Err()
}

// enrichOne enriches one card and writes its examples (unless DryRun).
func enrichOne(ctx context.Context, cat Catalog, e *Enricher, servers *serverCache, c cards.Card, opt Options) Item {
	it := Item{Key: c.Key()}
	fail := func(err error) Item {
		it.Outcome, it.Error = Failed, err.Error()
		return it
	}
	for attempt := 0; ; attempt++ {
		server, err := servers.get(ctx, c.Tenant, c.Server)
		if err != nil {
			return fail(fmt.Errorf("read server entry %s: %w", c.Server, err))
		}
		res, err := e.enrich(ctx, &c, server, opt.Fresh)
		it.Rejected, it.Cached = res.Rejected, res.Cached
		if err != nil {
			return fail(err)
		}
		it.Phrases, it.Source, it.Version = res.Phrases, e.Source(&c), c.Version
		if opt.DryRun {
			it.Outcome = DryRun
			return it
		}
		w := c.Clone()
		w.SearchExamples, w.ExamplesSource = res.Phrases, e.Source(&c)
		pr, err := cat.Put(ctx, w)
		switch {
		case err == nil:
			it.Version = pr.Version
			switch {
			case pr.ExamplesKept:
				it.Outcome, it.Phrases, it.Source = KeptPerson, nil, nil
			case pr.Outcome == cards.Unchanged:
				it.Outcome = Unchanged
			default:
				it.Outcome = Written
			}
			return it
		case !errors.Is(err, cards.ErrConflict):
			return fail(fmt.Errorf("write: %w", err))
		case attempt+1 >= maxConflicts:
			return fail(fmt.Errorf("the card changed %d times while it was being enriched; run again", maxConflicts))
		}
		// The card moved: take it as it is now, and redo it if it still
		// needs it (the new text gets its own phrases).
		cur, err := cat.Get(ctx, c.Key())
		if err != nil {
			return fail(fmt.Errorf("re-read after a version conflict: %w", err))
		}
		switch why := e.reason(&cur, opt.Select|SelectStale|SelectMissing); why {
		case "":
		case "person":
			it.Outcome, it.Phrases, it.Source, it.Version = KeptPerson, nil, nil, cur.Version
			return it
		case "current":
			it.Outcome, it.Version = Unchanged, cur.Version
			it.Phrases, it.Source = cur.SearchExamples, cur.ExamplesSource
			return it
		default:
			return fail(fmt.Errorf("the card changed while it was being enriched and is now %s", why))
		}
		c = cur
	}
}

// serverCache reads each server entry once per run.
type serverCache struct {
	cat Catalog
	mu  sync.Mutex
	m   map[string]*cards.ServerInfo
}

func (s *serverCache) get(ctx context.Context, tenant, name string) (*cards.ServerInfo, error) {
	s.mu.Lock()
	si, ok := s.m[name]
	s.mu.Unlock()
	if ok {
		return si, nil
	}
	si, err := s.cat.Server(ctx, tenant, name)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.m[name] = si
	s.mu.Unlock()
	return si, nil
}
