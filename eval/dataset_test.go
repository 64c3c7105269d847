package eval

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
)

func TestLoadFixture(t *testing.T) {
	d, err := Load("testdata/tiny")
	if err != nil {
		t.Fatal(err)
	}
	if d.Name != "tiny" || len(d.Tools) != 8 || len(d.Queries) != 5 {
		t.Fatalf("name %q, %d tools, %d queries; want tiny, 8, 5", d.Name, len(d.Tools), len(d.Queries))
	}
	if !d.HasSchemas() {
		t.Error("HasSchemas = false")
	}
	web := d.Tools[6]
	if web.Name != "web/search" || web.Server != "web" || web.BareName() != "search" || web.HasSchema() {
		t.Errorf("web/search loaded as %+v (HasSchema %v)", web, web.HasSchema())
	}
	// expected_groups win over expected; without groups, one group per label.
	if got := d.Queries[1].Needs(); len(got) != 1 || strings.Join(got[0], ",") != "filesystem/write_file,desktop/write_file" {
		t.Errorf("q2 needs = %v", got)
	}
	if got := d.Queries[0].Needs(); len(got) != 1 || len(got[0]) != 1 || got[0][0] != "weather/get_forecast" {
		t.Errorf("q1 needs = %v", got)
	}
	if q := d.Queries[2]; q.Type != "multi" || q.Category != "mixed" || len(q.Needs()) != 2 {
		t.Errorf("q3 = %+v", q)
	}

	p, err := Load("testdata/plain")
	if err != nil {
		t.Fatal(err)
	}
	if p.HasSchemas() || p.Tools[0].Server != "" || p.Tools[0].BareName() != "calculator" {
		t.Errorf("plain: HasSchemas %v, tool %+v", p.HasSchemas(), p.Tools[0])
	}
	if got := p.Queries[1].Needs(); len(got) != 2 {
		t.Errorf("p2 needs = %v, want two singleton groups", got)
	}
}

func TestLoadWithoutQueries(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "tools.jsonl", `{"name": "a", "server": null, "description": "x", "input_schema": null}`+"\n\n")
	d, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Tools) != 1 || d.Queries != nil {
		t.Errorf("got %d tools, queries %v", len(d.Tools), d.Queries)
	}
}

func TestLoadErrors(t *testing.T) {
	tool := `{"name": "s/a", "server": "s", "tool_name": "a", "description": "x", "input_schema": null}` + "\n"
	tests := []struct {
		name, tools, queries, want string
	}{
		{"no tools file", "", "", "tools.jsonl"},
		{"empty tools", "\n", "", "no tools"},
		{"duplicate tool", tool + tool, "", `tool "s/a" appears twice`},
		{"tool without name", `{"description": "x"}`, "", `"name" is required`},
		{"bad json", "{", "", "tools.jsonl:1"},
		{"unknown label", tool, `{"id": "q", "query": "x", "expected": ["s/b"]}`, `expected tool "s/b" is not in tools.jsonl`},
		{"unknown label in a group", tool, `{"id": "q", "query": "x", "expected": ["s/a"], "expected_groups": [["s/a", "t/a"]]}`, `"t/a"`},
		{"duplicate id", tool, `{"id": "q", "query": "x", "expected": ["s/a"]}` + "\n" + `{"id": "q", "query": "y", "expected": ["s/a"]}`, "queries.jsonl:2"},
		{"no expected", tool, `{"id": "q", "query": "x", "expected": []}`, "no expected tools"},
		{"empty group", tool, `{"id": "q", "query": "x", "expected": ["s/a"], "expected_groups": [[]]}`, "group 0 is empty"},
		{"empty query", tool, `{"id": "q", "query": " ", "expected": ["s/a"]}`, "empty query"},
		{"no id", tool, `{"query": "x", "expected": ["s/a"]}`, `"id" is required`},
		{"two values on a line", tool, `{"id": "q", "query": "x", "expected": ["s/a"]} {}`, "more than one JSON value"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.tools != "" {
				write(t, dir, "tools.jsonl", tc.tools)
			}
			if tc.queries != "" {
				write(t, dir, "queries.jsonl", tc.queries)
			}
			_, err := Load(dir)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Load error = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestCatalogCards(t *testing.T) {
	d, err := Load("testdata/tiny")
	if err != nil {
		t.Fatal(err)
	}
	cat, err := NewCatalog(d, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if len(cat.Cards) != len(d.Tools) || len(cat.SchemasDropped) != 0 {
		t.Fatalf("%d cards, dropped %v", len(cat.Cards), cat.SchemasDropped)
	}
	fc := cat.Cards[0]
	if fc.Tenant != "t1" || fc.Server != "weather" || fc.Name != "get_forecast" || fc.Kind != cards.KindMCPTool ||
		fc.Summary != "Get the weather forecast for a city." ||
		fc.Description != "Get the weather forecast for a city. Returns temperature, rain and wind for the next days." ||
		len(fc.InputSchema) == 0 {
		t.Errorf("get_forecast card = %+v", fc)
	}
	// One sentence: summary only.
	if c := cat.Cards[1]; c.Description != "" || c.Summary != "List severe weather alerts (storms, floods) for a US state." {
		t.Errorf("get_alerts card: summary %q, description %q", c.Summary, c.Description)
	}
	// Empty description: the split name.
	if c := cat.Cards[7]; c.Summary != "get quote" {
		t.Errorf("get_quote summary = %q", c.Summary)
	}
	if cat.Label("github", "search") != "github/search" || cat.Label("web", "search") != "web/search" || cat.Label("x", "y") != "" {
		t.Error("labels do not map back")
	}

	p, err := Load("testdata/plain")
	if err != nil {
		t.Fatal(err)
	}
	pc, err := NewCatalog(p, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if c := pc.Cards[2]; c.Server != NoServer || c.Name != "PDF_URLTool" || c.Kind != cards.KindFunction || pc.Label(NoServer, "PDF_URLTool") != "PDF_URLTool" {
		t.Errorf("serverless card = %+v", c)
	}

	// A schema that breaks the card rules is dropped, not fatal.
	bad := &Dataset{Tools: []Tool{{Name: "s/a", Server: "s", ToolName: "a", Description: "x",
		InputSchema: []byte(`{"type": 7}`)}}} // broken in every draft
	bc, err := NewCatalog(bad, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if len(bc.SchemasDropped) != 1 || !strings.HasPrefix(bc.SchemasDropped[0], "s/a: input_schema") || bc.Cards[0].InputSchema != nil {
		t.Errorf("dropped %v, schema %s", bc.SchemasDropped, bc.Cards[0].InputSchema)
	}
	// Any other broken rule is an error.
	if _, err := NewCatalog(&Dataset{Tools: []Tool{{Name: "bad name!", Description: "x"}}}, "t1"); err == nil {
		t.Error("a tool name that breaks the name rule was accepted")
	}
}

func TestFirstSentence(t *testing.T) {
	long := strings.Repeat("word ", 200) // 1000 characters, no sentence end
	tests := []struct {
		in    string
		limit int
		want  string
	}{
		{"One. Two.", 500, "One."},
		{"Version 1.2 is out! Next", 500, "Version 1.2 is out!"},
		{"No end", 500, "No end"},
		{"Ends with a dot.", 500, "Ends with a dot."},
		{"使用必应搜索。返回结果", 500, "使用必应搜索。"},
		{"  padded. x", 500, "padded."},
		{long, 12, "word word…"},
		{"abcdefghijklmnop", 5, "abcd…"},
		{"", 500, ""},
	}
	for _, tc := range tests {
		if got := FirstSentence(tc.in, tc.limit); got != tc.want {
			t.Errorf("FirstSentence(%.20q, %d) = %q, want %q", tc.in, tc.limit, got, tc.want)
		}
	}
}

func write(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLoadExamples(t *testing.T) {
	d, err := Load("testdata/examples")
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Examples) != 3 || len(d.Examples["github/search"]) != 2 || !strings.HasSuffix(d.ExamplesFile, ExamplesFileName) {
		t.Fatalf("examples = %v from %q", d.Examples, d.ExamplesFile)
	}
	cat, err := NewCatalog(d, "t1")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cat.Cards {
		want := d.Examples[c.Server+"/"+c.Name]
		if strings.Join(c.SearchExamples, "|") != strings.Join(want, "|") || c.ExamplesSource == nil || c.ExamplesSource.Author != cards.AuthorPerson {
			t.Errorf("%s/%s: examples %q source %+v, want %q", c.Server, c.Name, c.SearchExamples, c.ExamplesSource, want)
		}
	}
	// Without them, every card states it has none (which clears a server's).
	bare, err := NewCatalog(d.WithoutExamples(), "t1")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range bare.Cards {
		if c.SearchExamples != nil || c.ExamplesSource == nil {
			t.Errorf("%s/%s without examples: %q %+v", c.Server, c.Name, c.SearchExamples, c.ExamplesSource)
		}
	}
	// Examples longer than the card limit are cut to it.
	long := strings.Repeat("word ", 100)
	d.Examples["stocks/get_quote"] = []string{long}
	cat, err = NewCatalog(d, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if c := cat.Cards[7]; len([]rune(c.SearchExamples[0])) > cards.MaxSearchExampleLen {
		t.Errorf("example of %d characters kept", len([]rune(c.SearchExamples[0])))
	}

	dir := t.TempDir()
	for name, body := range map[string]string{
		"unknown.jsonl": `{"name": "nope/tool", "examples": ["x"]}`,
		"twice.jsonl":   "{\"name\": \"github/search\", \"examples\": [\"x\"]}\n{\"name\": \"github/search\", \"examples\": [\"y\"]}\n",
		"bad.jsonl":     `{"name": "github/search", "examples": "not a list"}`,
	} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := d.LoadExamples(path); err == nil || !strings.Contains(err.Error(), name+":1") && !strings.Contains(err.Error(), name+":2") {
			t.Errorf("%s: error %v, want one naming the file and line", name, err)
		}
	}
}
