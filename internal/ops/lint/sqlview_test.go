package lint

import (
	"context"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/codec/pgjson"
	"github.com/seed0cff8200/cardex/internal/sources/sqlimport"
)

// TestNoComment lints the cards `import sql` writes: a view without a
// comment is flagged, one with a comment is not.
func TestNoComment(t *testing.T) {
	col := []sqlimport.Column{{Name: "id", SQLType: "integer", NotNull: true, Type: pgjson.Type{Kind: pgjson.Integer}}}
	rels := []sqlimport.Relation{
		{Schema: "inventory", Name: "described", Kind: sqlimport.KindView, Comment: "One row per service.", Columns: col, Readable: true},
		{Schema: "inventory", Name: "bare", Kind: sqlimport.KindView, Columns: col, Readable: true},
		{Schema: "inventory", Name: "bare_table", Kind: sqlimport.KindTable, Columns: col, Readable: true},
	}
	cs, skipped := sqlimport.ToCards("acme", "inventory", rels)
	if len(cs) != 3 || len(skipped) != 0 {
		t.Fatalf("%d cards, %v", len(cs), skipped)
	}
	fs, err := Run(context.Background(), cs, nil, embed.NewHashed(embed.DefaultDim), Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := kinds(fs, KindNoComment)
	if len(got) != 2 || got[0].Card.Name != "inventory.bare" || got[1].Card.Name != "inventory.bare_table" ||
		!strings.Contains(got[0].Message, "COMMENT ON VIEW inventory.bare IS") || !strings.Contains(got[1].Message, "COMMENT ON TABLE") {
		t.Fatalf("findings %+v", got)
	}
}
