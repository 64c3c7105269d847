package enrich

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"

	"github.com/seed0cff8200/cardex/cards"
)

// Completer is a chat model: *Chat, or anything that answers the same way.
type Completer interface {
	Complete(ctx context.Context, msgs []Message) (Answer, error)
	Model() string
}

// Enricher writes search examples for one card at a time: it renders the
// prompt, takes the answer from the cache or the model, and validates it.
// It writes nothing; see Run and the service's worker for that. It is safe
// for concurrent use.
type Enricher struct {
	chat    Completer
	cache   *Cache // nil: no cache
	phrases int
	log     *slog.Logger

	calls, hits atomic.Int64
}

// NewEnricher asks chat for phrases phrases per card (0 means
// DefaultPhrases; at most MaxPhrases), keeping answers in cache (nil for
// none).
func NewEnricher(chat Completer, cache *Cache, phrases int, log *slog.Logger) (*Enricher, error) {
	if phrases < 0 || phrases > MaxPhrases {
		return nil, errors.New("enrich: phrases per card must be within 1..32")
	}
	if phrases == 0 {
		phrases = DefaultPhrases
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Enricher{chat: chat, cache: cache, phrases: phrases, log: log}, nil
}

// Model is the model's name, as recorded in the examples' source.
func (e *Enricher) Model() string { return e.chat.Model() }

// Calls is how many answers came from the model; CacheHits how many from
// the cache.
func (e *Enricher) Calls() int64     { return e.calls.Load() }
func (e *Enricher) CacheHits() int64 { return e.hits.Load() }

// Result is what the model wrote for one card.
type Result struct {
	Phrases  []string   `json:"phrases"`
	Rejected []Rejected `json:"rejected,omitempty"`
	Cached   bool       `json:"cached,omitempty"`
}

// Source is the provenance of examples this enricher writes for c.
func (e *Enricher) Source(c *cards.Card) *cards.ExamplesSource {
	return &cards.ExamplesSource{Author: cards.AuthorModel, Model: e.Model(), PromptVersion: PromptVersion, CardHash: c.ExamplesBasisHash()}
}

// Current reports whether c's examples are ones this enricher would write
// now: a model's, by this model and prompt version, from the card's
// present text.
func (e *Enricher) Current(c *cards.Card) bool {
	s := c.ExamplesSource
	return len(c.SearchExamples) > 0 && s != nil && s.Author == cards.AuthorModel &&
		s.Model == e.Model() && s.PromptVersion == PromptVersion && !c.ExamplesStale()
}

// Enrich asks for c's phrases (server is c's server entry, or nil). An
// answer with no acceptable phrase is an error (ErrNoPhrases) and is not
// cached, so a rerun asks again.
func (e *Enricher) Enrich(ctx context.Context, c *cards.Card, server *cards.ServerInfo) (Result, error) {
	return e.enrich(ctx, c, server, false)
}

// enrich is Enrich; fresh skips the cache's answer (and replaces it).
func (e *Enricher) enrich(ctx context.Context, c *cards.Card, server *cards.ServerInfo, fresh bool) (Result, error) {
	msgs := Messages(c, server, e.phrases)
	key := CacheKey(e.Model(), msgs)
	var a Answer
	cached := false
	if e.cache != nil && !fresh {
		a, cached = e.cache.Get(key, e.Model())
	}
	if cached {
		e.hits.Add(1)
	} else {
		var err error
		if a, err = e.chat.Complete(ctx, msgs); err != nil {
			return Result{}, err
		}
		e.calls.Add(1)
	}
	phrases, rejected, err := ParsePhrases(a.Content, e.phrases)
	if err != nil {
		return Result{Rejected: rejected}, err
	}
	if len(rejected) > 0 {
		e.log.Debug("enrichment: phrases refused", "card", c.Key().String(), "refused", len(rejected), "first", rejected[0].Reason)
	}
	if e.cache != nil && !cached {
		if err := e.cache.Put(key, e.Model(), a); err != nil {
			e.log.Warn("enrichment cache not writable; going on without it", "err", err)
		}
	}
	return Result{Phrases: phrases, Rejected: rejected, Cached: cached}, nil
}
