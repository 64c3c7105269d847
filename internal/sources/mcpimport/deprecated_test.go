package mcpimport_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/sources/mcpimport"
	"github.com/seed0cff8200/cardex/retriever"
)

// filesystemTools are the tools of the MCP filesystem server as its
// tools/list describes them (testdata/filesystem-tools.json says which
// version).
func filesystemTools(t *testing.T) []*mcp.Tool {
	t.Helper()
	b, err := os.ReadFile("testdata/filesystem-tools.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct{ Tools []*mcp.Tool }
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Tools
}

// The filesystem server deprecates read_file in the second sentence of its
// description: the card keeps the notice in its summary (the text a model
// reads first), says it in when_not_to_use and carries the deprecated tag.
func TestImportKeepsTheDeprecationNotice(t *testing.T) {
	imported, skipped := mcpimport.ToCards("acme", "files", filesystemTools(t))
	if len(skipped) != 0 || len(imported) != 14 {
		t.Fatalf("%d cards, skipped %v", len(imported), skipped)
	}
	for _, c := range imported {
		switch c.Name {
		case "read_file":
			if c.Summary != "Read the complete contents of a file as text. DEPRECATED: Use read_text_file instead." {
				t.Errorf("summary %q", c.Summary)
			}
			if c.WhenNotToUse != "DEPRECATED: Use read_text_file instead." || !(&c).Deprecated() {
				t.Errorf("when_not_to_use %q, tags %v", c.WhenNotToUse, c.Tags)
			}
		default:
			if (&c).Deprecated() || c.WhenNotToUse != "" {
				t.Errorf("%s: tags %v, when_not_to_use %q", c.Name, c.Tags, c.WhenNotToUse)
			}
		}
	}
}

// The plain request for what both tools do ranks the replacement first.
func TestDeprecatedToolRanksBelowItsReplacement(t *testing.T) {
	imported, _ := mcpimport.ToCards("acme", "files", filesystemTools(t))
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Put(context.Background(), imported); err != nil {
		t.Fatal(err)
	}
	emb, err := embed.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	r, err := retriever.New(context.Background(), st, emb, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for _, q := range []string{"read a file", "read the contents of a file as text", "open a text file"} {
		res, err := r.Discover(context.Background(), retriever.Request{Query: q, TopK: 5,
			Caller: retriever.Caller{Tenant: "acme", Subject: "t", Scopes: []string{"*"}}})
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, s := range res.Tools {
			names = append(names, s.Card.Name)
		}
		t.Logf("%q: %v", q, names)
		fi, ti := slices.Index(names, "read_file"), slices.Index(names, "read_text_file")
		if ti < 0 || (fi >= 0 && fi < ti) {
			t.Errorf("%q: %v (read_text_file must rank above the deprecated read_file)", q, names)
		}
	}
}
