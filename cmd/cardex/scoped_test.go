package main

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed0cff8200/cardex/internal/testkit/petstore"
)

// TestImportIsClosedUntilScoped runs the README's own import command (no
// --scopes) and checks that it leaves nothing an agent can use unless its
// token holds the petstore's scopes: an agent holding only files:read sees
// no petstore tool in tools/list (full disclosure) and its direct calls are
// refused before they reach the API; one holding petstore:read reads and
// may not delete; the import says what it did, on stderr and in its JSON.
func TestImportIsClosedUntilScoped(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const key = "petstore-key-for-cardex-only"
	ps := petstore.Start(key)
	defer ps.Close()
	dir := t.TempDir()
	t.Setenv("CARDEX_AGENT_TOKENS", writeFileIn(t, dir, "tokens.yaml", `tokens:
  - {token: files-agent-token-0123456789, tenant: acme, subject: files-agent, scopes: ["files:read"], disclosure: full}
  - {token: pets-reader-token-0123456789, tenant: acme, subject: pets-reader, scopes: ["petstore:read"], disclosure: full}
`))
	t.Setenv("CARDEX_UPSTREAMS", writeFileIn(t, dir, "upstreams.yaml", `upstreams:
  - server: petstore
    kind: rest
    base_url: `+ps.BaseURL+`
    headers: {api_key: "${PETSTORE_API_KEY}"}
`))
	t.Setenv("PETSTORE_API_KEY", key)
	mcpAddr := freePort(t)
	t.Setenv("CARDEX_HTTP_LISTEN", mcpAddr)

	bin := buildBinary(t)
	addr, _ := startServer(t, bin, filepath.Join(dir, "data"))
	readme := []string{"import", "openapi", "../../testdata/openapi/petstore3.yaml", "--server", "petstore", "--tenant", "acme"}
	out, stderr, code := runFull(t, bin, addr, append(readme, "--dry-run", "-o", "json")...)
	var plan struct {
		Scoping struct {
			Defaulted map[string]int `json:"defaulted"`
			Open      []string       `json:"open"`
			HowToOpen string         `json:"how_to_open"`
		} `json:"scoping"`
	}
	if err := json.Unmarshal([]byte(out), &plan); code != 0 || err != nil {
		t.Fatalf("dry run: exit %d, %v\n%s\n%s", code, err, out, stderr)
	}
	// The 11 operations that name no OAuth scope: 5 read, 4 write, 2 delete.
	if d := plan.Scoping.Defaulted; d["petstore:read"] != 5 || d["petstore:write"] != 4 || d["petstore:admin"] != 2 || len(d) != 3 ||
		len(plan.Scoping.Open) != 0 || !strings.Contains(plan.Scoping.HowToOpen, "petstore:*") {
		t.Fatalf("scoping %+v", plan.Scoping)
	}
	out, stderr, code = runFull(t, bin, addr, readme...)
	if code != 0 || !strings.Contains(out, "19 created") || !strings.Contains(stderr, "scoped: 11 cards name no scope") ||
		!strings.Contains(stderr, "petstore:admin (2), petstore:read (5), petstore:write (4)") || strings.Contains(stderr, "every caller") {
		t.Fatalf("import: exit %d\n%s\n%s", code, out, stderr)
	}

	agent := func(token string) *mcp.ClientSession {
		tr := &mcp.StreamableClientTransport{Endpoint: "http://" + mcpAddr + "/mcp", MaxRetries: -1,
			HTTPClient: &http.Client{Transport: bearerTransport{token}}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(context.Background(), tr, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	listed := func(cs *mcp.ClientSession) []string {
		var names []string
		for tool, err := range cs.Tools(context.Background(), nil) {
			if err != nil {
				t.Fatal(err)
			}
			names = append(names, tool.Name)
		}
		return names
	}
	// refused: an unlisted tool is a protocol error ("unknown tool"), a
	// refused call_tool a tool error.
	refused := func(cs *mcp.ClientSession, name string, args map[string]any) bool {
		res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: name, Arguments: args})
		return err != nil || res.IsError
	}

	files := agent("files-agent-token-0123456789")
	if got := listed(files); strings.Contains(strings.Join(got, " "), "petstore") {
		t.Errorf("files:read lists petstore tools: %v", got)
	}
	before := len(ps.Requests())
	for _, c := range []struct {
		name string
		args map[string]any
	}{
		{"petstore__deleteUser", map[string]any{"username": "user1"}},
		{"petstore__getUserByName", map[string]any{"username": "user1"}},
		{"call_tool", map[string]any{"name": "petstore/deleteUser", "arguments": map[string]any{"username": "user1"}}},
		{"call_tool", map[string]any{"name": "petstore/getInventory", "arguments": map[string]any{}}},
	} {
		if !refused(files, c.name, c.args) {
			t.Errorf("files:read called %s %v", c.name, c.args)
		}
	}
	t.Setenv("CARDEX_AGENT_TOKEN", "files-agent-token-0123456789")
	if out, stderr, code := runFull(t, bin, addr, "tools", "call", "petstore/deleteOrder", "--args", `{"orderId": 7}`); code != 2 || !strings.Contains(stderr, "unknown tool") {
		t.Errorf("ExecutionService CallTool with files:read: exit %d\n%s\n%s", code, out, stderr)
	}
	if n := len(ps.Requests()) - before; n != 0 {
		t.Fatalf("%d refused calls reached the petstore", n)
	}

	// The scope opens what it names, and no more.
	reader := agent("pets-reader-token-0123456789")
	got := strings.Join(listed(reader), " ")
	if !strings.Contains(got, "petstore__getUserByName") || !strings.Contains(got, "petstore__getInventory") || strings.Contains(got, "petstore__deleteUser") {
		t.Errorf("petstore:read lists %s", got)
	}
	if refused(reader, "petstore__getUserByName", map[string]any{"username": "user1"}) {
		t.Error("petstore:read could not read")
	}
	if !refused(reader, "call_tool", map[string]any{"name": "petstore/deleteUser", "arguments": map[string]any{"username": "user1"}}) {
		t.Error("petstore:read deleted a user")
	}
}
