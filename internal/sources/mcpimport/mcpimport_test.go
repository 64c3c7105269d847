package mcpimport_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/internal/sources/catalogsync"
	"github.com/seed0cff8200/cardex/internal/sources/mcpimport"
)

func tool(name, desc string) *mcp.Tool {
	return &mcp.Tool{
		Name:        name,
		Description: desc,
		InputSchema: map[string]any{
			"type":       "object",
			"properties": map[string]any{"id": map[string]any{"type": "string"}},
			"required":   []any{"id"},
		},
	}
}

func noop(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	return &mcp.CallToolResult{}, nil
}

// serve starts an in-process SDK server with the given page size and returns
// a connected client session.
func serve(t *testing.T, srv *mcp.Server) *mcp.ClientSession {
	t.Helper()
	ctx := context.Background()
	ct, st := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func newServer(pageSize int, tools ...*mcp.Tool) *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "upstream", Version: "1"}, &mcp.ServerOptions{PageSize: pageSize})
	for _, tl := range tools {
		s.AddTool(tl, noop)
	}
	return s
}

func openStore(t *testing.T) cards.Store {
	t.Helper()
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// importOnce runs the whole import the CLI runs: list, map, diff, apply.
func importOnce(t *testing.T, cs *mcp.ClientSession, st cards.Store, dryRun bool) (catalogsync.Plan, error) {
	t.Helper()
	ctx := context.Background()
	tools, _, err := mcpimport.ListAll(ctx, cs)
	if err != nil {
		return catalogsync.Plan{}, err
	}
	imported, skipped := mcpimport.ToCards("acme", "files", tools)
	keep := make([]string, 0, len(skipped))
	for _, s := range skipped {
		keep = append(keep, s.Name)
	}
	cat := catalogsync.StoreCatalog{Store: st}
	stored, err := cat.List(ctx, "acme", "files")
	if err != nil {
		return catalogsync.Plan{}, err
	}
	plan, err := catalogsync.Diff("acme", "files", stored, imported,
		catalogsync.Options{Kind: cards.KindMCPTool, Scopes: []string{"files:read"}, Keep: keep})
	if err != nil || dryRun {
		return plan, err
	}
	return plan, catalogsync.Apply(ctx, cat, plan)
}

func listAll(t *testing.T, st cards.Store) map[string]cards.Card {
	t.Helper()
	cs, err := catalogsync.StoreCatalog{Store: st}.List(context.Background(), "acme", "files")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]cards.Card{}
	for _, c := range cs {
		out[c.Name] = c
	}
	return out
}

func TestListAllFollowsPagination(t *testing.T) {
	for _, tc := range []struct {
		tools, pageSize, wantPages int
	}{
		{tools: 7, pageSize: 2, wantPages: 4},
		{tools: 6, pageSize: 3, wantPages: 2},
		{tools: 1, pageSize: 5, wantPages: 1},
		{tools: 0, pageSize: 5, wantPages: 1},
	} {
		t.Run(fmt.Sprintf("%d_tools_by_%d", tc.tools, tc.pageSize), func(t *testing.T) {
			var ts []*mcp.Tool
			for i := range tc.tools {
				ts = append(ts, tool(fmt.Sprintf("tool_%02d", i), "Does thing number "+fmt.Sprint(i)+"."))
			}
			srv := newServer(tc.pageSize, ts...)
			if tc.tools == 0 {
				srv = mcp.NewServer(&mcp.Implementation{Name: "empty"}, &mcp.ServerOptions{PageSize: tc.pageSize, Capabilities: &mcp.ServerCapabilities{Tools: &mcp.ToolCapabilities{}}})
			}
			got, pages, err := mcpimport.ListAll(context.Background(), serve(t, srv))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != tc.tools || pages != tc.wantPages {
				t.Fatalf("got %d tools in %d pages, want %d in %d", len(got), pages, tc.tools, tc.wantPages)
			}
		})
	}
}

func TestToCardMapsTheTool(t *testing.T) {
	ro, destr := true, false
	tl := &mcp.Tool{
		Name:        "read_file",
		Title:       "Read a file",
		Description: "Read a file\u200b from the workspace. Returns its text; binary files are refused.\n\nLong details here.",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}},
		OutputSchema: map[string]any{"type": "object", "properties": map[string]any{
			"text": map[string]any{"type": "string"}}},
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: ro, DestructiveHint: &destr},
	}
	c, err := mcpimport.ToCard("acme", "files", tl)
	if err != nil {
		t.Fatal(err)
	}
	if c.Kind != cards.KindMCPTool || c.Summary != "Read a file from the workspace." {
		t.Fatalf("kind %q summary %q", c.Kind, c.Summary)
	}
	if !strings.HasPrefix(c.Description, "Read a file from the workspace. Returns its text") || !strings.Contains(c.Description, "Long details") {
		t.Fatalf("description %q", c.Description)
	}
	if string(c.InputSchema) != `{"properties":{"path":{"type":"string"}},"type":"object"}` || len(c.OutputSchema) == 0 {
		t.Fatalf("schemas %s %s", c.InputSchema, c.OutputSchema)
	}
	a := c.Annotations
	if a.ReadOnly == nil || !*a.ReadOnly || a.Destructive == nil || *a.Destructive || a.OpenWorld != nil {
		t.Fatalf("annotations %+v", a)
	}
	if len(c.Aliases) != 1 || c.Aliases[0] != "Read a file" {
		t.Fatalf("aliases %v", c.Aliases)
	}
}

func TestSummary(t *testing.T) {
	long := strings.Repeat("word ", 200)
	for _, tc := range []struct{ in, want string }{
		{"Get the weather. Uses the API.", "Get the weather."},
		{"Find files, e.g. logs. Then more.", "Find files, e.g. logs."},
		{"No full stop here", "No full stop here"},
		{"Line one\nstill one. Two.", "Line one still one."},
		{"Version 1.2 is supported! Yes.", "Version 1.2 is supported!"},
		{"", ""},
	} {
		if got := mcpimport.Summary(tc.in); got != tc.want {
			t.Errorf("Summary(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := mcpimport.Summary(long); len([]rune(got)) > cards.MaxSummaryLen || !strings.HasSuffix(got, "…") {
		t.Errorf("long summary: %d code points, %q…", len([]rune(got)), got[:20])
	}
}

func TestToCardsSkipsInvalidNames(t *testing.T) {
	got, skipped := mcpimport.ToCards("acme", "files", []*mcp.Tool{
		tool("ok_tool", "Fine."),
		tool("has space", "Bad name."),
		tool("cardex__search_tools", "Reserved."),
		tool(strings.Repeat("x", 129), "Too long."),
		tool("call_tool", "Impersonates cardex's own."),
	})
	if len(got) != 1 || got[0].Name != "ok_tool" {
		t.Fatalf("imported %v", got)
	}
	if len(skipped) != 4 || skipped[3].Name != "call_tool" || !strings.Contains(skipped[3].Reason, "reserved") {
		t.Fatalf("skipped %v", skipped)
	}
	// A server named like cardex's own is refused whole.
	if got, skipped := mcpimport.ToCards("acme", "cardex__x", []*mcp.Tool{tool("ok_tool", "Fine.")}); len(got) != 0 || len(skipped) != 1 {
		t.Fatalf("server cardex__x: imported %v, skipped %v", got, skipped)
	}
}

// TestReimport is the lifecycle: a paginated first import, a server
// that changes its tools between imports (one changed, one new, one gone),
// a dry run that writes nothing, and an idempotent re-run.
func TestReimport(t *testing.T) {
	st := openStore(t)
	srv := newServer(2, tool("read_file", "Read a file."), tool("write_file", "Write a file."),
		tool("list_dir", "List a directory."), tool("stat", "Show file metadata."), tool("delete_file", "Delete a file."))
	cs := serve(t, srv)

	plan, err := importOnce(t, cs, st, false)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Count(catalogsync.Create) != 5 || len(listAll(t, st)) != 5 {
		t.Fatalf("first import: %d created, %d stored", plan.Count(catalogsync.Create), len(listAll(t, st)))
	}
	if c := listAll(t, st)["read_file"]; len(c.RequiredScopes) != 1 || c.RequiredScopes[0] != "files:read" {
		t.Fatalf("default scopes not applied: %v", c.RequiredScopes)
	}

	// Same server again: nothing changes.
	plan, err = importOnce(t, cs, st, false)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Count(catalogsync.Unchanged) != 5 || len(plan.Writes()) != 0 {
		t.Fatalf("re-import of the same tools: %+v", plan.Changes)
	}
	before := listAll(t, st)

	// The server changes: read_file's description, new copy_file, delete_file gone.
	srv.AddTool(tool("read_file", "Read a text file from the workspace."), noop)
	srv.AddTool(tool("copy_file", "Copy a file."), noop)
	srv.RemoveTools("delete_file")

	plan, err = importOnce(t, cs, st, true)
	if err != nil {
		t.Fatal(err)
	}
	want := map[catalogsync.Action]int{catalogsync.Create: 1, catalogsync.Update: 1, catalogsync.Revoke: 1, catalogsync.Unchanged: 3}
	for a, n := range want {
		if plan.Count(a) != n {
			t.Fatalf("dry run: %d %s, want %d (%+v)", plan.Count(a), a, n, plan.Changes)
		}
	}
	if after := listAll(t, st); len(after) != 5 || after["read_file"].Version != before["read_file"].Version {
		t.Fatal("the dry run wrote")
	}

	if _, err := importOnce(t, cs, st, false); err != nil {
		t.Fatal(err)
	}
	after := listAll(t, st)
	if len(after) != 6 {
		t.Fatalf("%d cards, want 6 (nothing deleted)", len(after))
	}
	if c := after["delete_file"]; c.Status != cards.StatusRevoked {
		t.Fatalf("vanished tool: status %q, want revoked", c.Status)
	}
	if c := after["read_file"]; c.Summary != "Read a text file from the workspace." || c.Version != before["read_file"].Version+1 {
		t.Fatalf("changed tool: %q v%d", c.Summary, c.Version)
	}
	if c := after["copy_file"]; c.Status != cards.StatusActive || c.Version != 1 {
		t.Fatalf("new tool: %+v", c)
	}

	// Idempotent: the same again changes nothing, and the revoked card stays revoked.
	plan, err = importOnce(t, cs, st, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Writes()) != 0 {
		t.Fatalf("second identical import writes %+v", plan.Writes())
	}

	// A vanished tool that comes back stays revoked unless reactivation is asked for.
	srv.AddTool(tool("delete_file", "Delete a file."), noop)
	plan, err = importOnce(t, cs, st, false)
	if err != nil {
		t.Fatal(err)
	}
	if plan.Count(catalogsync.KeptRevoked) != 1 || listAll(t, st)["delete_file"].Status != cards.StatusRevoked {
		t.Fatalf("returning tool: %+v", plan.Changes)
	}
}

// TestFailureMidListingChangesNothing: a server that fails on its second
// tools/list page must leave the catalogue exactly as it was; in particular
// the tools of the missing pages are not revoked.
func TestFailureMidListingChangesNothing(t *testing.T) {
	st := openStore(t)
	tools := []*mcp.Tool{tool("a_tool", "A."), tool("b_tool", "B."), tool("c_tool", "C."), tool("d_tool", "D.")}
	if _, err := importOnce(t, serve(t, newServer(2, tools...)), st, false); err != nil {
		t.Fatal(err)
	}
	before := listAll(t, st)
	seqBefore, _ := st.Seq(context.Background())

	failing := newServer(2, append(tools, tool("e_tool", "E."))...)
	failing.AddReceivingMiddleware(func(next mcp.MethodHandler) mcp.MethodHandler {
		return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
			if method == "tools/list" {
				if p, ok := req.GetParams().(*mcp.ListToolsParams); ok && p.Cursor != "" {
					return nil, errors.New("backend exploded")
				}
			}
			return next(ctx, method, req)
		}
	})
	_, err := importOnce(t, serve(t, failing), st, false)
	if err == nil || !strings.Contains(err.Error(), "page 2") {
		t.Fatalf("err = %v, want a failure on page 2", err)
	}
	seqAfter, _ := st.Seq(context.Background())
	after := listAll(t, st)
	if seqAfter != seqBefore || len(after) != len(before) {
		t.Fatalf("the catalogue changed: seq %d → %d", seqBefore, seqAfter)
	}
	for name, c := range after {
		if c.Status != cards.StatusActive || c.Version != before[name].Version {
			t.Fatalf("%s changed: %+v", name, c)
		}
	}
}

// TestSchemaRoundTrip checks that a schema survives import byte-for-byte as
// canonical JSON.
func TestSchemaRoundTrip(t *testing.T) {
	raw := json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","maxLength":200}},"required":["q"]}`)
	var m map[string]any
	_ = json.Unmarshal(raw, &m)
	c, err := mcpimport.ToCard("acme", "files", &mcp.Tool{Name: "find", Description: "Find.", InputSchema: m})
	if err != nil {
		t.Fatal(err)
	}
	want, _ := cards.CanonicalJSON(raw)
	if string(c.InputSchema) != string(want) {
		t.Fatalf("%s != %s", c.InputSchema, want)
	}
}

// TestServerInfoFromInitialize: a real SDK server's initialize answer
// (serverInfo and instructions) becomes the server entry; re-import keeps
// it unchanged, a changed answer updates it, and a field the server leaves
// empty keeps what a platform team wrote.
func TestServerInfoFromInitialize(t *testing.T) {
	ctx := context.Background()
	connect := func(impl *mcp.Implementation, instructions string) *mcp.ClientSession {
		s := mcp.NewServer(impl, &mcp.ServerOptions{Instructions: instructions})
		s.AddTool(tool("read_file", "Read a file."), noop)
		return serve(t, s)
	}
	cs := connect(&mcp.Implementation{Name: "secure-filesystem-server", Title: "Filesystem\u200b", Version: "2.1.0",
		Description: "Files under the allowed directories."}, "Use list_directory\x07 before read_file.\n\nPaths are absolute.")
	si, ok := mcpimport.ServerInfo("acme", "files", cs.InitializeResult())
	want := cards.ServerInfo{Tenant: "acme", Name: "files", Title: "Filesystem",
		Description: "Files under the allowed directories. Use list_directory before read_file. Paths are absolute."}
	if !ok || si != want {
		t.Fatalf("ServerInfo = %+v, %v; want %+v", si, ok, want)
	}
	// No title: the name stands in. Long instructions are cut.
	cs = connect(&mcp.Implementation{Name: "12306-mcp", Version: "1"}, strings.Repeat("word ", cards.MaxDescriptionLen))
	si2, ok := mcpimport.ServerInfo("acme", "trains", cs.InitializeResult())
	if !ok || si2.Title != "12306-mcp" || len([]rune(si2.Description)) > cards.MaxDescriptionLen || !strings.HasSuffix(si2.Description, "…") {
		t.Errorf("ServerInfo without a title = %q / %d characters", si2.Title, len([]rune(si2.Description)))
	}
	if _, ok := mcpimport.ServerInfo("acme", "x", nil); ok {
		t.Error("no initialize answer made a server entry")
	}

	st := openStore(t)
	cat := catalogsync.StoreCatalog{Store: st}
	apply := func(si cards.ServerInfo, wantAction catalogsync.Action, wantFields ...string) {
		t.Helper()
		ch, err := catalogsync.PlanServer(ctx, cat, si)
		if err != nil {
			t.Fatal(err)
		}
		if ch.Action != wantAction || !slices.Equal(ch.Fields, wantFields) {
			t.Fatalf("plan = %s %v, want %s %v", ch.Action, ch.Fields, wantAction, wantFields)
		}
		if err := catalogsync.ApplyServer(ctx, cat, ch); err != nil {
			t.Fatal(err)
		}
	}
	apply(si, catalogsync.Create)
	apply(si, catalogsync.Unchanged)
	changed := si
	changed.Description = "Only the files under /srv."
	apply(changed, catalogsync.Update, "description")
	// A server without instructions or description leaves the stored text.
	titleOnly := cards.ServerInfo{Tenant: "acme", Name: "files", Title: "Filesystem v2"}
	apply(titleOnly, catalogsync.Update, "title")
	got, err := st.GetServer(ctx, "acme", "files")
	if err != nil || got.Title != "Filesystem v2" || got.Description != "Only the files under /srv." || got.Version != 3 {
		t.Errorf("stored entry = %+v, %v", got, err)
	}
	// A concurrent change between plan and apply conflicts.
	ch, _ := catalogsync.PlanServer(ctx, cat, cards.ServerInfo{Tenant: "acme", Name: "files", Title: "A"})
	if _, err := st.PutServers(ctx, []cards.ServerInfo{{Tenant: "acme", Name: "files", Title: "B"}}); err != nil {
		t.Fatal(err)
	}
	if err := catalogsync.ApplyServer(ctx, cat, ch); !errors.Is(err, cards.ErrConflict) || !strings.Contains(err.Error(), "cards are written") {
		t.Errorf("apply after a concurrent change = %v, want a conflict that says the cards are written", err)
	}
}
