package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestImportAndToolsCall runs the binary the way the README's MCP section
// does: import a (real, in-process SDK) MCP server's tools, then search,
// describe and call one with `cardex tools` as an agent holding a token.
func TestImportAndToolsCall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	var calls atomic.Int64
	srv := mcp.NewServer(&mcp.Implementation{Name: "notes", Title: "Team notes", Version: "1"},
		&mcp.ServerOptions{PageSize: 1, Instructions: "Notes of the team, by title."})
	schema := json.RawMessage(`{"type":"object","properties":{"title":{"type":"string"}},"required":["title"],"additionalProperties":false}`)
	srv.AddTool(&mcp.Tool{Name: "get_note", Description: "Show one note by its title. Returns the text.", InputSchema: schema},
		func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			var a struct{ Title string }
			_ = json.Unmarshal(req.Params.Arguments, &a)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "note " + a.Title}},
				StructuredContent: map[string]any{"title": a.Title, "text": "buy milk"}}, nil
		})
	srv.AddTool(&mcp.Tool{Name: "delete_note", Description: "Delete a note.", InputSchema: schema},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			calls.Add(1)
			return &mcp.CallToolResult{}, nil
		})
	up := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	defer up.Close()

	dir := t.TempDir()
	t.Setenv("CARDEX_AGENT_TOKENS", writeFileIn(t, dir, "tokens.yaml", `tokens:
  - {token: agent-token-0123456789, tenant: acme, subject: notes-agent, scopes: ["notes:read"], always_load: [notes/get_note, notes/delete_note]}
  - {token: small-agent-token-0123, tenant: acme, subject: small-agent, scopes: ["notes:read"], disclosure: full}
`))
	t.Setenv("CARDEX_UPSTREAMS", writeFileIn(t, dir, "upstreams.yaml", "upstreams:\n  - {server: notes, url: "+up.URL+"}\n"))
	// A free port for /mcp, so the test can connect an MCP client to it.
	mcpAddr := freePort(t)
	t.Setenv("CARDEX_HTTP_LISTEN", mcpAddr)
	t.Setenv("CARDEX_AGENT_TOKEN", "agent-token-0123456789")

	bin := buildBinary(t)
	addr, _ := startServer(t, bin, filepath.Join(dir, "data"))

	out, code := run(t, bin, addr, "import", "mcp", up.URL, "--server", "notes", "--tenant", "acme", "--scopes", "notes:read", "--dry-run")
	if code != 0 || !strings.Contains(out, "dry run, nothing written: would be 2 created") || !regexp.MustCompile(`create +notes +\(server entry\)`).MatchString(out) {
		t.Fatalf("import --dry-run: exit %d\n%s", code, out)
	}
	if _, code := run(t, bin, addr, "servers", "get", "notes", "--tenant", "acme"); code == 0 {
		t.Error("--dry-run wrote the server entry")
	}
	out, code = run(t, bin, addr, "import", "mcp", "--upstreams", os.Getenv("CARDEX_UPSTREAMS"), "--server", "notes", "--tenant", "acme", "--scopes", "notes:read")
	if code != 0 || !strings.Contains(out, "2 created, 0 updated, 0 revoked, 0 unchanged") {
		t.Fatalf("import: exit %d\n%s", code, out)
	}
	// Idempotent through the running server too.
	out, code = run(t, bin, addr, "import", "mcp", up.URL, "--server", "notes", "--tenant", "acme", "--scopes", "notes:read")
	if code != 0 || !strings.Contains(out, "0 created, 0 updated, 0 revoked, 2 unchanged") || !regexp.MustCompile(`unchanged +notes +\(server entry\) +1`).MatchString(out) {
		t.Fatalf("re-import: exit %d\n%s", code, out)
	}
	// The initialize answer is the server entry.
	out, code = run(t, bin, addr, "servers", "get", "notes", "--tenant", "acme", "-o", "json")
	var entry struct{ Title, Description string }
	if err := json.Unmarshal([]byte(out), &entry); code != 0 || err != nil || entry.Title != "Team notes" || entry.Description != "Notes of the team, by title." {
		t.Errorf("servers get notes: exit %d, %v: %+v", code, err, entry)
	}
	// delete_note needs more than the agent holds.
	out, code = run(t, bin, addr, "cards", "get", "notes/delete_note", "--tenant", "acme", "-o", "json")
	if code != 0 {
		t.Fatalf("cards get: %d", code)
	}
	// The printed card is a card file: change its scope and apply it again.
	card := strings.Replace(out, `"notes:read"`, `"notes:admin"`, 1)
	cardFile := writeFileIn(t, dir, "delete_note.json", card)
	if out, code = run(t, bin, addr, "cards", "apply", "-f", cardFile); code != 0 || !strings.Contains(out, "1 updated") {
		t.Fatalf("apply: %d\n%s", code, out)
	}

	out, code = run(t, bin, addr, "tools", "search", "note", "-o", "json")
	if code != 0 || !strings.Contains(out, "get_note") || strings.Contains(out, "delete_note") {
		t.Fatalf("tools search: exit %d\n%s", code, out)
	}
	if out, code = run(t, bin, addr, "tools", "describe", "get_note", "-o", "json"); code != 0 || !strings.Contains(out, `"input_schema": {`) {
		t.Fatalf("tools describe: exit %d\n%s", code, out)
	}

	args := writeFileIn(t, dir, "args.json", `{"title": "shopping"}`)
	result := filepath.Join(dir, "result.json")
	out, code = run(t, bin, addr, "tools", "call", "get_note", "--json-file", args, "--output", result)
	var rec Receipt
	if err := json.Unmarshal([]byte(out), &rec); err != nil || code != 0 {
		t.Fatalf("tools call: exit %d, %v\n%s", code, err, out)
	}
	got, err := os.ReadFile(result)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Execution.Status != "ok" || rec.Execution.Tool != "notes/get_note" || rec.Execution.ID == "" ||
		rec.Result.Path != result || rec.Result.Bytes != int64(len(got)) || !rec.Result.Complete {
		t.Fatalf("receipt %+v (file %d bytes)", rec, len(got))
	}
	var res struct {
		Content           []map[string]any `json:"content"`
		StructuredContent map[string]any   `json:"structuredContent"`
	}
	if err := json.Unmarshal(got, &res); err != nil || res.StructuredContent["text"] != "buy milk" || res.Content[0]["text"] != "note shopping" {
		t.Fatalf("result file: %v\n%s", err, got)
	}
	if calls.Load() != 1 {
		t.Fatalf("upstream calls %d, want 1", calls.Load())
	}

	// Refused: nothing forwarded, exit 2, and the receipt does not claim a result.
	for _, tc := range [][]string{
		{"tools", "call", "delete_note", "--args", `{"title": "x"}`, "--output", filepath.Join(dir, "r2.json")},
		{"tools", "call", "get_note", "--args", `{"title": 7}`, "--output", filepath.Join(dir, "r3.json")},
		{"tools", "call", "call_tool", "--args", `{}`, "--output", filepath.Join(dir, "r4.json")},
	} {
		out, code = run(t, bin, addr, tc...)
		var rec Receipt
		_ = json.Unmarshal([]byte(out), &rec)
		if code != 2 || rec.Result.Complete || rec.Execution.Status != "denied" {
			t.Fatalf("%v: exit %d, receipt %s", tc, code, out)
		}
		if _, err := os.Stat(tc[len(tc)-1]); !os.IsNotExist(err) {
			t.Fatalf("%v: a result file was written", tc)
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("refused calls reached the upstream: %d calls", calls.Load())
	}
	// The same through /mcp with an SDK client: the serve wiring of the MCP front.
	tr := &mcp.StreamableClientTransport{Endpoint: "http://" + mcpAddr + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearerTransport{"agent-token-0123456789"}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	mres, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "call_tool",
		Arguments: map[string]any{"name": "get_note", "arguments": map[string]any{"title": "via mcp"}}})
	if err != nil || mres.IsError || mres.Content[0].(*mcp.TextContent).Text != "note via mcp" {
		t.Fatalf("call_tool over /mcp: %v %+v", err, mres)
	}
	mres, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "call_tool",
		Arguments: map[string]any{"name": "delete_note", "arguments": map[string]any{"title": "x"}}})
	if err != nil || !mres.IsError || calls.Load() != 2 {
		t.Fatalf("refused call_tool over /mcp: %v %+v (%d upstream calls)", err, mres, calls.Load())
	}
	audit, err := os.ReadFile(filepath.Join(dir, "data", "audit.jsonl"))
	if err != nil || strings.Count(string(audit), "\n") != 6 || !strings.Contains(string(audit), `"via":"mcp"`) {
		t.Fatalf("audit log: %v\n%s", err, audit)
	}

	// tools list prints what the token's disclosure lists: the meta-tools and
	// the pins it may use, or every tool it may use; calls take the names.
	var listed struct {
		Disclosure string `json:"disclosure"`
		Tools      []struct {
			Name string `json:"name"`
			Tool *struct {
				Server, Name string
			} `json:"tool"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	names := func() string {
		var ns []string
		for _, tl := range listed.Tools {
			ns = append(ns, tl.Name)
		}
		return strings.Join(ns, " ")
	}
	out, code = run(t, bin, addr, "tools", "list", "-o", "json")
	if err := json.Unmarshal([]byte(out), &listed); err != nil || code != 0 || listed.Disclosure != "progressive" ||
		names() != "search_tools describe_tool call_tool notes__get_note" || listed.Tools[3].Tool.Name != "get_note" ||
		compactJSON(string(listed.Tools[3].InputSchema)) != `{"additionalProperties":false,"properties":{"title":{"type":"string"}},"required":["title"],"type":"object"}` {
		t.Fatalf("tools list: exit %d, %v\n%s", code, err, out)
	}
	if out, code = run(t, bin, addr, "tools", "list", "--token", "small-agent-token-0123"); code != 0 ||
		!strings.Contains(out, "notes__get_note  notes/get_note") || strings.Contains(out, "search_tools") || !strings.Contains(out, "1 tools listed (full disclosure)") {
		t.Fatalf("tools list (full): exit %d\n%s", code, out)
	}
	if out, code = run(t, bin, addr, "tools", "call", "notes__get_note", "--args", `{"title": "by name"}`); code != 0 || !strings.Contains(out, "note by name") {
		t.Fatalf("tools call notes__get_note: exit %d\n%s", code, out)
	}
	audit, _ = os.ReadFile(filepath.Join(dir, "data", "audit.jsonl"))
	if !strings.Contains(string(audit), `"via":"grpc","disclosure":"progressive"`) {
		t.Fatalf("audit log: %s", audit)
	}

	// Over /mcp the pin is listed; a session is told when its card is revoked
	// through the CatalogService.
	changed := make(chan struct{}, 4)
	cs2, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	}).Connect(context.Background(), tr, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	if err != nil {
		t.Fatal(err)
	}
	defer cs2.Close()
	lres, err := cs2.ListTools(context.Background(), nil)
	if err != nil || len(lres.Tools) != 4 || lres.Tools[3].Name != "notes__get_note" {
		t.Fatalf("tools/list over /mcp: %v %+v", err, lres)
	}
	if out, code = run(t, bin, addr, "cards", "get", "notes/get_note", "--tenant", "acme", "-o", "json"); code != 0 {
		t.Fatalf("cards get: %d", code)
	}
	// cards get -o json is a card file: change the status and apply it.
	var noteCard map[string]any
	if err := json.Unmarshal([]byte(out), &noteCard); err != nil {
		t.Fatalf("cards get -o json: %v\n%s", err, out)
	}
	noteCard["status"] = "revoked"
	delete(noteCard, "version")
	revoked, _ := json.Marshal(noteCard)
	if out, code = run(t, bin, addr, "cards", "apply", "-f", writeFileIn(t, dir, "get_note.json", string(revoked))); code != 0 || !strings.Contains(out, "1 updated") {
		t.Fatalf("revoke get_note: %d\n%s", code, out)
	}
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no notifications/tools/list_changed after the pin's card was revoked")
	}
	if lres, err = cs2.ListTools(context.Background(), nil); err != nil || len(lres.Tools) != 3 {
		t.Fatalf("tools/list after the revocation: %v %+v", err, lres)
	}

	// Without a token the agent is nobody.
	t.Setenv("CARDEX_AGENT_TOKEN", "")
	if _, code = run(t, bin, addr, "tools", "search", "note"); code == 0 {
		t.Fatal("tools search without a token succeeded")
	}
}

type bearerTransport struct{ token string }

func (b bearerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return http.DefaultTransport.RoundTrip(r)
}

// compactJSON is s with the insignificant white space of JSON taken out
// (s as it is when it is not JSON).
func compactJSON(s string) string {
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(s)); err != nil {
		return s
	}
	return b.String()
}
