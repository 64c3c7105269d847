package retriever

import (
	"context"
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

// InactiveCards lists the pending and revoked cards of one kind on one
// server of a tenant, from the store. Like ServerScopes it is for the
// execution gateway's authorization of a tool that reaches every card of the
// server (a revoked view is still a view the database may let a query
// read), never for an answer.
func (r *Retriever) InactiveCards(ctx context.Context, tenant, server string, kind cards.Kind) ([]cards.Card, error) {
	var out []cards.Card
	q := cards.ListQuery{Tenant: tenant, Server: server, Status: []cards.Status{cards.StatusPending, cards.StatusRevoked}, Limit: cards.MaxPageSize}
	for {
		page, err := r.store.List(ctx, q)
		if err != nil {
			return nil, err
		}
		for _, c := range page.Cards {
			if c.Kind == kind {
				out = append(out, c)
			}
		}
		if page.NextCursor == "" {
			return out, nil
		}
		q.Cursor = page.NextCursor
	}
}
