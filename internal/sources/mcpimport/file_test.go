package mcpimport_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/sources/mcpimport"
)

func writeFile(t *testing.T, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "tools.json")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSavedListImportsLikeALiveOne: a tools/list result saved from a real
// SDK server (its pages, as JSON, or the JSON-RPC response that carries
// one) becomes exactly the cards an import from the live server makes.
func TestSavedListImportsLikeALiveOne(t *testing.T) {
	ro := true
	tools := []*mcp.Tool{
		tool("read_file", "Read a file. Returns its text."),
		tool("write_file", "Write a file."),
		{Name: "stat", Title: "File status", Description: "Show size and times.", InputSchema: map[string]any{"type": "object"},
			OutputSchema: map[string]any{"type": "object", "properties": map[string]any{"size": map[string]any{"type": "integer"}}},
			Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: ro}},
	}
	cs := serve(t, newServer(2, tools...))
	ctx := context.Background()
	live, _, err := mcpimport.ListAll(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := mcpimport.ToCards("acme", "files", live)

	var pages []string
	cursor := ""
	for {
		res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, string(b))
		if cursor = res.NextCursor; cursor == "" {
			break
		}
	}
	if len(pages) != 2 {
		t.Fatalf("%d pages; the test wants the listing split", len(pages))
	}
	for name, content := range map[string]string{
		"pages":    strings.Join(pages, "\n"),
		"json-rpc": `{"jsonrpc":"2.0","id":1,"result":` + pages[0] + "}\n" + pages[1],
		"array": func() string {
			b, _ := json.MarshalIndent(live, "", "  ")
			return string(b)
		}(),
	} {
		servers, err := mcpimport.ReadToolsFile(writeFile(t, content))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(servers) != 1 || servers[0].Name != "" {
			t.Fatalf("%s: servers %+v; want one without a name", name, servers)
		}
		got, skipped := mcpimport.ToCards("acme", "files", servers[0].Tools)
		if len(skipped) != 0 || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: cards differ from the live import (skipped %v)\n got %+v\nwant %+v", name, skipped, got, want)
		}
	}
}

func TestReadToolsFileLines(t *testing.T) {
	p := writeFile(t, `{"name": "files/read_file", "server": "files", "tool_name": "read_file", "description": "Read a file.", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}
{"name": "web/fetch", "server": "web", "tool_name": "fetch", "description": "Fetch a page.", "input_schema": null, "source_server": "Web"}

{"name": "files/stat", "server": "files", "description": "Stat a file.", "inputSchema": {"type": "object"}}
{"name": "timeport", "server": null, "description": "A time-travel game.", "input_schema": null}
`)
	servers, err := mcpimport.ReadToolsFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range servers {
		for _, tl := range s.Tools {
			got = append(got, s.Name+"|"+tl.Name)
		}
	}
	if want := []string{"files|read_file", "files|stat", "web|fetch", "|timeport"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("tools %v, want %v", got, want)
	}
	cs, skipped := mcpimport.ToCards("acme", "files", servers[0].Tools)
	if len(skipped) != 0 || len(cs) != 2 || !strings.Contains(string(cs[0].InputSchema), `"path"`) || string(cs[1].InputSchema) == "" {
		t.Errorf("files cards %+v (skipped %v)", cs, skipped)
	}
	web, _ := mcpimport.ToCards("acme", "web", servers[1].Tools)
	if len(web) != 1 || web[0].InputSchema != nil || web[0].Summary != "Fetch a page." {
		t.Errorf("web card %+v: a null schema stays absent", web)
	}

	for name, tc := range map[string]struct{ content, want string }{
		"duplicate": {`{"server":"a","tool_name":"x"}` + "\n" + `{"server":"a","name":"a/x"}`, `value 2: tool "x" of server "a" again (first at value 1)`},
		"malformed": {`{"server":"a","tool_name":"x"}` + "\n" + `{"server":`, "value 2"},
		"no name":   {`{"server":"a","description":"nameless"}`, "value 1: a tool without a name"},
		"empty":     {"\n\n", "no tools"},
		"scalar":    {`"hello"`, "value 1"},
	} {
		if _, err := mcpimport.ReadToolsFile(writeFile(t, tc.content)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", name, err, tc.want)
		}
	}
}

func TestReadServersFile(t *testing.T) {
	long := strings.Repeat("word ", cards.MaxDescriptionLen)
	p := writeFile(t, `{"server": "files", "title": "Files", "description": "Reads\u200b and writes files.", "category": "Storage", "web": "https://example.com"}
{"name": "web", "title": "Web", "description": "`+long+`"}
`)
	got, err := mcpimport.ReadServersFile(p, "acme")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != (cards.ServerInfo{Tenant: "acme", Name: "files", Title: "Files", Description: "Reads and writes files."}) ||
		got[1].Name != "web" || len([]rune(got[1].Description)) > cards.MaxDescriptionLen {
		t.Errorf("entries %+v", got)
	}
	for name, tc := range map[string]struct{ content, want string }{
		"bad name":  {`{"server": "a b"}`, `line 1: server "a b" must match`},
		"duplicate": {`{"server": "a"}` + "\n" + `{"name": "a"}`, `line 2: server "a" again (first on line 1)`},
	} {
		if _, err := mcpimport.ReadServersFile(writeFile(t, tc.content), "acme"); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one saying %q", name, err, tc.want)
		}
	}
}
