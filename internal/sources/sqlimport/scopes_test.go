package sqlimport_test

import (
	"slices"
	"testing"

	"github.com/seed0cff8200/cardex/internal/execution/sqlquery"
	"github.com/seed0cff8200/cardex/internal/sources/catalogsync"
	"github.com/seed0cff8200/cardex/internal/sources/sqlimport"
)

// An import with no --scopes opens nothing: every view card and the query
// card require the server's read scope.
func TestPlanWithoutScopesIsClosed(t *testing.T) {
	rels := []sqlimport.Relation{
		{Schema: "inventory", Name: "stock", Kind: sqlimport.KindView, Readable: true, Comment: "One row per item in stock."},
		{Schema: "inventory", Name: "orders", Kind: sqlimport.KindTable, Readable: true},
	}
	views, skipped := sqlimport.ToCards("acme", "inventory", rels)
	if len(views) != 2 || len(skipped) != 0 {
		t.Fatalf("%v %v", views, skipped)
	}
	plan, err := sqlimport.Plan("acme", "inventory", nil, views, skipped, nil, catalogsync.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Changes) != 3 || plan.Changes[2].Card.Name != sqlquery.QueryTool {
		t.Fatalf("%d changes", len(plan.Changes))
	}
	for _, ch := range plan.Changes {
		if !slices.Equal(ch.Card.RequiredScopes, []string{"inventory:read"}) {
			t.Errorf("%s: required scopes %v", ch.Card.Name, ch.Card.RequiredScopes)
		}
	}
}
