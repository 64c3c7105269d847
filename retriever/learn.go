package retriever

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/seed0cff8200/cardex/cards"
)

// Learned-phrasing bounds: per card, the most recent MaxLearned distinct
// phrasings of at most MaxLearnedLen characters are kept.
const (
	MaxLearned    = 32
	MaxLearnedLen = 200
)

// Learn adds phrasings to an active card: requests that needed the card,
// confirmed by outcomes. Both legs use them, as a tool is also described by
// the requests that needed it (the Tool2Vec idea). Phrasings are sanitised,
// cut to MaxLearnedLen, de-duplicated case-insensitively and bounded to the
// latest MaxLearned. It reports whether anything changed; a key that is not
// an active card learns nothing. Learned phrasings rank; they are never
// shown to a model.
func (r *Retriever) Learn(ctx context.Context, k cards.Key, phrases ...string) (bool, error) {
	r.syncMu.Lock()
	defer r.syncMu.Unlock()
	id := DocID(k)
	r.mu.RLock()
	old := r.byID[id]
	r.mu.RUnlock()
	if old == nil {
		return false, nil
	}
	learned := slices.Clone(old.learned)
	changed := false
	for _, p := range phrases {
		p = cards.Sanitize(p)
		if utf8.RuneCountInString(p) > MaxLearnedLen {
			p = strings.TrimSpace(string([]rune(p)[:MaxLearnedLen]))
		}
		if p == "" || slices.ContainsFunc(learned, func(q string) bool { return strings.EqualFold(p, q) }) {
			continue
		}
		learned = append(learned, p)
		changed = true
	}
	if !changed {
		return false, nil
	}
	if len(learned) > MaxLearned {
		learned = learned[len(learned)-MaxLearned:]
	}
	e := &entry{id: id, card: old.card, tokens: old.tokens, learned: learned}
	vecs, err := r.embeddings(ctx, []*entry{e})
	if err != nil {
		return false, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := r.lex.Upsert([]LexicalDoc{lexicalDoc(e)}); err != nil {
		return false, fmt.Errorf("learn: %w", err)
	}
	if err := r.vec.Upsert(ctx, id, e.card.Tenant, vecs[0]); err != nil {
		return false, fmt.Errorf("learn: %w", err)
	}
	r.drop(id)
	r.add(e)
	return true, nil
}

// Learned returns a copy of every active card's learned phrasings.
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
