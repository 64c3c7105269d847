package retriever

import "github.com/seed0cff8200/cardex/cards"

// DocID is the identifier of a card inside the indexes: tenant, server and
// name joined by U+001F. Names cannot contain it, so the ID is unambiguous,
// and since it sorts below every character a name may hold, the byte order
// of IDs within one tenant is the (server, name) order used for
// deterministic tie-breaks ("ops" < "ops-eu" < "ops.eu").
func DocID(k cards.Key) string { return k.Tenant + idSep + k.Server + idSep + k.Name }

const idSep = "\x1f"

// Hit is one scored match from a leg of the search, best first.
type Hit struct {
	ID    string
	Score float64
	// Fields lists the card fields that matched (lexical leg only), sorted.
	Fields []string
	// Coverage is the fraction of the query's distinct analysed terms the
	// card matched (lexical leg only).
	Coverage float64
	// Evidence is Coverage with every term weighted by its inverse document
	// frequency in the candidate set (lexical leg only): matching the rare,
	// specific words of a query counts more than matching its common ones.
	Evidence float64

	// mask is Fields as positions of the lexical index's fields, for the
	// pipeline, which names the fields of its winners only.
	mask uint16
	// key is the card's integer key in the retriever's view (entry.no), set
	// by the in-memory legs; 0 when the leg does not know it (another
	// VectorIndex, an index the retriever does not own).
	key uint32
}

// Filter restricts a search to a candidate set: the tenant's indexed cards,
// further limited to IDs when IDs is non-nil. A non-nil empty IDs means no
// candidates, so the search returns nothing.
type Filter struct {
	Tenant string
	IDs    []string
	// Scopes, when non-nil, are the scopes of the caller whose candidate set
	// IDs lists: the tenant's active cards whose required scopes they all
	// cover (HoldsAll). A backend that can test that itself (pgvector, in
	// SQL) may select by them instead of sending IDs; the pipeline keeps
	// only hits of its candidate set either way.
	Scopes []string
	// Covered, with Scopes, are the required scopes of the candidate set's
	// cards (sorted): the tenant's active cards whose required scopes are
	// all among them are the candidates. A backend may select by it (an
	// array containment in SQL) after checking that Scopes cover each.
	Covered []string
	// TenantCards is the number of the tenant's cards in the view (set with
	// Scopes): what a backend's exact scan of the tenant would read.
	TenantCards int
}
