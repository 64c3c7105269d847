package mcpfront_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/access/tokens"
	"github.com/seed0cff8200/cardex/internal/execution/gateway"
	"github.com/seed0cff8200/cardex/internal/execution/upstream"
	"github.com/seed0cff8200/cardex/internal/faces/mcpfront"
	"github.com/seed0cff8200/cardex/internal/sources/catalogsync"
	"github.com/seed0cff8200/cardex/internal/sources/mcpimport"
	"github.com/seed0cff8200/cardex/retriever"
)

const (
	supportToken = "support-token-0123456789"
	adminToken   = "admin-token-0123456789ab"
	otherToken   = "globex-token-0123456789a"
	upstreamKey  = "s3cret-upstream-key"
)

// fakeUpstream is a real SDK MCP server over streamable HTTP that counts the
// calls it receives per tool and checks that cardex sends its credential.
type fakeUpstream struct {
	mu      sync.Mutex
	calls   map[string]int
	badAuth int
	srv     *httptest.Server
}

func (u *fakeUpstream) count(name string) int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.calls[name]
}

func (u *fakeUpstream) total() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	n := 0
	for _, v := range u.calls {
		n += v
	}
	return n
}

func newUpstream(t *testing.T) *fakeUpstream {
	t.Helper()
	u := &fakeUpstream{calls: map[string]int{}}
	s := mcp.NewServer(&mcp.Implementation{Name: "files", Version: "1"}, nil)
	obj := func(props string, req ...string) json.RawMessage {
		r, _ := json.Marshal(append([]string{}, req...))
		return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(r) + `,"additionalProperties":false}`)
	}
	counted := func(name string, h mcp.ToolHandler) mcp.ToolHandler {
		return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			u.mu.Lock()
			u.calls[name]++
			u.mu.Unlock()
			return h(ctx, req)
		}
	}
	s.AddTool(&mcp.Tool{Name: "read_file", Description: "Read a text file from the workspace. Returns its content.",
		InputSchema:  obj(`"path":{"type":"string","minLength":1}`, "path"),
		OutputSchema: json.RawMessage(`{"type":"object","properties":{"text":{"type":"string"},"bytes":{"type":"integer"}}}`),
		Annotations:  &mcp.ToolAnnotations{ReadOnlyHint: true}},
		counted("read_file", func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			var a struct{ Path string }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			return &mcp.CallToolResult{
				Content:           []mcp.Content{&mcp.TextContent{Text: "hello from " + a.Path}},
				StructuredContent: map[string]any{"text": "hello from " + a.Path, "bytes": 11},
			}, nil
		}))
	s.AddTool(&mcp.Tool{Name: "delete_file", Description: "Delete a file from the workspace.", InputSchema: obj(`"path":{"type":"string"}`, "path")},
		counted("delete_file", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deleted"}}}, nil
		}))
	s.AddTool(&mcp.Tool{Name: "old_tool", Description: "An old tool that was revoked.", InputSchema: obj(``)},
		counted("old_tool", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{}, nil
		}))
	s.AddTool(&mcp.Tool{Name: "stat", Description: "Show a file's size and times.", InputSchema: obj(`"path":{"type":"string"}`, "path")},
		counted("stat", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "size 11"}}}, nil
		}))
	s.AddTool(&mcp.Tool{Name: "broken", Description: "Always fails inside the server.", InputSchema: obj(``)},
		counted("broken", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "disk on fire"}
		}))
	s.AddTool(&mcp.Tool{Name: "refuses", Description: "Returns a tool error.", InputSchema: obj(``)},
		counted("refuses", func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "quota exceeded"}}}, nil
		}))
	s.AddTool(&mcp.Tool{Name: "slow", Description: "Takes longer than cardex waits.", InputSchema: obj(``)},
		counted("slow", func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			select {
			case <-time.After(5 * time.Second):
			case <-ctx.Done():
			}
			return &mcp.CallToolResult{}, nil
		}))
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, nil)
	u.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Upstream-Key") != upstreamKey {
			u.mu.Lock()
			u.badAuth++
			u.mu.Unlock()
			http.Error(w, "no key", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(u.srv.Close)
	return u
}

type env struct {
	up        *fakeUpstream
	url       string
	auditPath string
	store     cards.Store
	ret       *retriever.Retriever
	front     *mcpfront.Front
}

// option changes setup's token file or front configuration.
type option func(*tokens.File, *mcpfront.Config)

// setup imports the upstream's tools as cards (with the real importer),
// adjusts scopes and statuses like a platform team would, and serves /mcp on
// loopback in front of them.
func setup(t *testing.T, anonymous bool, opts ...option) *env {
	t.Helper()
	ctx := context.Background()
	t.Setenv("CARDEX_TEST_UPSTREAM_KEY", upstreamKey)
	up := newUpstream(t)
	ucfg := upstream.Config{Upstreams: []upstream.Upstream{{
		Server: "files", URL: up.srv.URL, Headers: map[string]string{"X-Upstream-Key": "${CARDEX_TEST_UPSTREAM_KEY}"},
		Timeout: upstream.Duration(300 * time.Millisecond),
	}}}

	dir := t.TempDir()
	st, err := embedded.Open(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })

	// Import with the real importer through the registered upstream.
	tr, err := ucfg.Upstreams[0].Transport()
	if err != nil {
		t.Fatal(err)
	}
	cs, err := upstream.NewClient("test").Connect(ctx, tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	tools, _, err := mcpimport.ListAll(ctx, cs)
	cs.Close()
	if err != nil {
		t.Fatal(err)
	}
	imported, skipped := mcpimport.ToCards("acme", "files", tools)
	if len(skipped) != 0 {
		t.Fatalf("skipped %v", skipped)
	}
	plan, err := catalogsync.Diff("acme", "files", nil, imported, catalogsync.Options{Kind: cards.KindMCPTool, Scopes: []string{"files:read"}})
	if err != nil {
		t.Fatal(err)
	}
	cat := catalogsync.StoreCatalog{Store: st}
	if err := catalogsync.Apply(ctx, cat, plan); err != nil {
		t.Fatal(err)
	}
	// Curate: delete_file needs files:admin; old_tool is revoked; a second
	// server also has a "stat" tool (ambiguous); a REST card is not callable.
	var edits []cards.Card
	for _, c := range plan.Writes() {
		switch c.Name {
		case "delete_file":
			c.RequiredScopes = []string{"files:admin"}
			edits = append(edits, c)
		case "old_tool":
			c.Status = cards.StatusRevoked
			edits = append(edits, c)
		}
	}
	edits = append(edits,
		cards.Card{Tenant: "acme", Server: "disk", Name: "stat", Kind: cards.KindMCPTool, Summary: "Show disk usage."},
		cards.Card{Tenant: "acme", Server: "billing", Name: "get_invoice", Kind: cards.KindRESTOperation, Summary: "Fetch an invoice by number."},
		cards.Card{Tenant: "globex", Server: "files", Name: "read_file", Kind: cards.KindMCPTool, Summary: "Globex's own file reader."})
	if _, err := st.Put(ctx, edits); err != nil {
		t.Fatal(err)
	}

	ret, err := retriever.New(ctx, st, embed.NewHashed(embed.DefaultDim), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ret.Close() })
	reg, err := upstream.NewRegistry(ucfg, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	auditPath := filepath.Join(dir, "audit.jsonl")
	audit, err := upstream.OpenAudit(auditPath, []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { audit.Close() })
	tf := tokens.File{Tokens: []tokens.Entry{
		{Token: supportToken, Tenant: "acme", Subject: "support-bot@example.com", Scopes: []string{"files:read"}},
		{Token: adminToken, Tenant: "acme", Subject: "admin", Scopes: []string{"*"}},
		{TokenSHA256: tokens.HashToken(otherToken), Tenant: "globex", Subject: "g", Scopes: []string{"*"}},
	}}
	if anonymous {
		tf.Anonymous = &tokens.Identity{Tenant: "acme", Scopes: []string{"nothing:here"}}
	}
	gw := &gateway.Gateway{Retriever: ret, Upstreams: reg, Audit: audit}
	cfg := mcpfront.Config{Gateway: gw, Version: "test"}
	for _, o := range opts {
		o(&tf, &cfg)
	}
	table, err := tokens.New(tf)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Tokens = table
	h := mcpfront.NewHandler(cfg)
	mux := http.NewServeMux()
	mux.Handle(mcpfront.Path, h)
	front := httptest.NewServer(mux)
	t.Cleanup(front.Close)
	t.Cleanup(h.Close) // first: it ends the sessions' streams, which front.Close waits for
	return &env{up: up, url: front.URL + mcpfront.Path, auditPath: auditPath, store: st, ret: ret, front: h}
}

type bearer struct{ token string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return http.DefaultTransport.RoundTrip(r)
}

func connect(t *testing.T, url, token string) (*mcp.ClientSession, error) {
	t.Helper()
	tr := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{token}}, MaxRetries: -1}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(context.Background(), tr, nil)
	if err == nil {
		t.Cleanup(func() { cs.Close() })
	}
	return cs, err
}

func mustConnect(t *testing.T, url, token string) *mcp.ClientSession {
	t.Helper()
	cs, err := connect(t, url, token)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func call(t *testing.T, cs *mcp.ClientSession, name string, args any) (*mcp.CallToolResult, string) {
	t.Helper()
	res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var text []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			text = append(text, tc.Text)
		}
	}
	return res, strings.Join(text, "\n")
}

func TestToolsListIsFixed(t *testing.T) {
	e := setup(t, false)
	want := []string{"call_tool", "describe_tool", "search_tools"}
	for _, tok := range []string{supportToken, adminToken, otherToken} {
		cs := mustConnect(t, e.url, tok)
		for range 2 { // before and after other requests
			res, err := cs.ListTools(context.Background(), nil)
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, tl := range res.Tools {
				names = append(names, tl.Name)
			}
			slices.Sort(names)
			if !slices.Equal(names, want) {
				t.Fatalf("tools/list = %v, want %v", names, want)
			}
			call(t, cs, "search_tools", map[string]any{"query": "file"})
		}
	}
}

func TestAuthentication(t *testing.T) {
	e := setup(t, false)
	for _, tc := range []struct{ name, token string }{{"no token", ""}, {"wrong token", "not-a-known-token-at-all"}} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := connect(t, e.url, tc.token); err == nil {
				t.Fatal("connected without a valid token")
			}
			req, _ := http.NewRequest(http.MethodPost, e.url, strings.NewReader(`{}`))
			if tc.token != "" {
				req.Header.Set("Authorization", "Bearer "+tc.token)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401", resp.StatusCode)
			}
		})
	}
}

func TestAnonymousWhenEnabled(t *testing.T) {
	e := setup(t, true)
	cs := mustConnect(t, e.url, "")
	res, text := call(t, cs, "search_tools", map[string]any{"query": ""})
	if res.IsError || !strings.Contains(text, `"tools":[]`) {
		// Anonymous holds no useful scope: every acme card requires one, except the two curated
		// ones without scopes (disk/stat, billing/get_invoice).
		if !strings.Contains(text, "get_invoice") {
			t.Fatalf("anonymous search: %s", text)
		}
	}
	if strings.Contains(text, "read_file") {
		t.Fatalf("anonymous sees a scoped tool: %s", text)
	}
	// A wrong token is refused even when anonymous access is on.
	if _, err := connect(t, e.url, "wrong-token-wrong-token"); err == nil {
		t.Fatal("a wrong token fell back to anonymous")
	}
}

func TestSearchDescribeCall(t *testing.T) {
	e := setup(t, false)
	cs := mustConnect(t, e.url, supportToken)

	res, text := call(t, cs, "search_tools", map[string]any{"query": "read a file from the workspace", "limit": 5})
	if res.IsError || !strings.Contains(text, `"name":"read_file","server":"files"`) {
		t.Fatalf("search: %s", text)
	}
	for _, hidden := range []string{"delete_file", "old_tool", "Globex"} {
		if strings.Contains(text, hidden) {
			t.Fatalf("search shows %s to the support caller: %s", hidden, text)
		}
	}

	res, text = call(t, cs, "describe_tool", map[string]any{"name": "read_file"})
	if res.IsError {
		t.Fatalf("describe: %s", text)
	}
	var d mcpfront.Described
	if err := json.Unmarshal([]byte(text), &d); err != nil {
		t.Fatal(err)
	}
	if d.Server != "files" || d.Kind != "mcp_tool" || !strings.Contains(string(d.InputSchema), `"path"`) || len(d.OutputSchema) == 0 {
		t.Fatalf("describe: %+v", d)
	}

	res, text = call(t, cs, "call_tool", map[string]any{"name": "read_file", "arguments": map[string]any{"path": "notes.txt"}})
	if res.IsError || text != "hello from notes.txt" {
		t.Fatalf("call: %v %s", res.IsError, text)
	}
	sc, _ := json.Marshal(res.StructuredContent)
	if string(sc) != `{"bytes":11,"text":"hello from notes.txt"}` {
		t.Fatalf("structured content %s", sc)
	}
	if e.up.count("read_file") != 1 || e.up.badAuth != 0 {
		t.Fatalf("upstream saw %d calls, %d without the key", e.up.count("read_file"), e.up.badAuth)
	}

	// An ambiguous bare name answers with the candidate servers.
	_, text = call(t, cs, "describe_tool", map[string]any{"name": "stat"})
	if !strings.Contains(text, `"servers":["disk","files"]`) {
		t.Fatalf("ambiguous describe: %s", text)
	}
	res, text = call(t, cs, "call_tool", map[string]any{"name": "stat", "arguments": map[string]any{"path": "a"}})
	if !res.IsError || !strings.Contains(text, "disk, files") || e.up.count("stat") != 0 {
		t.Fatalf("ambiguous call: %s", text)
	}
	res, text = call(t, cs, "call_tool", map[string]any{"name": "stat", "server": "files", "arguments": map[string]any{"path": "a"}})
	if res.IsError || text != "size 11" {
		t.Fatalf("call with server: %s", text)
	}
}

// TestRefusals: everything the caller may not do is refused with nothing
// forwarded to the upstream.
func TestRefusals(t *testing.T) {
	e := setup(t, false)
	cs := mustConnect(t, e.url, supportToken)
	long := strings.Repeat("a", 129)
	for _, tc := range []struct {
		name string
		tool string
		args map[string]any
		want string
	}{
		{"outside its scopes", "call_tool", map[string]any{"name": "delete_file", "arguments": map[string]any{"path": "x"}}, `unknown tool "delete_file"`},
		{"outside its scopes, server named", "call_tool", map[string]any{"name": "delete_file", "server": "files", "arguments": map[string]any{"path": "x"}}, `unknown tool "delete_file"`},
		{"revoked", "call_tool", map[string]any{"name": "old_tool", "arguments": map[string]any{}}, `unknown tool "old_tool"`},
		{"never existed", "call_tool", map[string]any{"name": "format_disk"}, `unknown tool "format_disk"`},
		{"invalid arguments: wrong type", "call_tool", map[string]any{"name": "read_file", "arguments": map[string]any{"path": 42}}, "arguments do not match the input schema of files/read_file"},
		{"invalid arguments: missing", "call_tool", map[string]any{"name": "read_file", "arguments": map[string]any{}}, "missing property 'path'"},
		{"invalid arguments: extra", "call_tool", map[string]any{"name": "read_file", "arguments": map[string]any{"path": "a", "mode": "rw"}}, "arguments do not match"},
		{"nested call_tool", "call_tool", map[string]any{"name": "call_tool", "arguments": map[string]any{"name": "read_file", "arguments": map[string]any{"path": "a"}}}, `unknown tool "call_tool"`},
		{"nested search_tools", "call_tool", map[string]any{"name": "search_tools", "arguments": map[string]any{"query": "x"}}, `unknown tool "search_tools"`},
		{"nested describe_tool", "describe_tool", map[string]any{"name": "describe_tool"}, `unknown tool "describe_tool"`},
		{"empty name", "call_tool", map[string]any{"name": ""}, `unknown tool ""`},
		{"over-long name", "call_tool", map[string]any{"name": long}, "unknown tool"},
		{"reserved prefix", "call_tool", map[string]any{"name": "cardex__search_tools"}, "unknown tool"},
		{"another tenant's tool", "describe_tool", map[string]any{"name": "read_file", "server": "nope"}, `unknown tool "read_file"`},
		{"describe outside scopes", "describe_tool", map[string]any{"name": "delete_file"}, `unknown tool "delete_file"`},
		{"describe revoked", "describe_tool", map[string]any{"name": "old_tool"}, `unknown tool "old_tool"`},
		{"not an MCP tool", "call_tool", map[string]any{"name": "get_invoice"}, "is a rest_operation card, and this server calls none"},
		{"unknown meta-tool argument", "call_tool", map[string]any{"name": "read_file", "args": map[string]any{}}, "invalid arguments for call_tool"},
		{"query too long", "search_tools", map[string]any{"query": strings.Repeat("q", 201)}, "query: is 201 characters; the limit is 200"},
		// Numbers the schema validator would read as million-digit rationals
		// are refused before it runs.
		{"huge exponents", "call_tool", map[string]any{"name": "read_file", "arguments": json.RawMessage(`{"path":[` + strings.TrimSuffix(strings.Repeat("1e999999,", 2500), ",") + `]}`)},
			"at '/path/0': the number's exponent is 999999; the limit is ±400"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, text := call(t, cs, tc.tool, tc.args)
			if !res.IsError || !strings.Contains(text, tc.want) {
				t.Fatalf("isError=%v text=%q, want an error with %q", res.IsError, text, tc.want)
			}
			if n := e.up.total(); n != 0 {
				t.Fatalf("%d calls reached the upstream", n)
			}
		})
	}
	// The over-long name is not echoed in full.
	_, text := call(t, cs, "call_tool", map[string]any{"name": long + long})
	if len(text) > 200 {
		t.Fatalf("echoed %d bytes", len(text))
	}
	// The admin may call delete_file: the refusal above was the caller's scopes.
	admin := mustConnect(t, e.url, adminToken)
	if res, text := call(t, admin, "call_tool", map[string]any{"name": "delete_file", "arguments": map[string]any{"path": "x"}}); res.IsError || text != "deleted" {
		t.Fatalf("admin call: %s", text)
	}
	// Another tenant's caller sees its own read_file, not acme's.
	g := mustConnect(t, e.url, otherToken)
	if _, text := call(t, g, "describe_tool", map[string]any{"name": "read_file"}); !strings.Contains(text, "Globex") {
		t.Fatalf("globex describe: %s", text)
	}
}

func TestUpstreamFailures(t *testing.T) {
	e := setup(t, false)
	cs := mustConnect(t, e.url, adminToken)
	for _, tc := range []struct{ tool, want string }{
		{"broken", `upstream "files" answered with an error`},
		{"slow", `upstream "files" did not answer in time`},
		{"refuses", "quota exceeded"},
	} {
		res, text := call(t, cs, "call_tool", map[string]any{"name": tc.tool})
		if !res.IsError || !strings.Contains(text, tc.want) {
			t.Fatalf("%s: isError=%v %q, want %q", tc.tool, res.IsError, text, tc.want)
		}
	}
	// An upstream that is gone is a clear error, not a hang, and it names
	// no address: where the upstream lives is not the agent's business, nor
	// the audit log's.
	e.up.srv.Close()
	addr := strings.TrimPrefix(e.up.srv.URL, "http://")
	_, port, _ := strings.Cut(addr, ":")
	res, text := call(t, cs, "call_tool", map[string]any{"name": "read_file", "arguments": map[string]any{"path": "a"}})
	if !res.IsError || !strings.Contains(text, `upstream "files"`) || strings.Contains(text, addr) || strings.Contains(text, port) {
		t.Fatalf("closed upstream: %s", text)
	}
	audit, err := os.ReadFile(e.auditPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(audit), addr) || strings.Contains(string(audit), ":"+port) {
		t.Fatalf("the audit log names the upstream's address:\n%s", audit)
	}
}

func TestAuditLog(t *testing.T) {
	e := setup(t, false)
	cs := mustConnect(t, e.url, supportToken)
	call(t, cs, "call_tool", map[string]any{"name": "read_file", "arguments": map[string]any{"path": "TOP-SECRET-PATH"}})
	call(t, cs, "call_tool", map[string]any{"name": "delete_file", "arguments": map[string]any{"path": "TOP-SECRET-PATH"}})
	call(t, cs, "call_tool", map[string]any{"name": "read_file", "arguments": map[string]any{"path": 7}})
	call(t, cs, "call_tool", map[string]any{"name": "broken"})
	b, err := os.ReadFile(e.auditPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "TOP-SECRET") || strings.Contains(string(b), "support-bot@example.com") || strings.Contains(string(b), "disk on fire") {
		t.Fatalf("the audit log holds arguments or a clear subject:\n%s", b)
	}
	var got []upstream.AuditEntry
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var a upstream.AuditEntry
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatal(err)
		}
		got = append(got, a)
	}
	want := []struct{ server, tool, outcome string }{
		{"files", "read_file", upstream.OutcomeOK},
		{"", "delete_file", upstream.OutcomeDeniedUnknown},
		{"files", "read_file", upstream.OutcomeDeniedArguments},
		{"files", "broken", upstream.KindProtocol},
	}
	if len(got) != len(want) {
		t.Fatalf("%d audit lines, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if g.Server != w.server || g.Tool != w.tool || g.Outcome != w.outcome || g.Tenant != "acme" || g.SubjectHash == "" || g.Via != "mcp" {
			t.Fatalf("line %d: %+v, want %+v", i, g, w)
		}
	}
}

// TestRevocationTakesEffect: a card revoked after a client connected is
// unknown on the next call.
func TestRevocationTakesEffect(t *testing.T) {
	e := setup(t, false)
	cs := mustConnect(t, e.url, supportToken)
	if res, _ := call(t, cs, "call_tool", map[string]any{"name": "read_file", "arguments": map[string]any{"path": "a"}}); res.IsError {
		t.Fatal("first call refused")
	}
	ctx := context.Background()
	c, err := e.store.Get(ctx, cards.Key{Tenant: "acme", Server: "files", Name: "read_file"})
	if err != nil {
		t.Fatal(err)
	}
	c.Status = cards.StatusRevoked
	if _, err := e.store.Put(ctx, []cards.Card{c}); err != nil {
		t.Fatal(err)
	}
	if err := e.ret.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	res, text := call(t, cs, "call_tool", map[string]any{"name": "read_file", "arguments": map[string]any{"path": "a"}})
	if !res.IsError || !strings.Contains(text, "unknown tool") || e.up.count("read_file") != 1 {
		t.Fatalf("after revocation: %s (%d upstream calls)", text, e.up.count("read_file"))
	}
}

// TestSearchPages: search_tools pages on with next_cursor past the limit,
// every authorized tool exactly once, and refuses a cursor of another query.
func TestSearchPages(t *testing.T) {
	e := setup(t, false)
	cs := mustConnect(t, e.url, adminToken)
	type page struct {
		Tools []struct {
			Name, Server string
		} `json:"tools"`
		NextCursor string `json:"next_cursor"`
	}
	get := func(args map[string]any) page {
		t.Helper()
		res, text := call(t, cs, "search_tools", args)
		var p page
		if res.IsError || json.Unmarshal([]byte(text), &p) != nil {
			t.Fatalf("search_tools %v: %s", args, text)
		}
		return p
	}
	all := get(map[string]any{"query": "", "limit": 50})
	if all.NextCursor != "" || len(all.Tools) < 3 {
		t.Fatalf("one page of everything: %+v", all)
	}
	var paged []string
	args := map[string]any{"query": "", "limit": 2}
	for range 50 {
		p := get(args)
		for _, tl := range p.Tools {
			paged = append(paged, tl.Server+"/"+tl.Name)
		}
		if p.NextCursor == "" {
			break
		}
		args["cursor"] = p.NextCursor
	}
	var want []string
	for _, tl := range all.Tools {
		want = append(want, tl.Server+"/"+tl.Name)
	}
	if !slices.Equal(paged, want) {
		t.Fatalf("paged %v, want %v", paged, want)
	}
	first := get(map[string]any{"query": "", "limit": 1})
	res, text := call(t, cs, "search_tools", map[string]any{"query": "file", "cursor": first.NextCursor})
	if !res.IsError || !strings.Contains(text, "cursor") {
		t.Fatalf("a cursor of another query: %s", text)
	}
}
