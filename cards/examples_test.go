package cards_test

import (
	"encoding/json"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
)

// TestExampleSchemasHaveNoStrayKeywords: no schema of the example
// catalogues holds a keyword whose value is null. In a YAML flow mapping an
// unquoted description with a comma ({description: Branch, tag or commit
// SHA.}) ends at the comma, and the rest becomes a keyword of the schema
// with no value: the model read "Branch" and a stray "tag or commit SHA."
// key (18 such keys were in the catalogues).
func TestExampleSchemasHaveNoStrayKeywords(t *testing.T) {
	for _, dir := range []string{"../examples/catalog", "../examples/catalog-other-tenant", "../examples/sql"} {
		cs, _, err := cards.LoadPath(dir)
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		for _, c := range cs {
			for what, schema := range map[string]json.RawMessage{"input_schema": c.InputSchema, "output_schema": c.OutputSchema} {
				if len(schema) == 0 {
					continue
				}
				var v any
				if err := json.Unmarshal(schema, &v); err != nil {
					t.Fatalf("%s/%s %s: %v", c.Server, c.Name, what, err)
				}
				for _, p := range nullMembers(v, "") {
					t.Errorf("%s/%s %s: %s is null (an unquoted text with a comma in a YAML flow mapping?)", c.Server, c.Name, what, p)
				}
			}
		}
	}
}

// nullMembers are the paths of the object members whose value is null,
// but for default and const, where null is a value.
func nullMembers(v any, path string) []string {
	var out []string
	switch x := v.(type) {
	case map[string]any:
		for k, m := range x {
			if m == nil && k != "default" && k != "const" {
				out = append(out, path+"/"+k)
			}
			out = append(out, nullMembers(m, path+"/"+k)...)
		}
	case []any:
		for _, m := range x {
			out = append(out, nullMembers(m, path+"/*")...)
		}
	}
	return out
}
