package retriever

import (
	"cmp"
	"slices"
	"strings"

	"github.com/seed0cff8200/cardex/cards"
)

// Keys returns the keys of the caller's authorized, active cards that keep
// accepts, in (server, name) order: a lookup by something the index does not
// hold (a provider's name of a tool, which is a function of its key). It
// visits the whole candidate set, so callers keep it off the hot path.
func (r *Retriever) Keys(c Caller, keep func(cards.Key) bool) ([]cards.Key, error) {
	if err := validateCaller(c); err != nil {
		return nil, err
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out []cards.Key
	for _, e := range r.candidates(c).entries {
		if k := e.card.Key(); keep(k) {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b cards.Key) int {
		return cmp.Or(strings.Compare(a.Server, b.Server), strings.Compare(a.Name, b.Name))
	})
	return out, nil
}
