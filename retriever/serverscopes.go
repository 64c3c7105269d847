package retriever

import (
	"slices"

	"github.com/seed0cff8200/cardex/cards"
)

// ServerScopes lists the required scopes of every active card of one kind
// on one server of a tenant, whatever any caller may see. It is for the
// execution gateway's authorization of a tool that reaches all of them (a
// database's query card can read every view of the database), never for an
// answer.
func (r *Retriever) ServerScopes(tenant, server string, kind cards.Kind) [][]string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var out [][]string
	for _, e := range r.byTenant[tenant] {
		if e.card.Server == server && e.card.Kind == kind {
			out = append(out, slices.Clone(e.card.RequiredScopes))
		}
	}
	return out
}
