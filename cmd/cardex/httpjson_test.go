package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi2"
	"github.com/getkin/kin-openapi/openapi2conv"
	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/seed0cff8200/cardex/internal/access/tokens"
	"github.com/seed0cff8200/cardex/internal/codec/toolname"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// HTTP/JSON test credentials.
const (
	jsonAdminToken    = "json-admin-token-0123456789"
	jsonDiscoverToken = "json-discover-token-0123456789" // bound to acme, notes:read notes:write
	jsonAgentToken    = "json-agent-token-0123456789"    // the same caller, as an agent
	jsonScopes        = "notes:read, notes:write, support:read, orders:read, repo:read"
)

// jsonServer starts `cardex serve` with service and agent tokens and returns
// its gRPC and HTTP addresses.
func jsonServer(t *testing.T, bin string, extra ...string) (addr, httpAddr string) {
	t.Helper()
	dir := t.TempDir()
	svc := writeTemp(t, "service-tokens.yaml", fmt.Sprintf("tokens:\n  - {name: ops, role: admin, token_sha256: %s}\n"+
		"  - {name: notes-bot, role: discover, token_sha256: %s, caller: {tenant: acme, subject: bot, scopes: ["+jsonScopes+"]}}\n",
		tokens.HashToken(jsonAdminToken), tokens.HashToken(jsonDiscoverToken)))
	agents := writeTemp(t, "agent-tokens.yaml", "tokens:\n  - {token: "+jsonAgentToken+", tenant: acme, subject: bot, scopes: ["+jsonScopes+"]}\n")
	addr, httpAddr, _ = startServerHTTP(t, bin, filepath.Join(dir, "data"), append([]string{"--service-tokens", svc, "--agent-tokens", agents}, extra...)...)
	return addr, httpAddr
}

// jsonCall is one HTTP/JSON call's answer.
type jsonCall struct {
	status int
	header http.Header
	raw    []byte
	body   map[string]any
}

// post calls POST /path with a JSON body as curl would, and checks the
// request and answer against the served OpenAPI document.
func post(t *testing.T, api *openAPI, httpAddr, path, token, body string) jsonCall {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+httpAddr+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonCall{status: resp.StatusCode, header: resp.Header, raw: raw}
	if err := json.Unmarshal(raw, &c.body); err != nil {
		t.Fatalf("POST %s: %d, not a JSON object: %q", path, resp.StatusCode, raw)
	}
	if api != nil {
		api.check(t, path, body, c)
	}
	return c
}

// openAPI is the served document, loaded and validated by kin-openapi, and
// a router to check calls against it.
type openAPI struct {
	doc    *openapi3.T
	router routers.Router
}

func loadOpenAPI(t *testing.T, httpAddr string) *openAPI {
	t.Helper()
	resp, err := http.Get("http://" + httpAddr + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("GET /openapi.json: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	var v2 openapi2.T
	if err := json.Unmarshal(raw, &v2); err != nil {
		t.Fatalf("/openapi.json is not an OpenAPI 2.0 document: %v", err)
	}
	doc, err := openapi2conv.ToV3(&v2)
	if err != nil {
		t.Fatalf("/openapi.json: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("/openapi.json does not validate: %v", err)
	}
	doc.Servers = openapi3.Servers{{URL: "http://" + httpAddr}}
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatal(err)
	}
	return &openAPI{doc: doc, router: router}
}

// check validates a call's request and, for a 200, its answer against the
// document; an error answer must be a Connect error.
func (a *openAPI) check(t *testing.T, path, body string, c jsonCall) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, a.doc.Servers[0].URL+path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	route, params, err := a.router.FindRoute(req)
	if err != nil {
		if strings.HasPrefix(path, "/grpc.health.v1.") {
			return // health is grpc-go's service, not in cardex's protos
		}
		t.Errorf("%s is not in /openapi.json: %v", path, err)
		return
	}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route,
		Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}}
	if c.status != 200 {
		if code, _ := c.body["code"].(string); code == "" || c.body["message"] == nil && code != "unknown" {
			t.Errorf("%s: %d answer is not a Connect error: %s", path, c.status, c.raw)
		}
		return
	}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil {
		t.Errorf("%s: request %s does not match /openapi.json: %v", path, body, err)
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: c.status, Header: c.header,
		Body: io.NopCloser(bytes.NewReader(c.raw)), Options: &openapi3filter.Options{IncludeResponseStatus: true}}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		t.Errorf("%s: answer %s does not match /openapi.json: %v", path, c.raw, err)
	}
}

func expectError(t *testing.T, what string, c jsonCall, status int, code, mention string) {
	t.Helper()
	if c.status != status || c.body["code"] != code || !strings.Contains(fmt.Sprint(c.body["message"]), mention) {
		t.Errorf("%s: %d %s; want %d %s mentioning %q", what, c.status, c.raw, status, code, mention)
	}
}

const notesSchema = `{\"type\":\"object\",\"properties\":{\"text\":{\"type\":\"string\"}},\"required\":[\"text\"],\"additionalProperties\":false}`

// TestHTTPJSON: every RPC of every service answers JSON over HTTP on the
// HTTP listener, with the gRPC API's credentials, errors and limits, and
// matches the OpenAPI document the server serves.
func TestHTTPJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	_, h := jsonServer(t, bin)
	api := loadOpenAPI(t, h)
	call := func(path, token, body string) jsonCall { t.Helper(); return post(t, api, h, path, token, body) }
	ok := func(what string, c jsonCall) map[string]any {
		t.Helper()
		if c.status != 200 {
			t.Fatalf("%s: %d %s", what, c.status, c.raw)
		}
		return c.body
	}

	// CatalogService.
	ok("PutServers", call("/cardex.v1.CatalogService/PutServers", jsonAdminToken,
		`{"servers":[{"tenant":"acme","name":"notes","title":"Notes","description":"A notebook"}]}`))
	put := ok("PutCards", call("/cardex.v1.CatalogService/PutCards", jsonAdminToken, `{"cards":[`+
		`{"tenant":"acme","server":"notes","name":"add.note","kind":"function","summary":"Write a new note into the notebook","requiredScopes":["notes:write"],"inputSchema":"`+notesSchema+`"},`+
		`{"tenant":"acme","server":"notes","name":"list_notes","kind":"function","summary":"List the notes of the notebook","requiredScopes":["notes:read"]},`+
		`{"tenant":"acme","server":"notes","name":"purge_notes","kind":"function","summary":"Delete every note of the notebook","requiredScopes":["notes:admin"]}]}`))
	if rs, _ := put["results"].([]any); len(rs) != 3 {
		t.Fatalf("PutCards results %v", put)
	}
	got := ok("GetCard", call("/cardex.v1.CatalogService/GetCard", jsonAdminToken, `{"tenant":"acme","server":"notes","name":"add.note"}`))
	if card, _ := got["card"].(map[string]any); card["name"] != "add.note" || card["version"] != "1" {
		t.Errorf("GetCard %v", got)
	}
	if cs, _ := ok("ListCards", call("/cardex.v1.CatalogService/ListCards", jsonAdminToken, `{"tenant":"acme"}`))["cards"].([]any); len(cs) != 3 {
		t.Errorf("ListCards: %d cards", len(cs))
	}
	if ss, _ := ok("ListServers", call("/cardex.v1.CatalogService/ListServers", jsonAdminToken, `{"tenant":"acme"}`))["servers"].([]any); len(ss) != 1 {
		t.Errorf("ListServers: %v", ss)
	}

	// DiscoveryService, as the bound token's caller (the request names none).
	addNote := toolname.Provider("notes", "add.note")
	if !toolname.Hashed(addNote) {
		t.Fatalf("provider name %q of notes/add.note is not hashed", addNote)
	}
	d := ok("DiscoverTools", call("/cardex.v1.DiscoveryService/DiscoverTools", jsonDiscoverToken,
		`{"query":"write a note","topK":2,"format":"anthropic_tool_reference","callId":"toolu_01"}`))
	tools, _ := d["tools"].([]any)
	if len(tools) != 2 {
		t.Fatalf("DiscoverTools: %s", d)
	}
	first := tools[0].(map[string]any)
	if first["providerName"] != addNote {
		t.Errorf("first tool %v; want provider name %s", first["providerName"], addNote)
	}
	var def map[string]any
	if err := json.Unmarshal([]byte(first["definitionJson"].(string)), &def); err != nil || def["name"] != addNote || def["defer_loading"] != true {
		t.Errorf("definitionJson %v (%v)", first["definitionJson"], err)
	}
	var result struct {
		Type      string
		ToolUseID string `json:"tool_use_id"`
		Content   []struct {
			Type     string
			ToolName string `json:"tool_name"`
		}
	}
	if err := json.Unmarshal([]byte(d["providerJson"].(string)), &result); err != nil || result.ToolUseID != "toolu_01" || len(result.Content) != 2 {
		t.Errorf("providerJson %v (%v)", d["providerJson"], err)
	}
	for _, tl := range tools {
		if strings.Contains(fmt.Sprint(tl), "purge_notes") {
			t.Errorf("a tool outside the caller's scopes was returned: %v", tl)
		}
	}
	search := ok("SearchTools", call("/cardex.v1.DiscoveryService/SearchTools", jsonDiscoverToken, `{}`))
	if ts, _ := search["tools"].([]any); len(ts) != 2 {
		t.Errorf("SearchTools: %v", search)
	}
	desc := ok("DescribeTool", call("/cardex.v1.DiscoveryService/DescribeTool", jsonDiscoverToken, `{"name":"`+addNote+`"}`))
	if card, _ := desc["card"].(map[string]any); card["name"] != "add.note" || card["inputSchema"] == nil {
		t.Errorf("DescribeTool by provider name: %v", desc)
	}
	authz := ok("AuthorizeCall", call("/cardex.v1.DiscoveryService/AuthorizeCall", jsonDiscoverToken,
		`{"name":"`+addNote+`","argumentsJson":"{\"text\":\"buy milk\"}","discoveryId":"`+d["discoveryId"].(string)+`"}`))
	if authz["decision"] != "DECISION_ALLOW" || fmt.Sprint(authz["tool"]) != "map[name:add.note server:notes]" {
		t.Errorf("AuthorizeCall by provider name: %v", authz)
	}
	authz = ok("AuthorizeCall", call("/cardex.v1.DiscoveryService/AuthorizeCall", jsonDiscoverToken, `{"name":"notes__list_notes","argumentsJson":"{}"}`))
	if authz["decision"] != "DECISION_ALLOW" {
		t.Errorf("AuthorizeCall by qualified name: %v", authz)
	}
	authz = ok("AuthorizeCall", call("/cardex.v1.DiscoveryService/AuthorizeCall", jsonDiscoverToken, `{"name":"`+addNote+`","argumentsJson":"{\"text\":7}"}`))
	if authz["decision"] != "DECISION_DENY_INVALID_ARGUMENTS" {
		t.Errorf("AuthorizeCall with bad arguments: %v", authz)
	}
	authz = ok("AuthorizeCall", call("/cardex.v1.DiscoveryService/AuthorizeCall", jsonDiscoverToken, `{"name":"purge_notes","server":"notes"}`))
	if authz["decision"] != "DECISION_DENY_UNKNOWN_TOOL" {
		t.Errorf("AuthorizeCall outside the scopes: %v", authz)
	}
	ok("ReportOutcome", call("/cardex.v1.DiscoveryService/ReportOutcome", jsonDiscoverToken,
		`{"discoveryId":"`+d["discoveryId"].(string)+`","usedTool":{"name":"`+addNote+`"}}`))

	// ExecutionService, as the agent.
	es := ok("ExecutionService.SearchTools", call("/cardex.v1.ExecutionService/SearchTools", jsonAgentToken, `{"query":"list my notes","limit":1}`))
	if ts, _ := es["tools"].([]any); len(ts) != 1 || ts[0].(map[string]any)["name"] != "list_notes" {
		t.Errorf("ExecutionService.SearchTools: %v", es)
	}
	ed := ok("ExecutionService.DescribeTool", call("/cardex.v1.ExecutionService/DescribeTool", jsonAgentToken, `{"name":"list_notes"}`))
	if card, _ := ed["card"].(map[string]any); card["name"] != "list_notes" {
		t.Errorf("ExecutionService.DescribeTool: %v", ed)
	}
	ok("ExecutionService.ListTools", call("/cardex.v1.ExecutionService/ListTools", jsonAgentToken, `{}`))
	// A function card has no executor here: the call is refused, as over gRPC.
	ct := call("/cardex.v1.ExecutionService/CallTool", jsonAgentToken, `{"name":"list_notes","argumentsJson":"{}"}`)
	if ct.status == 200 || ct.body["code"] == nil {
		t.Errorf("CallTool of a function card: %d %s", ct.status, ct.raw)
	}

	// The query operators over HTTP/JSON: select: answers exactly the named
	// tools the caller may use (purge_notes needs notes:admin: absent, as
	// a tool that does not exist), +word keeps the tools that hold it.
	sel := ok("DiscoverTools select:", call("/cardex.v1.DiscoveryService/DiscoverTools", jsonDiscoverToken,
		`{"query":"select:notes/list_notes,notes/purge_notes,notes/add.note"}`))
	if got := toolNames(sel["tools"]); got != "list_notes add.note" {
		t.Errorf("DiscoverTools select: %s", got)
	}
	if got := toolNames(ok("DiscoverTools +word", call("/cardex.v1.DiscoveryService/DiscoverTools", jsonDiscoverToken, `{"query":"+write notebook"}`))["tools"]); got != "add.note" {
		t.Errorf("DiscoverTools +write: %s", got)
	}
	if got := toolNames(ok("ExecutionService.SearchTools select:", call("/cardex.v1.ExecutionService/SearchTools", jsonAgentToken,
		`{"query":"select:notes/purge_notes,notes/add.note"}`))["tools"]); got != "add.note" {
		t.Errorf("ExecutionService.SearchTools select: %s", got)
	}
	if got := toolNames(ok("ExecutionService.SearchTools +word", call("/cardex.v1.ExecutionService/SearchTools", jsonAgentToken,
		`{"query":"+list notebook"}`))["tools"]); got != "list_notes" {
		t.Errorf("ExecutionService.SearchTools +list: %s", got)
	}

	// Health: Check, and Watch as a Connect server stream.
	if hc := ok("Health.Check", call("/grpc.health.v1.Health/Check", "", `{}`)); hc["status"] != "SERVING" {
		t.Errorf("Health.Check: %v", hc)
	}
	if st := watchHealth(t, h); st != "SERVING" {
		t.Errorf("Health.Watch: first status %q", st)
	}

	// Errors: codes become HTTP statuses, messages name the field.
	expectError(t, "no credential", call("/cardex.v1.DiscoveryService/DiscoverTools", "", `{"query":"x"}`), 401, "unauthenticated", "Bearer")
	expectError(t, "unknown credential", call("/cardex.v1.DiscoveryService/DiscoverTools", "nope-nope-nope-nope", `{"query":"x"}`), 401, "unauthenticated", "")
	expectError(t, "discover token on the catalogue", call("/cardex.v1.CatalogService/PutCards", jsonDiscoverToken, `{"cards":[]}`), 403, "permission_denied", "")
	expectError(t, "top_k over the limit", call("/cardex.v1.DiscoveryService/DiscoverTools", jsonDiscoverToken, `{"query":"x","topK":1000}`), 400, "invalid_argument", "top_k")
	expectError(t, "unknown format", call("/cardex.v1.DiscoveryService/DiscoverTools", jsonDiscoverToken, `{"query":"x","format":"claude"}`), 400, "invalid_argument", "format")
	expectError(t, "tool search without call id", call("/cardex.v1.DiscoveryService/DiscoverTools", jsonDiscoverToken, `{"query":"x","format":"openai_tool_search"}`), 400, "invalid_argument", "call_id")
	expectError(t, "unknown tool", call("/cardex.v1.DiscoveryService/DescribeTool", jsonDiscoverToken, `{"name":"purge_notes"}`), 404, "not_found", "")
	// A field the request message does not have is refused, named, rather
	// than dropped (here a misspelt top_k, which would silently be 5).
	expectError(t, "unknown field", call("/cardex.v1.DiscoveryService/DiscoverTools", jsonDiscoverToken, `{"query":"x","topk":3}`), 400, "invalid_argument", `unknown field "topk"`)
	expectError(t, "unknown nested field", call("/cardex.v1.DiscoveryService/DiscoverTools", jsonDiscoverToken, `{"query":"x","alwaysLoad":[{"server":"notes","tool":"list_notes"}]}`), 400, "invalid_argument", `unknown field "tool"`)
	expectError(t, "not JSON", call("/cardex.v1.DiscoveryService/DiscoverTools", jsonDiscoverToken, `{"query":`), 400, "invalid_argument", "")
	expectError(t, "no agent token", call("/cardex.v1.ExecutionService/ListTools", "", `{}`), 401, "unauthenticated", "")
	expectError(t, "stale version", call("/cardex.v1.CatalogService/DeleteCard", jsonAdminToken,
		`{"tenant":"acme","server":"notes","name":"purge_notes","expectedVersion":"9"}`), 409, "aborted", "")

	// DNS rebinding: the loopback listener's Host policy (hostguard)
	// covers the JSON API and its document like every HTTP surface.
	for _, path := range []string{"/cardex.v1.CatalogService/ListCards", "/openapi.json"} {
		req, _ := http.NewRequest(http.MethodPost, "http://"+h+path, strings.NewReader(`{"tenant":"acme"}`))
		req.Host = "rebind.example"
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+jsonAdminToken)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s with Host rebind.example: %d, want 403", path, resp.StatusCode)
		}
	}

	ok("DeleteCard", call("/cardex.v1.CatalogService/DeleteCard", jsonAdminToken, `{"tenant":"acme","server":"notes","name":"purge_notes"}`))
	ok("DeleteServer", call("/cardex.v1.CatalogService/DeleteServer", jsonAdminToken, `{"tenant":"acme","name":"notes"}`))
	if ss, _ := ok("ListServers", call("/cardex.v1.CatalogService/ListServers", jsonAdminToken, `{"tenant":"acme"}`))["servers"].([]any); len(ss) != 0 {
		t.Errorf("ListServers after DeleteServer: %v", ss)
	}

	// Every RPC of the document was called above.
	for path := range api.doc.Paths.Map() {
		if !calledPaths[path] {
			t.Errorf("%s was not called", path)
		}
	}
}

// toolNames are the names of an answer's tools (DiscoverTools' cards or
// SearchTools' summaries), space-separated, in order.
func toolNames(tools any) string {
	var names []string
	list, _ := tools.([]any)
	for _, x := range list {
		m, _ := x.(map[string]any)
		if card, ok := m["card"].(map[string]any); ok {
			m = card
		}
		names = append(names, fmt.Sprint(m["name"]))
	}
	return strings.Join(names, " ")
}

// calledPaths are the paths TestHTTPJSON calls (kept in step with it).
var calledPaths = map[string]bool{}

func init() {
	for _, p := range []string{
		"CatalogService/PutServers", "CatalogService/PutCards", "CatalogService/GetCard", "CatalogService/ListCards",
		"CatalogService/ListServers", "CatalogService/DeleteCard", "CatalogService/DeleteServer",
		"DiscoveryService/DiscoverTools", "DiscoveryService/SearchTools", "DiscoveryService/DescribeTool",
		"DiscoveryService/AuthorizeCall", "DiscoveryService/ReportOutcome",
		"ExecutionService/SearchTools", "ExecutionService/DescribeTool", "ExecutionService/ListTools", "ExecutionService/CallTool",
	} {
		calledPaths["/cardex.v1."+p] = true
	}
}

// watchHealth calls the server-streaming Health.Watch as a Connect
// streaming client does (one enveloped JSON message each way) and returns
// the first status.
func watchHealth(t *testing.T, httpAddr string) string {
	t.Helper()
	msg := []byte(`{}`)
	var env bytes.Buffer
	env.WriteByte(0)
	_ = binary.Write(&env, binary.BigEndian, uint32(len(msg)))
	env.Write(msg)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+httpAddr+"/grpc.health.v1.Health/Watch", &env)
	req.Header.Set("Content-Type", "application/connect+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("Watch: %d %s", resp.StatusCode, b)
	}
	r := bufio.NewReader(resp.Body)
	var head [5]byte
	if _, err := io.ReadFull(r, head[:]); err != nil {
		t.Fatalf("Watch: %v", err)
	}
	body := make([]byte, binary.BigEndian.Uint32(head[1:]))
	if _, err := io.ReadFull(r, body); err != nil {
		t.Fatal(err)
	}
	var st struct{ Status string }
	if err := json.Unmarshal(body, &st); err != nil {
		t.Fatalf("Watch frame %q: %v", body, err)
	}
	return st.Status
}

// TestHTTPJSONLimits: the rate limits hold over HTTP/JSON as over gRPC
// (429 resource_exhausted with the retry delay), and so does the
// server-side deadline.
func TestHTTPJSONLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	_, h := jsonServer(t, bin, "--rate-limit", "0.5", "--tenant-rate-limit", "0")
	var last jsonCall
	for range 10 {
		last = post(t, nil, h, "/cardex.v1.DiscoveryService/SearchTools", jsonDiscoverToken, `{}`)
		if last.status != 200 {
			break
		}
	}
	expectError(t, "over the rate limit", last, 429, "resource_exhausted", "")
	if !strings.Contains(string(last.raw), "google.rpc.RetryInfo") {
		t.Errorf("429 without the retry delay: %s", last.raw)
	}
	// Retry-After: the seconds until the bucket (discovery: 1 a second)
	// holds a token again, rounded up.
	if got := last.header.Values("Retry-After"); len(got) != 1 || got[0] != "1" {
		t.Errorf("429 with Retry-After %q, want [1]", got)
	}

	// The server-side deadline (--rpc-timeout) bounds an HTTP/JSON call too.
	_, h = jsonServer(t, bin, "--rpc-timeout", "1ns")
	expectError(t, "past the server-side deadline", post(t, nil, h, "/cardex.v1.DiscoveryService/DiscoverTools", jsonDiscoverToken, `{"query":"x"}`),
		504, "deadline_exceeded", "deadline")

}

// TestSameShortlistEverySurface: for the same caller, query and intents,
// DiscoverTools over gRPC, DiscoverTools over HTTP/JSON, MCP search_tools and
// ExecutionService.SearchTools (gRPC and HTTP/JSON) with a format answer the
// same shortlist, with the same definitions and the same answer for the
// provider, in every format.
func TestSameShortlistEverySurface(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	addr, h := jsonServer(t, bin)
	if out, code := run(t, bin, addr, "cards", "apply", "-f", "../../examples/catalog/", "--token", jsonAdminToken); code != 0 {
		t.Fatalf("cards apply: %s", out)
	}

	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	disc := pb.NewDiscoveryServiceClient(conn)
	gctx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+jsonDiscoverToken)
	exec := pb.NewExecutionServiceClient(conn)
	actx := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+jsonAgentToken)

	tr := &mcp.StreamableClientTransport{Endpoint: "http://" + h + "/mcp", MaxRetries: -1,
		HTTPClient: &http.Client{Transport: bearerTransport{jsonAgentToken}}}
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "orchestrator", Version: "1"}, nil).Connect(t.Context(), tr, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()

	type shortlist struct {
		Names       []string // provider names, in order
		Definitions []any
		Result      any
	}
	decode := func(s string) any {
		var v any
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		return v
	}
	for _, q := range []struct {
		query   string
		intents []string
	}{
		{query: "where is my package"},
		{intents: []string{"find the customer's ticket", "look up the order it is about"}},
	} {
		for _, f := range []string{"anthropic_tool_reference", "anthropic_tools", "openai_tool_search", "openai_functions"} {
			callID := ""
			if strings.HasSuffix(f, "tool_reference") || strings.HasSuffix(f, "tool_search") {
				callID = "call_7"
			}
			what := fmt.Sprintf("%s %q %q", f, q.query, q.intents)

			g, err := disc.DiscoverTools(gctx, &pb.DiscoverToolsRequest{Query: q.query, Intents: q.intents, TopK: 4, Format: f, CallId: callID})
			if err != nil {
				t.Fatalf("%s: gRPC: %v", what, err)
			}
			var overGRPC shortlist
			for _, tl := range g.GetTools() {
				overGRPC.Names = append(overGRPC.Names, tl.GetProviderName())
				overGRPC.Definitions = append(overGRPC.Definitions, decode(tl.GetDefinitionJson()))
			}
			overGRPC.Result = decode(g.GetProviderJson())
			if len(overGRPC.Names) == 0 {
				t.Fatalf("%s: empty shortlist", what)
			}

			body, _ := json.Marshal(map[string]any{"query": q.query, "intents": q.intents, "topK": 4, "format": f, "callId": callID})
			hc := post(t, nil, h, "/cardex.v1.DiscoveryService/DiscoverTools", jsonDiscoverToken, string(body))
			if hc.status != 200 {
				t.Fatalf("%s: HTTP/JSON: %d %s", what, hc.status, hc.raw)
			}
			var overHTTP shortlist
			for _, tl := range hc.body["tools"].([]any) {
				m := tl.(map[string]any)
				overHTTP.Names = append(overHTTP.Names, m["providerName"].(string))
				overHTTP.Definitions = append(overHTTP.Definitions, decode(m["definitionJson"].(string)))
			}
			overHTTP.Result = decode(hc.body["providerJson"].(string))

			args := map[string]any{"query": q.query, "limit": 4, "format": f}
			if q.intents != nil {
				args["intents"] = q.intents
			}
			if callID != "" {
				args["call_id"] = callID
			}
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "search_tools", Arguments: args})
			if err != nil || res.IsError {
				t.Fatalf("%s: MCP: %v %+v", what, err, res)
			}
			var shaped struct {
				Definitions []any
				Result      any
			}
			if err := json.Unmarshal([]byte(res.Content[0].(*mcp.TextContent).Text), &shaped); err != nil {
				t.Fatal(err)
			}
			overMCP := shortlist{Definitions: shaped.Definitions, Result: shaped.Result}
			for _, d := range shaped.Definitions {
				overMCP.Names = append(overMCP.Names, d.(map[string]any)["name"].(string))
			}

			// ExecutionService.SearchTools, as the agent, over gRPC and
			// HTTP/JSON.
			es, err := exec.SearchTools(actx, &pb.ExecutionServiceSearchToolsRequest{Query: q.query, Intents: q.intents, Limit: 4, Format: f, CallId: callID})
			if err != nil {
				t.Fatalf("%s: ExecutionService over gRPC: %v", what, err)
			}
			overExec := shortlist{Result: decode(es.GetProviderJson())}
			for _, d := range es.GetDefinitionsJson() {
				def := decode(d)
				overExec.Names = append(overExec.Names, def.(map[string]any)["name"].(string))
				overExec.Definitions = append(overExec.Definitions, def)
			}
			body, _ = json.Marshal(map[string]any{"query": q.query, "intents": q.intents, "limit": 4, "format": f, "callId": callID})
			ec := post(t, nil, h, "/cardex.v1.ExecutionService/SearchTools", jsonAgentToken, string(body))
			if ec.status != 200 {
				t.Fatalf("%s: ExecutionService over HTTP/JSON: %d %s", what, ec.status, ec.raw)
			}
			overExecHTTP := shortlist{Result: decode(ec.body["providerJson"].(string))}
			for _, d := range ec.body["definitionsJson"].([]any) {
				def := decode(d.(string))
				overExecHTTP.Names = append(overExecHTTP.Names, def.(map[string]any)["name"].(string))
				overExecHTTP.Definitions = append(overExecHTTP.Definitions, def)
			}

			if !reflect.DeepEqual(overGRPC, overExec) {
				t.Errorf("%s: DiscoverTools and ExecutionService.SearchTools differ:\n%v\n%v", what, overGRPC, overExec)
			}
			if !reflect.DeepEqual(overGRPC, overExecHTTP) {
				t.Errorf("%s: DiscoverTools and ExecutionService.SearchTools over HTTP/JSON differ:\n%v\n%v", what, overGRPC, overExecHTTP)
			}
			if !reflect.DeepEqual(overGRPC, overHTTP) {
				t.Errorf("%s: gRPC and HTTP/JSON differ:\n%v\n%v", what, overGRPC, overHTTP)
			}
			if !reflect.DeepEqual(overGRPC, overMCP) {
				t.Errorf("%s: gRPC and MCP differ:\n%v\n%v", what, overGRPC, overMCP)
			}
		}
	}
}

// openAPIValidate validates an OpenAPI document (a file) with
// @apidevtools/swagger-parser, an established validator: the Swagger 2.0
// JSON Schema, then its semantic checks (unique operation ids, path
// parameters, $refs that resolve...).
const openAPIValidate = `
const SwaggerParser = require("@apidevtools/swagger-parser");
SwaggerParser.validate(process.argv[1]).then(
  api => console.log("valid: " + api.info.title + ", " + Object.keys(api.paths).length + " paths"),
  err => { console.error("invalid: " + err.message); process.exit(1); });
`

// TestOpenAPIValidates: the document the server serves at /openapi.json
// passes @apidevtools/swagger-parser's validation, with one path per RPC;
// a document with a fault does not (the check can fail).
func TestOpenAPIValidates(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary and node")
	}
	needTool(t, "node", have("node"))
	_, err := os.Stat(filepath.Join(repoRoot, "node_modules", "@apidevtools", "swagger-parser", "package.json"))
	needTool(t, "the npm packages (npm ci)", err == nil)
	bin := buildBinary(t)
	_, h := jsonServer(t, bin)
	resp, err := http.Get("http://" + h + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	served, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /openapi.json: %d %v", resp.StatusCode, err)
	}
	validate := func(doc []byte) (string, error) {
		f := filepath.Join(t.TempDir(), "openapi.json")
		if err := os.WriteFile(f, doc, 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("node", "-e", openAPIValidate, f)
		cmd.Dir = repoRoot
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	out, err := validate(served)
	if err != nil {
		t.Fatalf("/openapi.json does not validate: %s", out)
	}
	if want := fmt.Sprintf("%d paths", len(calledPaths)); !strings.HasSuffix(out, want) {
		t.Errorf("validator says %q; want %s (one per RPC)", out, want)
	}
	// The same document with a $ref to a definition it does not have.
	broken := bytes.Replace(served, []byte(`"#/definitions/v1DiscoverToolsResponse"`), []byte(`"#/definitions/v1NoSuchMessage"`), 1)
	if bytes.Equal(broken, served) {
		t.Fatal("the document has no v1DiscoverToolsResponse reference to break")
	}
	if out, err := validate(broken); err == nil {
		t.Errorf("a document with a dangling $ref validates: %s", out)
	}
}
