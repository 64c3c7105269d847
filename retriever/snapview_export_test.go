package retriever

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/seed0cff8200/cardex/cards"
)

// ViewState describes everything the view holds for its entries and
// server entries, as text: two views built from the same store state
// describe themselves alike. Co-usage tables are described as stored (the
// view's copy is decayed to when it was read, which differs between two
// views read at different times), with the tools the decayed one keeps.
func ViewState(r *Retriever) string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	var b strings.Builder
	fmt.Fprintf(&b, "seq %d, %d entries, %d dup groups, %d server slots\n", r.seq, len(r.byID), len(r.dupGroups), len(r.slots))
	ids := make([]string, 0, len(r.byID))
	for id := range r.byID {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		e := r.byID[id]
		card, _ := json.Marshal(e.card)
		var stored cards.Companions
		var kept []string
		if e.co != nil {
			stored = e.co.stored
			for _, c := range e.co.view.Tools {
				kept = append(kept, c.Server+"/"+c.Name)
			}
		}
		co, _ := json.Marshal(stored)
		group := 0
		if e.group != nil {
			group = e.group.n
		}
		fmt.Fprintf(&b, "%q: %s examples %q learned %q co-use %s (%x) keeps %v tokens %d dup %q group %d words %x destructive %t deprecated %t server slot %d\n",
			id, card, e.examples, e.learned, co, math.Float64bits(stored.Uses), kept, e.tokens, e.dup, group, e.words, e.destructive, e.deprecated, e.server.n)
		if r.entries[e.no] != e || r.byTenant[e.card.Tenant][id] != e || !slices.Contains(r.byName[e.card.Tenant][e.card.Name], e) {
			fmt.Fprintf(&b, "  %q is not filed under its number, tenant or name\n", id)
		}
	}
	var servers []string
	for _, byName := range r.servers {
		for _, si := range byName {
			j, _ := json.Marshal(si)
			servers = append(servers, string(j))
		}
	}
	slices.Sort(servers)
	fmt.Fprintf(&b, "servers %v\n", servers)
	return b.String()
}
