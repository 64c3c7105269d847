package mcpfront_test

// search_tools with intents, and its "no tool matches" answer, through the
// real SDK client over streamable HTTP.

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/access/tokens"
	"github.com/seed0cff8200/cardex/internal/execution/gateway"
	"github.com/seed0cff8200/cardex/internal/faces/mcpfront"
	"github.com/seed0cff8200/cardex/retriever"
)

// searchRow is one search_tools result as the model reads it.
type searchRow struct {
	Name       string  `json:"name"`
	Server     string  `json:"server"`
	Summary    string  `json:"summary"`
	Confidence float64 `json:"confidence"`
	Intents    []int   `json:"intents"`
	// CompanionOf names the matched tool a companion was used with.
	CompanionOf *struct {
		Server string `json:"server"`
		Name   string `json:"name"`
	} `json:"companion_of"`
}

// search calls search_tools and decodes its answer strictly; it fails the
// test on a tool error.
func search(t *testing.T, cs *mcp.ClientSession, args map[string]any) ([]searchRow, *mcp.CallToolResult, string) {
	t.Helper()
	res, text := call(t, cs, "search_tools", args)
	if res.IsError {
		t.Fatalf("search_tools(%v): tool error %q", args, text)
	}
	if text == noMatchText {
		return nil, res, text
	}
	var out struct {
		Tools []searchRow `json:"tools"`
	}
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&out); err != nil {
		t.Fatalf("search_tools(%v): %v\n%s", args, err, text)
	}
	return out.Tools, res, text
}

const noMatchText = "no tool matches; rephrase the request in other words, or split it into intents (one per step)"

func rowNames(rows []searchRow) []string {
	out := make([]string, len(rows))
	for i, r := range rows {
		out[i] = r.Server + "/" + r.Name
	}
	return out
}

func TestSearchToolsIntents(t *testing.T) {
	e := setup(t, false)
	cs := mustConnect(t, e.url, supportToken)
	support := retriever.Caller{Tenant: "acme", Subject: "support-bot@example.com", Scopes: []string{"files:read"}}
	intents := []string{"read a text file from the workspace", "delete a file from the workspace", "show a file's size and times"}

	for _, tc := range []struct {
		name  string
		args  map[string]any
		query string
		limit int
	}{
		{"intents only", map[string]any{"intents": intents}, "", 0},
		{"query and intents", map[string]any{"query": "inspect a workspace file", "intents": intents, "limit": 3}, "inspect a workspace file", 3},
		{"empty query and intents", map[string]any{"query": "", "intents": intents[:1], "limit": 2}, "", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rows, _, text := search(t, cs, tc.args)
			// What the retriever ranks for the same caller is what the
			// model reads: names, order, confidences and intents.
			limit := tc.limit
			if limit == 0 {
				limit = gateway.DefaultLimit
			}
			want, err := e.ret.Discover(context.Background(), retriever.Request{Caller: support, Query: tc.query, Intents: tc.args["intents"].([]string), TopK: limit})
			if err != nil {
				t.Fatal(err)
			}
			if len(rows) != len(want.Tools) || len(rows) == 0 {
				t.Fatalf("%d rows, the retriever ranks %d: %s", len(rows), len(want.Tools), text)
			}
			for i, r := range rows {
				w := want.Tools[i]
				if r.Server != w.Card.Server || r.Name != w.Card.Name || r.Confidence != w.Scores.Confidence || !slices.Equal(r.Intents, w.Intents) {
					t.Errorf("#%d %+v, want %s/%s confidence %v intents %v", i+1, r, w.Card.Server, w.Card.Name, w.Scores.Confidence, w.Intents)
				}
				if !(r.Confidence > 0 && r.Confidence < 1) {
					t.Errorf("#%d %s: confidence %v outside (0,1)", i+1, r.Name, r.Confidence)
				}
				if tc.query == "" && len(r.Intents) == 0 {
					t.Errorf("#%d %s answers no intent", i+1, r.Name)
				}
			}
			if tc.query == "" && len(tc.args["intents"].([]string)) > 1 && (rows[0].Name != "read_file" || !slices.Contains(rows[0].Intents, 0)) {
				t.Errorf("first row %+v, want files/read_file for intent 0", rows[0])
			}
			// Nothing outside the caller's scopes or tenant, whatever the
			// intents ask for (delete_file needs files:admin).
			for _, hidden := range []string{"delete_file", "old_tool", "Globex"} {
				if strings.Contains(text, hidden) {
					t.Errorf("search shows %s to the support caller: %s", hidden, text)
				}
			}
		})
	}

	// The admin, who holds files:admin, gets delete_file for that intent.
	admin := mustConnect(t, e.url, adminToken)
	rows, _, _ := search(t, admin, map[string]any{"intents": intents})
	if i := slices.Index(rowNames(rows), "files/delete_file"); i < 0 || !slices.Contains(rows[i].Intents, 1) {
		t.Errorf("admin rows %v: want files/delete_file for intent 1", rows)
	}
	// Another tenant sees its own read_file only.
	g := mustConnect(t, e.url, otherToken)
	rows, _, _ = search(t, g, map[string]any{"intents": intents[:1]})
	if len(rows) != 1 || rows[0].Summary != "Globex's own file reader." {
		t.Errorf("globex rows %+v, want its own read_file only", rows)
	}
}

func TestSearchToolsIntentsRefusals(t *testing.T) {
	e := setup(t, false)
	cs := mustConnect(t, e.url, supportToken)
	nine := slices.Repeat([]string{"read a file"}, 9)
	for _, tc := range []struct {
		name string
		args map[string]any
		want []string
	}{
		{"too many intents", map[string]any{"intents": nine}, []string{"intents", "9 entries", "limit is 8"}},
		{"over-long intent", map[string]any{"intents": []string{"read a file", strings.Repeat("é", 201)}}, []string{"intents[1]", "201 characters", "limit is 200"}},
		{"blank intent", map[string]any{"query": "file", "intents": []string{"  "}}, []string{"intents[0]", "required"}},
		{"over-long query beside intents", map[string]any{"query": strings.Repeat("q", 201), "intents": []string{"read a file"}}, []string{"query", "limit is 200"}},
		{"negative limit", map[string]any{"intents": []string{"read a file"}, "limit": -1}, []string{"limit", "between 1 and 50"}},
		{"intents not an array", map[string]any{"intents": "read a file"}, []string{"invalid arguments for search_tools"}},
		{"intent not a string", map[string]any{"intents": []any{"read a file", 7}}, []string{"invalid arguments for search_tools"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, text := call(t, cs, "search_tools", tc.args)
			if !res.IsError {
				t.Fatalf("accepted: %s", text)
			}
			for _, w := range tc.want {
				if !strings.Contains(text, w) {
					t.Errorf("error %q does not say %q", text, w)
				}
			}
		})
	}
	// The limits themselves pass: 8 intents of 200 characters.
	eight := slices.Repeat([]string{strings.Repeat("é", 200)}, 8)
	eight[0] = "read a file"
	if rows, _, _ := search(t, cs, map[string]any{"intents": eight}); len(rows) == 0 {
		t.Errorf("8 intents at the limit: no rows")
	}
}

// TestSearchToolsDefinitionAcceptsIntents: the fixed definition tells the
// model when to use intents, and the arguments of an intents-only search
// are valid against the input schema it advertises.
func TestSearchToolsDefinitionAcceptsIntents(t *testing.T) {
	e := setup(t, false)
	cs := mustConnect(t, e.url, supportToken)
	lt, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(lt.Tools, func(x *mcp.Tool) bool { return x.Name == "search_tools" })
	if i < 0 {
		t.Fatal("no search_tools")
	}
	tool := lt.Tools[i]
	if !strings.Contains(tool.Description, "intents") || !strings.Contains(tool.Description, "several steps") {
		t.Errorf("description %q does not say when to pass intents", tool.Description)
	}
	raw, err := json.Marshal(tool.InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	schema, err := cards.CompileSchema(raw)
	if err != nil {
		t.Fatalf("search_tools input schema: %v\n%s", err, raw)
	}
	for _, tc := range []struct {
		args  string
		valid bool
	}{
		{`{"intents":["read a file","show its size"]}`, true},
		{`{"query":"file","intents":["read a file"],"limit":3}`, true},
		{`{"query":"file"}`, true},
		{`{"intents":["a","b","c","d","e","f","g","h","i"]}`, false},
		{`{"intents":["` + strings.Repeat("x", 201) + `"]}`, false},
		{`{"intents":"read a file"}`, false},
	} {
		if err := schema.Validate([]byte(tc.args)); (err == nil) != tc.valid {
			t.Errorf("%s against the advertised schema: %v, want valid=%v", tc.args, err, tc.valid)
		}
	}
}

// frontWith serves /mcp over the given cards with a retriever that applies
// minConfidence to every search.
func frontWith(t *testing.T, cs []cards.Card, opts ...retriever.Option) (string, *retriever.Retriever) {
	t.Helper()
	ctx := context.Background()
	st, err := embedded.Open(filepath.Join(t.TempDir(), "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Put(ctx, cs); err != nil {
		t.Fatal(err)
	}
	ret, err := retriever.New(ctx, st, embed.NewHashed(embed.DefaultDim), nil, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ret.Close() })
	table, err := tokens.New(tokens.File{Tokens: []tokens.Entry{{Token: adminToken, Tenant: "acme", Subject: "admin", Scopes: []string{"*"}}}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(mcpfront.Path, mcpfront.NewHandler(mcpfront.Config{Gateway: &gateway.Gateway{Retriever: ret}, Tokens: table, Version: "test"}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv.URL + mcpfront.Path, ret
}

func TestSearchToolsNoMatch(t *testing.T) {
	catalogue := []cards.Card{
		{Tenant: "acme", Server: "files", Name: "read_file", Kind: cards.KindMCPTool, Summary: "Read a text file from the workspace and return its content."},
		{Tenant: "acme", Server: "files", Name: "stat", Kind: cards.KindMCPTool, Summary: "Show a file's size and modification times."},
		{Tenant: "acme", Server: "notes", Name: "get_note", Kind: cards.KindMCPTool, Summary: "Show one note by its title."},
		{Tenant: "acme", Server: "weather", Name: "forecast", Kind: cards.KindMCPTool, Summary: "Weather forecast for a city for the next days."},
	}
	const good, bad = "read a text file from the workspace", "zebra xylophone quasar"
	// The confidences the default retriever gives both texts' best tools;
	// the server's minimum goes between them.
	ctx := context.Background()
	probeURL, probe := frontWith(t, catalogue)
	admin := retriever.Caller{Tenant: "acme", Subject: "admin", Scopes: []string{"*"}}
	// Without a minimum, a text that ranks nothing at all is no match
	// too, whether it comes as the query or as intents.
	pcs := mustConnect(t, probeURL, adminToken)
	for _, args := range []map[string]any{{"query": "!!!"}, {"intents": []string{"!!!"}}, {"query": "!!!", "intents": []string{"!!!", "?!"}}} {
		if _, _, text := search(t, pcs, args); text != noMatchText {
			t.Errorf("search_tools(%v) without a minimum = %q, want %q", args, text, noMatchText)
		}
	}
	zero := 0.0
	best := func(q string) float64 {
		res, err := probe.Discover(ctx, retriever.Request{Caller: admin, Query: q, TopK: 1, MinConfidence: &zero})
		if err != nil || len(res.Tools) != 1 {
			t.Fatalf("probe %q: %v %d tools", q, err, len(res.Tools))
		}
		return res.Tools[0].Scores.Confidence
	}
	hi, lo := best(good), best(bad)
	if !(lo < hi) {
		t.Fatalf("precondition: nonsense confidence %v not under %v", lo, hi)
	}
	url, _ := frontWith(t, catalogue, retriever.WithMinConfidence((hi+lo)/2))
	cs := mustConnect(t, url, adminToken)

	for _, args := range []map[string]any{
		{"query": bad},
		{"query": bad, "limit": 50},
		{"intents": []string{bad}},
		{"query": bad, "intents": []string{bad, "qwxz vlorp"}},
	} {
		rows, res, text := search(t, cs, args)
		if text != noMatchText || rows != nil || res.IsError {
			t.Errorf("search_tools(%v) = %q (error %v), want %q", args, text, res.IsError, noMatchText)
			continue
		}
		sc, _ := json.Marshal(res.StructuredContent)
		if string(sc) != `{"no_match":true,"tools":[]}` {
			t.Errorf("search_tools(%v) structured content %s, want no_match and no tools", args, sc)
		}
	}
	// What clears the minimum is answered; an intent under it gives way.
	if rows, _, text := search(t, cs, map[string]any{"query": good}); len(rows) == 0 || rows[0].Name != "read_file" {
		t.Errorf("search_tools(%q) = %s, want read_file first", good, text)
	}
	rows, _, text := search(t, cs, map[string]any{"intents": []string{bad, good}})
	if len(rows) == 0 || rows[0].Name != "read_file" {
		t.Fatalf("intents [bad, good] = %s, want read_file first", text)
	}
	for _, r := range rows {
		if !slices.Equal(r.Intents, []int{1}) {
			t.Errorf("%s answers %v; only intent 1 cleared the minimum", r.Name, r.Intents)
		}
	}
	// An empty query lists every tool: there is nothing to abstain on.
	if rows, _, text := search(t, cs, map[string]any{"query": ""}); len(rows) != len(catalogue) {
		t.Errorf("empty query: %s, want all %d tools", text, len(catalogue))
	}
}
