package retriever

import (
	"context"
	"fmt"
	"slices"

	"github.com/seed0cff8200/cardex/cards"
)

// Learned-phrasing bounds (the store's rule, cards.AddLearned): per card,
// the most recent MaxLearned distinct phrasings of at most MaxLearnedLen
// characters are kept.
const (
	MaxLearned    = cards.MaxLearned
	MaxLearnedLen = cards.MaxLearnedLen
)

// Learn adds phrasings to an active card: requests that needed the card,
// confirmed by outcomes. Both legs use them, as a tool is also described by
// the requests that needed it (the Tool2Vec idea). They are written to the
// store (Store.AddLearned: sanitised, cut to MaxLearnedLen, de-duplicated
// case-insensitively, the latest MaxLearned kept), which moves the card in
// the change sequence, so this view and every other replica's reload it
// with its phrasings; Learn then syncs this view. It reports whether
// anything changed; a key that is not an active card learns nothing.
// Learned phrasings rank; they are never shown to a model.
func (r *Retriever) Learn(ctx context.Context, k cards.Key, phrases ...string) (bool, error) {
	r.mu.RLock()
	active := r.byID[DocID(k)] != nil
	r.mu.RUnlock()
	if !active {
		return false, nil
	}
	changed, err := r.store.AddLearned(ctx, k, phrases...)
	if isNotFound(err) {
		return false, nil // deleted meanwhile
	}
	if err != nil || !changed {
		return false, err
	}
	if err := r.Sync(ctx); err != nil {
		return true, fmt.Errorf("learned, but this view is not current yet (the next sync applies it): %w", err)
	}
	return true, nil
}

// Learned returns a copy of every active card's learned phrasings, as the
// view holds them.
func (r *Retriever) Learned() map[cards.Key][]string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := map[cards.Key][]string{}
	for _, e := range r.byID {
		if len(e.learned) > 0 {
			out[e.card.Key()] = slices.Clone(e.learned)
		}
	}
	return out
}
