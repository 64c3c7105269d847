package lint

import (
	"encoding/json"
	"fmt"

	"github.com/seed0cff8200/cardex/cards"
)

// uncommented flags sql_view cards whose relation has no comment: the
// comment is what tells a model what one row means. `cardex import sql`
// writes the relation's comment as the output schema's description and
// the relation under x-cardex-sql (the key of internal/sources/sqlimport).
func uncommented(active []cards.Card) []Finding {
	var out []Finding
	for i := range active {
		c := &active[i]
		if c.Kind != cards.KindSQLView || len(c.OutputSchema) == 0 {
			continue
		}
		var s struct {
			Description string `json:"description"`
			SQL         *struct {
				Relation string `json:"relation"`
				Kind     string `json:"kind"`
			} `json:"x-cardex-sql"`
		}
		if json.Unmarshal(c.OutputSchema, &s) != nil || s.SQL == nil || s.Description != "" {
			continue
		}
		what := map[string]string{"view": "VIEW", "materialized_view": "MATERIALIZED VIEW", "foreign_table": "FOREIGN TABLE"}[s.SQL.Kind]
		if what == "" {
			what = "TABLE"
		}
		out = append(out, Finding{Kind: KindNoComment, Card: c.Key(),
			Message: fmt.Sprintf("%s/%s has no description: COMMENT ON %s %s IS '...' (what one row means), then import it again",
				c.Server, c.Name, what, s.SQL.Relation)})
	}
	return out
}
