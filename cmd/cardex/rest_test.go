package main

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed0cff8200/cardex/internal/testkit/petstore"
)

// TestImportOpenAPIAndCallREST runs the binary the way the README's REST
// section does: import the Petstore spec, register the API in the
// upstreams file, and call its operations as an agent with `cardex tools
// call --output` and through /mcp call_tool, against a real petstore on
// loopback, with the refusals.
func TestImportOpenAPIAndCallREST(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const key = "petstore-key-for-cardex-only"
	petstore.Slow = 3 * time.Second
	ps := petstore.Start(key)
	defer ps.Close()

	dir := t.TempDir()
	t.Setenv("CARDEX_AGENT_TOKENS", writeFileIn(t, dir, "tokens.yaml", `tokens:
  - {token: pets-agent-token-0123456789, tenant: acme, subject: pets-agent, scopes: ["read:pets", "write:pets", "petstore:*"]}
  - {token: reader-agent-token-0123456789, tenant: acme, subject: reader, scopes: ["read:pets"]}
`))
	t.Setenv("CARDEX_UPSTREAMS", writeFileIn(t, dir, "upstreams.yaml", `upstreams:
  - server: petstore
    kind: rest
    base_url: `+ps.BaseURL+`
    headers: {api_key: "${PETSTORE_API_KEY}"}
    timeout: 1s
`))
	t.Setenv("PETSTORE_API_KEY", key)
	mcpAddr := freePort(t)
	t.Setenv("CARDEX_HTTP_LISTEN", mcpAddr)
	t.Setenv("CARDEX_AGENT_TOKEN", "pets-agent-token-0123456789")

	bin := buildBinary(t)
	addr, _ := startServer(t, bin, filepath.Join(dir, "data"))
	out, code := run(t, bin, addr, "import", "openapi", "../../testdata/openapi/petstore3.yaml", "--server", "petstore", "--tenant", "acme")
	if code != 0 || !strings.Contains(out, "19 created") {
		t.Fatalf("import openapi: exit %d\n%s", code, out)
	}

	call := func(args ...string) (Receipt, []byte, int) {
		t.Helper()
		result := filepath.Join(dir, "result.json")
		os.Remove(result)
		out, code := run(t, bin, addr, append(append([]string{"tools", "call"}, args...), "--output", result)...)
		var rec Receipt
		if err := json.Unmarshal([]byte(out), &rec); err != nil {
			t.Fatalf("%v: the receipt is not JSON: %v\n%s", args, err, out)
		}
		b, _ := os.ReadFile(result)
		return rec, b, code
	}
	var res struct {
		IsError           bool `json:"isError"`
		StructuredContent struct {
			Status int             `json:"status"`
			Body   json.RawMessage `json:"body"`
		} `json:"structuredContent"`
		Content []struct{ Text string } `json:"content"`
	}

	rec, file, code := call("petstore/getPetById", "--args", `{"petId": 7}`)
	if code != 0 || rec.Execution.Status != "ok" || rec.Execution.Tool != "petstore/getPetById" || !rec.Result.Complete || rec.Result.Bytes != int64(len(file)) {
		t.Fatalf("getPetById: exit %d, receipt %+v", code, rec)
	}
	if err := json.Unmarshal(file, &res); err != nil || res.StructuredContent.Status != 200 || !strings.Contains(string(res.StructuredContent.Body), `"name":"Doggie"`) {
		t.Fatalf("result file: %v\n%s", err, file)
	}
	if strings.Contains(string(file), key) {
		t.Fatal("the API key reached the result")
	}
	// -o table prints the result's text: the body.
	if out, code := run(t, bin, addr, "tools", "call", "petstore/getPetById", "--args", `{"petId": 7}`, "-o", "table"); code != 0 || !strings.HasPrefix(out, `{"id":7,"name":"Doggie"`) {
		t.Fatalf("tools call -o table: exit %d\n%s", code, out)
	}

	// An HTTP error is a tool error: the result holds the status and body.
	rec, file, code = call("petstore/getPetById", "--args", `{"petId": 404}`)
	if code != 1 || rec.Execution.Status != "tool_error" || !rec.Result.Complete {
		t.Fatalf("404: exit %d, receipt %+v", code, rec)
	}
	if err := json.Unmarshal(file, &res); err != nil || !res.IsError || res.StructuredContent.Status != 404 || !strings.Contains(res.Content[0].Text, "Pet not found") {
		t.Fatalf("404 result: %v\n%s", err, file)
	}

	before := len(ps.Requests())
	for _, tc := range []struct {
		args   []string
		token  string
		status string
		code   int
	}{
		{[]string{"petstore/getUserByName", "--args", `{"username": "../admin"}`}, "", "denied", 2},
		{[]string{"petstore/getPetById", "--args", `{"petId": "7; DROP"}`}, "", "denied", 2},
		{[]string{"petstore/getPetById", "--args", `{"petId": 7}`}, "reader-agent-token-0123456789", "denied", 2},
	} {
		if tc.token != "" {
			t.Setenv("CARDEX_AGENT_TOKEN", tc.token)
		}
		rec, file, code := call(tc.args...)
		t.Setenv("CARDEX_AGENT_TOKEN", "pets-agent-token-0123456789")
		if code != tc.code || rec.Execution.Status != tc.status || rec.Result.Complete || file != nil {
			t.Fatalf("%v: exit %d, receipt %+v, file %q", tc.args, code, rec, file)
		}
	}
	if n := len(ps.Requests()) - before; n != 0 {
		t.Fatalf("refused calls reached the petstore: %d requests", n)
	}

	// Too large, and uncertain: failures, not results; each sent once.
	rec, _, code = call("petstore/getUserByName", "--args", `{"username": "big"}`)
	if code != 1 || rec.Execution.Status != "failed" || !strings.Contains(rec.Execution.Error, "max_response_bytes") {
		t.Fatalf("too large: exit %d, receipt %+v", code, rec)
	}
	before = len(ps.Requests())
	rec, _, code = call("petstore/placeOrder", "--args", `{"petId": 7, "quantity": 7391957}`)
	if code != 1 || rec.Execution.Status != "uncertain" || !strings.Contains(rec.Execution.Error, "may or may not have taken effect") {
		t.Fatalf("uncertain: exit %d, receipt %+v", code, rec)
	}
	if n := len(ps.Requests()) - before; n != 1 {
		t.Fatalf("the uncertain call reached the petstore %d times, want once", n)
	}

	// The same through /mcp.
	tr := &mcp.StreamableClientTransport{Endpoint: "http://" + mcpAddr + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearerTransport{"pets-agent-token-0123456789"}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(context.Background(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	mres, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "call_tool",
		Arguments: map[string]any{"name": "findPetsByStatus", "arguments": map[string]any{"status": "available"}}})
	if err != nil || mres.IsError {
		t.Fatalf("call_tool over /mcp: %v %+v", err, mres)
	}
	sc, _ := json.Marshal(mres.StructuredContent)
	if !strings.Contains(string(sc), `"status":200`) || !strings.Contains(string(sc), `"pagination"`) || !strings.Contains(string(sc), `"name":"Rex"`) {
		t.Fatalf("call_tool structuredContent %s", sc)
	}
	before = len(ps.Requests())
	mres, err = cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "call_tool",
		Arguments: map[string]any{"name": "getUserByName", "arguments": map[string]any{"username": "../../etc/passwd"}}})
	if err != nil || !mres.IsError || len(ps.Requests()) != before {
		t.Fatalf("refused call_tool over /mcp: %v %+v", err, mres)
	}
	audit, err := os.ReadFile(filepath.Join(dir, "data", "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"outcome":"ok"`, `"outcome":"tool_error"`, `"outcome":"denied_invalid_arguments"`, `"outcome":"denied_unknown_tool"`,
		`"outcome":"response_too_large"`, `"outcome":"uncertain"`, `"via":"mcp"`} {
		if !strings.Contains(string(audit), want) {
			t.Errorf("audit log lacks %s:\n%s", want, audit)
		}
	}
	if strings.Contains(string(audit), key) || strings.Contains(string(audit), "passwd") {
		t.Fatalf("the audit log holds the key or argument values:\n%s", audit)
	}
}
