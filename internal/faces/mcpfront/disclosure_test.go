package mcpfront_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/access/tokens"
	"github.com/seed0cff8200/cardex/internal/execution/upstream"
	"github.com/seed0cff8200/cardex/internal/faces/mcpfront"
)

const (
	pinnedToken = "pinned-token-0123456789"
	fullToken   = "full-token-0123456789ab"
	legacy      = "2025-11-25" // a protocol version with sessions
)

// withDisclosure adds a progressive token with pins and a full-mode token,
// both of acme holding files:read, and sets the full-mode page size.
func withDisclosure(pageSize int) option {
	return func(f *tokens.File, c *mcpfront.Config) {
		f.Tokens = append(f.Tokens,
			tokens.Entry{Token: pinnedToken, Tenant: "acme", Subject: "pinned-agent", Scopes: []string{"files:read"},
				AlwaysLoad: []string{"files/read_file", "files/delete_file", "files/old_tool", "disk/stat", "billing/get_invoice"}},
			tokens.Entry{Token: fullToken, Tenant: "acme", Subject: "small-agent", Scopes: []string{"files:read"}, Disclosure: tokens.Full})
		c.PageSize = pageSize
	}
}

func stateless(_ *tokens.File, c *mcpfront.Config) { c.Stateless = true }

func connectWith(t *testing.T, url, token string, opts *mcp.ClientOptions, version string) *mcp.ClientSession {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token}}, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, opts).Connect(context.Background(), tr,
		&mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// listAll reads tools/list to the last page and returns the names and the
// number of pages.
func listAll(t *testing.T, cs *mcp.ClientSession) ([]string, map[string]*mcp.Tool, int) {
	t.Helper()
	var names []string
	defs := map[string]*mcp.Tool{}
	pages := 0
	params := &mcp.ListToolsParams{}
	for {
		res, err := cs.ListTools(context.Background(), params)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, tl := range res.Tools {
			names = append(names, tl.Name)
			defs[tl.Name] = tl
		}
		if res.NextCursor == "" {
			return names, defs, pages
		}
		params.Cursor = res.NextCursor
	}
}

func auditLines(t *testing.T, path string) []upstream.AuditEntry {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []upstream.AuditEntry
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var a upstream.AuditEntry
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

func revoke(t *testing.T, e *env, server, name string) {
	t.Helper()
	ctx := context.Background()
	c, err := e.store.Get(ctx, cards.Key{Tenant: "acme", Server: server, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	c.Status = cards.StatusRevoked
	putAndSync(t, e, c)
}

func putAndSync(t *testing.T, e *env, cs ...cards.Card) {
	t.Helper()
	ctx := context.Background()
	if _, err := e.store.Put(ctx, cs); err != nil {
		t.Fatal(err)
	}
	if err := e.ret.Sync(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestPinsListedAndCallable: in progressive mode tools/list is the three
// meta-tools, then the pins the token may use, with their approved
// definitions; a pin is called by its listed name with no search first, and
// the call is authorized, forwarded and audited exactly like call_tool.
func TestPinsListedAndCallable(t *testing.T) {
	e := setup(t, false, withDisclosure(2))
	long := strings.Repeat("é", 700)
	putAndSync(t, e, cards.Card{Tenant: "acme", Server: "files", Name: "read_file_v0", Kind: cards.KindMCPTool,
		Summary: "An older file reader.", Description: long, RequiredScopes: []string{"files:read"}})
	cs := connectWith(t, e.url, pinnedToken, nil, legacy)

	names, defs, pages := listAll(t, cs)
	want := []string{"search_tools", "describe_tool", "call_tool", "files__read_file", "disk__stat"}
	if !slices.Equal(names, want) || pages != 1 {
		// Not delete_file (outside the scopes), old_tool (revoked) or
		// get_invoice (a REST card: nothing to forward it to).
		t.Fatalf("tools/list = %v in %d pages, want %v in one", names, pages, want)
	}
	card, err := e.store.Get(context.Background(), cards.Key{Tenant: "acme", Server: "files", Name: "read_file"})
	if err != nil {
		t.Fatal(err)
	}
	rf := defs["files__read_file"]
	in, _ := json.Marshal(rf.InputSchema)
	out, _ := json.Marshal(rf.OutputSchema)
	if rf.Description != card.Description || !bytes.Equal(in, card.InputSchema) || !bytes.Equal(out, card.OutputSchema) ||
		rf.Annotations == nil || !rf.Annotations.ReadOnlyHint {
		t.Fatalf("files__read_file listed as %+v (input %s, output %s); the card: %+v", rf, in, out, card)
	}
	if in, _ := json.Marshal(defs["disk__stat"].InputSchema); string(in) != `{"type":"object"}` {
		t.Fatalf("a card without an input schema is listed with %s", in)
	}

	res, text := call(t, cs, "files__read_file", map[string]any{"path": "a.txt"})
	if res.IsError || text != "hello from a.txt" || e.up.count("read_file") != 1 {
		t.Fatalf("direct call: %v %q (%d upstream calls)", res.IsError, text, e.up.count("read_file"))
	}
	sc, _ := json.Marshal(res.StructuredContent)
	if string(sc) != `{"bytes":11,"text":"hello from a.txt"}` {
		t.Fatalf("structured content %s", sc)
	}
	// The bare name works too when it is unambiguous; an ambiguous one names
	// the qualified names to use.
	if res, text := call(t, cs, "read_file", map[string]any{"path": "b.txt"}); res.IsError || text != "hello from b.txt" {
		t.Fatalf("bare direct call: %q", text)
	}
	if res, text := call(t, cs, "stat", map[string]any{"path": "a"}); !res.IsError || !strings.Contains(text, "one of disk__stat, files__stat") || e.up.count("stat") != 0 {
		t.Fatalf("ambiguous direct call: %q", text)
	}
	// Arguments are checked against the card's schema before anything is forwarded.
	if res, text := call(t, cs, "files__read_file", map[string]any{"path": 7}); !res.IsError || !strings.Contains(text, "arguments do not match the input schema of files/read_file") {
		t.Fatalf("invalid arguments: %q", text)
	}
	if e.up.count("read_file") != 2 {
		t.Fatalf("%d upstream calls, want 2", e.up.count("read_file"))
	}

	lines := auditLines(t, e.auditPath)
	if len(lines) != 4 {
		t.Fatalf("%d audit lines, want 4", len(lines))
	}
	for i, w := range []struct{ tool, outcome string }{
		{"read_file", upstream.OutcomeOK}, {"read_file", upstream.OutcomeOK},
		{"stat", upstream.OutcomeDeniedAmbiguous}, {"read_file", upstream.OutcomeDeniedArguments},
	} {
		if g := lines[i]; g.Via != "mcp_direct" || g.Disclosure != "progressive" || g.Tool != w.tool || g.Outcome != w.outcome {
			t.Fatalf("audit line %d: %+v, want %+v", i, g, w)
		}
	}

	// A pinned card's description is cut to 500 code points; its schemas never.
	e2 := setup(t, false, func(f *tokens.File, c *mcpfront.Config) {
		f.Tokens = append(f.Tokens, tokens.Entry{Token: pinnedToken, Tenant: "acme", Subject: "p", Scopes: []string{"files:read"},
			AlwaysLoad: []string{"files/read_file_v0"}})
	})
	putAndSync(t, e2, cards.Card{Tenant: "acme", Server: "files", Name: "read_file_v0", Kind: cards.KindMCPTool,
		Summary: "An older file reader.", Description: long, RequiredScopes: []string{"files:read"}})
	_, defs, _ = listAll(t, connectWith(t, e2.url, pinnedToken, nil, legacy))
	d := defs["files__read_file_v0"].Description
	if n := len([]rune(d)); n != mcpfront.MaxDescriptionLen || !strings.HasSuffix(d, "…") {
		t.Fatalf("description of %d code points: %.40q…", n, d)
	}
}

// TestFullModeListsExactlyTheTokensTools: in full mode tools/list is every
// tool the token may use and can call, by qualified name, page by page; the
// meta-tools are not listed but still answer.
func TestFullModeListsExactlyTheTokensTools(t *testing.T) {
	e := setup(t, false, withDisclosure(2))
	cs := connectWith(t, e.url, fullToken, nil, legacy)
	names, defs, pages := listAll(t, cs)
	want := []string{"disk__stat", "files__broken", "files__read_file", "files__refuses", "files__slow", "files__stat"}
	if !slices.Equal(names, want) || pages != 3 {
		t.Fatalf("tools/list = %v in %d pages, want %v in 3", names, pages, want)
	}
	if defs["files__stat"].Description != "Show a file's size and times." {
		t.Fatalf("files__stat: %+v", defs["files__stat"])
	}
	// The SDK's own iterator follows the cursor to the same list.
	var iterated []string
	for tl, err := range cs.Tools(context.Background(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		iterated = append(iterated, tl.Name)
	}
	if !slices.Equal(iterated, want) {
		t.Fatalf("Tools() = %v", iterated)
	}
	// A cursor cardex did not make is invalid params.
	_, err := cs.ListTools(context.Background(), &mcp.ListToolsParams{Cursor: "bm90LWEtY3Vyc29y"})
	var rpcErr *jsonrpc.Error
	if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams || !strings.Contains(rpcErr.Message, "cursor") {
		t.Fatalf("foreign cursor: %v", err)
	}
	// Every listed tool is callable as listed; meta-tools still answer.
	if res, text := call(t, cs, "files__stat", map[string]any{"path": "a"}); res.IsError || text != "size 11" {
		t.Fatalf("files__stat: %q", text)
	}
	if res, text := call(t, cs, "search_tools", map[string]any{"query": "read a file"}); res.IsError || !strings.Contains(text, "read_file") {
		t.Fatalf("search_tools in full mode: %q", text)
	}
	if lines := auditLines(t, e.auditPath); len(lines) != 1 || lines[0].Disclosure != "full" || lines[0].Via != "mcp_direct" {
		t.Fatalf("audit: %+v", lines)
	}

	// The admin's full list holds what the admin may use: delete_file too.
	e2 := setup(t, false, func(f *tokens.File, _ *mcpfront.Config) {
		f.Tokens = append(f.Tokens, tokens.Entry{Token: fullToken, Tenant: "acme", Subject: "ops", Scopes: []string{"*"}, Disclosure: tokens.Full})
	})
	names, _, pages = listAll(t, connectWith(t, e2.url, fullToken, nil, legacy))
	want = []string{"disk__stat", "files__broken", "files__delete_file", "files__read_file", "files__refuses", "files__slow", "files__stat"}
	if !slices.Equal(names, want) || pages != 1 {
		t.Fatalf("admin's tools/list = %v in %d pages, want %v", names, pages, want)
	}
}

// TestDirectCallOutsideScopes: tools/call of a tool the token may not use is
// the SDK's unknown-tool error, word for word the one for a tool that never
// existed, and nothing is forwarded. Listing widens nothing: the admin may
// call what it was not shown.
func TestDirectCallOutsideScopes(t *testing.T) {
	e := setup(t, false, withDisclosure(0))
	for _, token := range []string{supportToken, pinnedToken, fullToken} {
		cs := connectWith(t, e.url, token, nil, legacy)
		for _, name := range []string{"files__delete_file", "delete_file", "files__old_tool", "old_tool", "billing__nope", "files__format_disk", "cardex__call_tool"} {
			_, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: map[string]any{"path": "x"}})
			var rpcErr *jsonrpc.Error
			if !errors.As(err, &rpcErr) || rpcErr.Code != jsonrpc.CodeInvalidParams || rpcErr.Message != `unknown tool "`+name+`"` {
				t.Fatalf("%s: tools/call %s: %v, want invalid params: unknown tool", token[:6], name, err)
			}
		}
	}
	if n := e.up.total(); n != 0 {
		t.Fatalf("%d calls reached the upstream", n)
	}
	for _, a := range auditLines(t, e.auditPath) {
		if a.Outcome != upstream.OutcomeDeniedUnknown || a.Via != "mcp_direct" || a.Server != "" {
			t.Fatalf("audit: %+v", a)
		}
	}
	admin := connectWith(t, e.url, adminToken, nil, legacy)
	names, _, _ := listAll(t, admin)
	if slices.Contains(names, "files__delete_file") {
		t.Fatalf("the admin's progressive list holds a tool it did not pin: %v", names)
	}
	if res, text := call(t, admin, "files__delete_file", map[string]any{"path": "x"}); res.IsError || text != "deleted" || e.up.count("delete_file") != 1 {
		t.Fatalf("admin's direct call: %q", text)
	}
}

// TestQualifiedNamesInMetaTools: describe_tool and call_tool take the listed
// names too, and describe_tool says which name to call a tool by.
func TestQualifiedNamesInMetaTools(t *testing.T) {
	e := setup(t, false)
	cs := mustConnect(t, e.url, supportToken)
	_, text := call(t, cs, "describe_tool", map[string]any{"name": "files__stat"})
	var d mcpfront.Described
	if err := json.Unmarshal([]byte(text), &d); err != nil || d.Server != "files" || d.Name != "stat" || d.QualifiedName != "files__stat" {
		t.Fatalf("describe files__stat: %v %s", err, text)
	}
	if res, text := call(t, cs, "call_tool", map[string]any{"name": "files__stat", "arguments": map[string]any{"path": "a"}}); res.IsError || text != "size 11" {
		t.Fatalf("call_tool files__stat: %q", text)
	}
	if res, text := call(t, cs, "call_tool", map[string]any{"name": "files__stat", "server": "files", "arguments": map[string]any{"path": "a"}}); res.IsError || text != "size 11" {
		t.Fatalf("call_tool files__stat with its server: %q", text)
	}
	for _, name := range []string{"files__delete_file", "files__old_tool", "disk__read_file"} {
		if res, text := call(t, cs, "describe_tool", map[string]any{"name": name}); !res.IsError || text != `unknown tool "`+name+`"` {
			t.Fatalf("describe %s: %q", name, text)
		}
	}
	if e.up.count("stat") != 2 || e.up.count("delete_file") != 0 {
		t.Fatalf("upstream calls: stat %d, delete_file %d", e.up.count("stat"), e.up.count("delete_file"))
	}
}

// listChanged counts notifications/tools/list_changed.
type listChanged chan struct{}

func (l listChanged) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
		select {
		case l <- struct{}{}:
		default:
		}
	}}
}

func (l listChanged) wait(t *testing.T, who string) {
	t.Helper()
	select {
	case <-l:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no notifications/tools/list_changed", who)
	}
}

// TestListChangedInSessions: a client holding a session is told when its
// token's list changes (a pin revoked; a card added in full mode), and only
// then.
func TestListChangedInSessions(t *testing.T) {
	e := setup(t, false, withDisclosure(0))
	pinned, full, support := make(listChanged, 8), make(listChanged, 8), make(listChanged, 8)
	pcs := connectWith(t, e.url, pinnedToken, pinned.options(), legacy)
	fcs := connectWith(t, e.url, fullToken, full.options(), legacy)
	scs := connectWith(t, e.url, supportToken, support.options(), legacy)
	if pcs.ID() == "" || fcs.ID() == "" {
		t.Fatal("no session")
	}
	names, _, _ := listAll(t, pcs)
	if !slices.Contains(names, "files__read_file") {
		t.Fatalf("pin not listed: %v", names)
	}

	revoke(t, e, "files", "read_file")
	pinned.wait(t, "pinned token")
	full.wait(t, "full-mode token")
	if names, _, _ := listAll(t, pcs); slices.Contains(names, "files__read_file") {
		t.Fatalf("revoked pin still listed: %v", names)
	}
	if names, _, _ := listAll(t, fcs); slices.Contains(names, "files__read_file") {
		t.Fatalf("revoked card still listed in full mode: %v", names)
	}

	putAndSync(t, e, cards.Card{Tenant: "acme", Server: "files", Name: "touch", Kind: cards.KindMCPTool,
		Summary: "Create an empty file.", RequiredScopes: []string{"files:read"}})
	full.wait(t, "full-mode token, card added")
	if names, _, _ := listAll(t, fcs); !slices.Contains(names, "files__touch") {
		t.Fatalf("added card not listed in full mode: %v", names)
	}
	// A card beyond the tokens' scopes changes no list: no notification.
	putAndSync(t, e, cards.Card{Tenant: "acme", Server: "files", Name: "chmod", Kind: cards.KindMCPTool,
		Summary: "Change a file's mode.", RequiredScopes: []string{"files:admin"}})
	putAndSync(t, e, cards.Card{Tenant: "acme", Server: "files", Name: "touch", Kind: cards.KindMCPTool,
		Summary: "Create an empty file, or update its time.", RequiredScopes: []string{"files:read"}})
	full.wait(t, "full-mode token, card changed")
	select {
	case <-pinned:
		t.Fatal("the pinned token was told of a change that is not in its list")
	case <-support:
		t.Fatal("a token whose list is the meta-tools was told of a change")
	default:
	}
	if scs.ID() == "" {
		t.Fatal("support client has no session")
	}
}

// TestStateless: without sessions, the next tools/list shows the change, and
// a client of protocol 2026-07-28 that subscribes (subscriptions/listen) is
// told too.
func TestStateless(t *testing.T) {
	e := setup(t, false, withDisclosure(0), stateless)
	old := connectWith(t, e.url, pinnedToken, nil, legacy)
	if old.ID() != "" {
		t.Fatalf("a session in stateless mode: %q", old.ID())
	}
	modern := make(listChanged, 8)
	mcs := connectWith(t, e.url, pinnedToken, modern.options(), "")
	for _, cs := range []*mcp.ClientSession{old, mcs} {
		if names, _, _ := listAll(t, cs); !slices.Contains(names, "files__read_file") {
			t.Fatalf("pin not listed: %v", names)
		}
	}
	revoke(t, e, "files", "read_file")
	if names, _, _ := listAll(t, old); slices.Contains(names, "files__read_file") {
		t.Fatalf("the next tools/list still lists the revoked pin: %v", names)
	}
	modern.wait(t, "subscribed client")
	if names, _, _ := listAll(t, mcs); slices.Contains(names, "files__read_file") {
		t.Fatalf("the subscribed client still lists the revoked pin: %v", names)
	}
	if res, text := call(t, old, "files__stat", map[string]any{"path": "a"}); res.IsError || text != "size 11" {
		t.Fatalf("direct call without a session: %q", text)
	}
}

// TestSessionBelongsToItsToken: a session opened with one token cannot be
// used with another, nor without one.
func TestSessionBelongsToItsToken(t *testing.T) {
	e := setup(t, true, withDisclosure(0))
	pcs := connectWith(t, e.url, pinnedToken, nil, legacy)
	acs := connectWith(t, e.url, "", nil, legacy)
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`
	for _, tc := range []struct {
		name, session, token string
		want                 int
	}{
		{"own session", pcs.ID(), pinnedToken, http.StatusOK},
		{"another token", pcs.ID(), supportToken, http.StatusNotFound},
		{"no token", pcs.ID(), "", http.StatusNotFound},
		{"anonymous session with a token", acs.ID(), supportToken, http.StatusNotFound},
		{"anonymous session", acs.ID(), "", http.StatusOK},
	} {
		req, _ := http.NewRequest(http.MethodPost, e.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", tc.session)
		req.Header.Set("Mcp-Protocol-Version", legacy)
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s: status %d, want %d", tc.name, resp.StatusCode, tc.want)
		}
	}
}

// TestDrain: Drain lets a call in flight finish and be answered, refuses
// new requests and closes the sessions, whose streams would otherwise keep
// an HTTP server's Shutdown waiting.
func TestDrain(t *testing.T) {
	e := setup(t, false)
	// The caller retries its session's stream as real clients do, so the
	// stream's end does not fail its call before the answer is read; the
	// listener does not, so its session's end shows at once.
	tr := &mcp.StreamableClientTransport{Endpoint: e.url, HTTPClient: &http.Client{Transport: bearer{adminToken}}}
	caller, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(context.Background(), tr,
		&mcp.ClientSessionOptions{ProtocolVersion: legacy})
	if err != nil {
		t.Fatal(err)
	}
	defer caller.Close()
	cs := connectWith(t, e.url, adminToken, nil, legacy)
	answered := make(chan string, 1)
	go func() {
		res, err := caller.CallTool(context.Background(), &mcp.CallToolParams{Name: "files__slow", Arguments: map[string]any{}})
		switch {
		case err != nil:
			answered <- "error: " + err.Error()
		case len(res.Content) > 0:
			answered <- res.Content[0].(*mcp.TextContent).Text
		default:
			answered <- "empty result"
		}
	}()
	for e.up.count("slow") == 0 {
		time.Sleep(5 * time.Millisecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e.front.Drain(ctx)
	// The answer was written before Drain closed the session: the client
	// has it (and not a closed connection), if a moment later.
	select {
	case text := <-answered:
		if !strings.Contains(text, `upstream "files" did not answer in time`) {
			t.Fatalf("the call in flight was answered with %q", text)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the call in flight was never answered")
	}
	if ctx.Err() != nil {
		t.Fatal("Drain waited for its deadline")
	}
	done := make(chan error, 1)
	go func() { done <- cs.Wait() }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the session is still open after Drain")
	}
	req, _ := http.NewRequest(http.MethodPost, e.url, strings.NewReader(`{}`))
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a request after Drain: status %d", resp.StatusCode)
	}
}
