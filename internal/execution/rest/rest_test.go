package rest_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/execution/gateway"
	"github.com/seed0cff8200/cardex/internal/execution/rest"
	"github.com/seed0cff8200/cardex/internal/execution/upstream"
	"github.com/seed0cff8200/cardex/internal/sources/openapiimport"
	"github.com/seed0cff8200/cardex/internal/testkit/petstore"
	"github.com/seed0cff8200/cardex/retriever"
)

const apiKey = "petstore-secret-key-42"

type env struct {
	st        cards.Store
	ps        *petstore.Server
	gw        *gateway.Gateway
	auditPath string
}

// setup imports the Petstore spec with the real importer, registers the
// cards, and points a rest upstream (loaded from an upstreams file) at a
// real petstore on loopback.
func setup(t *testing.T, entry string) *env {
	t.Helper()
	ctx := context.Background()
	ps := petstore.Start(apiKey)
	t.Cleanup(ps.Close)
	t.Setenv("PETSTORE_KEY", apiKey)
	dir := t.TempDir()
	upath := filepath.Join(dir, "upstreams.yaml")
	body := "upstreams:\n  - server: petstore\n    kind: rest\n    base_url: " + ps.BaseURL +
		"\n    headers: {api_key: \"${PETSTORE_KEY}\"}\n    timeout: 500ms\n" + entry
	if err := os.WriteFile(upath, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := upstream.LoadConfig(upath)
	if err != nil {
		t.Fatal(err)
	}

	doc, err := openapiimport.Load(ctx, "../../../testdata/openapi/petstore3.yaml")
	if err != nil {
		t.Fatal(err)
	}
	imported, skipped, err := openapiimport.ToCards(doc, "acme", "petstore")
	if err != nil || len(skipped) != 0 {
		t.Fatalf("import: %v %v", skipped, err)
	}
	st, err := embedded.Open(filepath.Join(dir, "store"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if _, err := st.Put(ctx, imported); err != nil {
		t.Fatal(err)
	}
	ret, err := retriever.New(ctx, st, embed.NewHashed(embed.DefaultDim), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ret.Close() })
	auditPath := filepath.Join(dir, "audit.jsonl")
	audit, err := upstream.OpenAudit(auditPath, []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { audit.Close() })
	ex := rest.New(cfg, "test", nil)
	t.Cleanup(ex.Close)
	gw := &gateway.Gateway{Retriever: ret, Executors: map[cards.Kind]gateway.Executor{cards.KindRESTOperation: ex}, Audit: audit}
	return &env{st: st, ps: ps, gw: gw, auditPath: auditPath}
}

var admin = retriever.Caller{Tenant: "acme", Subject: "ops", Scopes: []string{"*"}}

func (e *env) call(t *testing.T, c retriever.Caller, name, args string) (*mcp.CallToolResult, error) {
	t.Helper()
	res, err := e.gw.Call(context.Background(), c, gateway.Origin{Via: "test"}, name, "petstore", json.RawMessage(args))
	return res.Result, err
}

func structured(t *testing.T, r *mcp.CallToolResult) map[string]json.RawMessage {
	t.Helper()
	b, err := json.Marshal(r.StructuredContent)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("structuredContent is not an object: %s", b)
	}
	return m
}

func text(r *mcp.CallToolResult) string {
	var parts []string
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func TestCalls(t *testing.T) {
	e := setup(t, "")
	for _, tc := range []struct {
		name, tool, args string
		// wantURI is the request the petstore must have received.
		wantURI, wantMethod, wantBody string
		check                         func(t *testing.T, r *mcp.CallToolResult, s map[string]json.RawMessage)
	}{
		{name: "path parameter, JSON answer", tool: "getPetById", args: `{"petId": 7}`,
			wantURI: "/v3/pet/7", wantMethod: "GET",
			check: func(t *testing.T, r *mcp.CallToolResult, s map[string]json.RawMessage) {
				var pet petstore.Pet
				if r.IsError || string(s["status"]) != "200" || json.Unmarshal(s["body"], &pet) != nil || pet.Name != "Doggie" {
					t.Fatalf("isError %v, structured %s", r.IsError, s)
				}
				if !strings.Contains(text(r), `"name":"Doggie"`) {
					t.Fatalf("text content %q", text(r))
				}
				if _, ok := s["pagination"]; ok {
					t.Fatal("a single pet is not a page")
				}
			}},
		{name: "JSON body", tool: "addPet", args: `{"name": "Bella", "photoUrls": ["a.jpg"], "status": "available", "id": 12345678901234567}`,
			wantURI: "/v3/pet", wantMethod: "POST", wantBody: `{"id":12345678901234567,"name":"Bella","photoUrls":["a.jpg"],"status":"available"}`,
			check: func(t *testing.T, r *mcp.CallToolResult, s map[string]json.RawMessage) {
				if r.IsError || !strings.Contains(string(s["body"]), `"id":12345678901234567`) {
					t.Fatalf("isError %v, structured %s", r.IsError, s)
				}
			}},
		{name: "query, array answer, Link pagination", tool: "findPetsByStatus", args: `{"status": "available"}`,
			wantURI: "/v3/pet/findByStatus?status=available", wantMethod: "GET",
			check: func(t *testing.T, r *mcp.CallToolResult, s map[string]json.RawMessage) {
				var pets []petstore.Pet
				if r.IsError || json.Unmarshal(s["body"], &pets) != nil || len(pets) != petstore.PageSize {
					t.Fatalf("isError %v, structured %s", r.IsError, s)
				}
				var p rest.Page
				if err := json.Unmarshal(s["pagination"], &p); err != nil || !strings.Contains(p.Note, "one page") ||
					string(p.Next) != `"`+e.ps.BaseURL+`/pet/findByStatus?status=available\u0026page=2"` {
					t.Fatalf("pagination %s", s["pagination"])
				}
				if !strings.Contains(text(r), "One page") {
					t.Fatalf("the text does not say it is one page: %q", text(r))
				}
			}},
		{name: "path and query parameters", tool: "updatePetWithForm", args: `{"petId": 3, "name": "Kit & Kat", "status": "sold"}`,
			wantURI: "/v3/pet/3?name=Kit+%26+Kat&status=sold", wantMethod: "POST",
			check: func(t *testing.T, r *mcp.CallToolResult, s map[string]json.RawMessage) {
				if p, _ := e.ps.Pet(3); p.Name != "Kit & Kat" || r.IsError {
					t.Fatalf("pet %+v, structured %s", p, s)
				}
			}},
		{name: "a path parameter is one escaped segment", tool: "getUserByName", args: `{"username": "a/b c?d#e"}`,
			wantURI: "/v3/user/a%2Fb%20c%3Fd%23e", wantMethod: "GET",
			check: func(t *testing.T, r *mcp.CallToolResult, s map[string]json.RawMessage) {
				if r.IsError || !strings.Contains(string(s["body"]), `"username":"a/b c?d#e"`) {
					t.Fatalf("structured %s", s)
				}
			}},
		{name: "arguments cannot change the host", tool: "getUserByName", args: `{"username": "@evil.example.com:80"}`,
			wantURI: "/v3/user/@evil.example.com:80", wantMethod: "GET"},
		{name: "text answer", tool: "loginUser", args: `{"username": "ada", "password": "pw"}`,
			wantURI: "/v3/user/login?password=pw&username=ada", wantMethod: "GET",
			check: func(t *testing.T, r *mcp.CallToolResult, s map[string]json.RawMessage) {
				if r.IsError || text(r) != "logged in user session: ada" || s["body"] != nil || string(s["status"]) != "200" {
					t.Fatalf("text %q, structured %s", text(r), s)
				}
			}},
		{name: "4xx is a tool error with status and body", tool: "getPetById", args: `{"petId": 404}`,
			wantURI: "/v3/pet/404", wantMethod: "GET",
			check: func(t *testing.T, r *mcp.CallToolResult, s map[string]json.RawMessage) {
				if !r.IsError || string(s["status"]) != "404" || !strings.Contains(text(r), "HTTP 404 Not Found") || !strings.Contains(text(r), "Pet not found") {
					t.Fatalf("isError %v, text %q, structured %s", r.IsError, text(r), s)
				}
			}},
		{name: "5xx is a tool error with status and body", tool: "getPetById", args: `{"petId": 500}`,
			wantURI: "/v3/pet/500", wantMethod: "GET",
			check: func(t *testing.T, r *mcp.CallToolResult, s map[string]json.RawMessage) {
				if !r.IsError || string(s["status"]) != "500" || !strings.Contains(text(r), "on fire") {
					t.Fatalf("isError %v, text %q, structured %s", r.IsError, text(r), s)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(e.ps.Requests())
			r, err := e.call(t, admin, tc.tool, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			reqs := e.ps.Requests()[before:]
			if len(reqs) != 1 {
				t.Fatalf("%d requests reached the petstore, want 1", len(reqs))
			}
			got := reqs[0]
			if got.RequestURI != tc.wantURI || got.Method != tc.wantMethod || got.APIKey != apiKey {
				t.Fatalf("petstore got %s %s (api_key %q), want %s %s", got.Method, got.RequestURI, got.APIKey, tc.wantMethod, tc.wantURI)
			}
			if tc.wantBody != "" && (got.Body != tc.wantBody || got.Header.Get("Content-Type") != "application/json") {
				t.Fatalf("body %s (%s), want %s", got.Body, got.Header.Get("Content-Type"), tc.wantBody)
			}
			if strings.Contains(text(r), apiKey) {
				t.Fatal("the credential reached the result")
			}
			if tc.check != nil {
				tc.check(t, r, structured(t, r))
			}
		})
	}
}

func TestRefusals(t *testing.T) {
	e := setup(t, "")
	reader := retriever.Caller{Tenant: "acme", Subject: "r", Scopes: []string{"read:pets"}}
	other := retriever.Caller{Tenant: "globex", Subject: "g", Scopes: []string{"*"}}
	for _, tc := range []struct {
		name     string
		caller   retriever.Caller
		tool     string
		args     string
		wantOut  string // the Denial's outcome
		wantText string
	}{
		{"forbidden: scopes", reader, "getPetById", `{"petId": 7}`, upstream.OutcomeDeniedUnknown, `unknown tool "getPetById"`},
		{"forbidden: tenant", other, "getPetById", `{"petId": 7}`, upstream.OutcomeDeniedUnknown, `unknown tool "getPetById"`},
		{"invalid arguments", admin, "getPetById", `{"petId": "seven"}`, upstream.OutcomeDeniedArguments, "want integer"},
		{"unknown argument", admin, "getPetById", `{"petId": 7, "host": "evil.example.com"}`, upstream.OutcomeDeniedArguments, "host"},
		{"path traversal", admin, "getUserByName", `{"username": "../admin"}`, upstream.OutcomeDeniedArguments, `username: is a path parameter and must not be or contain a ".." segment`},
		{"path traversal, escaped slash", admin, "getUserByName", `{"username": "x/../../admin"}`, upstream.OutcomeDeniedArguments, `".." segment`},
		{"dot segment", admin, "getUserByName", `{"username": "."}`, upstream.OutcomeDeniedArguments, `"." segment`},
		{"empty path parameter", admin, "getUserByName", `{"username": ""}`, upstream.OutcomeDeniedArguments, "must not be empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(e.ps.Requests())
			_, err := e.call(t, tc.caller, tc.tool, tc.args)
			var d *gateway.Denial
			if !errors.As(err, &d) || d.Outcome != tc.wantOut || !strings.Contains(d.Error(), tc.wantText) {
				t.Fatalf("err %v, want a %s denial with %q", err, tc.wantOut, tc.wantText)
			}
			if n := len(e.ps.Requests()) - before; n != 0 {
				t.Fatalf("%d requests reached the petstore", n)
			}
		})
	}
}

func TestFailures(t *testing.T) {
	petstore.Slow = 2 * time.Second
	e := setup(t, "")
	for _, tc := range []struct {
		name, tool, args string
		kind             string
		wantText         string
		wantRequests     int
	}{
		{"over-large response", "getUserByName", `{"username": "` + petstore.BigUser + `"}`, upstream.KindTooLarge,
			"larger than the upstream's max_response_bytes (1048576 bytes): nothing of it is returned", 1},
		{"idempotent timeout", "getOrderById", `{"orderId": 7391957}`, upstream.KindTimeout,
			`upstream "petstore" did not answer in time: GET /store/order/{orderId}: no answer within 500ms`, 1},
		{"non-idempotent timeout: uncertain, not retried", "placeOrder", `{"quantity": 7391957, "petId": 7}`, upstream.KindUncertain,
			"outcome uncertain: upstream \"petstore\" did not answer POST /store/order within 500ms; the call may or may not have taken effect, and it was not retried", 1},
		{"non-idempotent dropped connection: uncertain, not retried", "placeOrder", `{"quantity": 6161637, "petId": 7}`, upstream.KindUncertain,
			"lost the connection during POST /store/order", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := len(e.ps.Requests())
			_, err := e.call(t, admin, tc.tool, tc.args)
			var ce *upstream.CallError
			if !errors.As(err, &ce) || ce.Kind != tc.kind || !strings.Contains(err.Error(), tc.wantText) {
				t.Fatalf("err %v, want %s with %q", err, tc.kind, tc.wantText)
			}
			if strings.Contains(err.Error(), "7391957") || strings.Contains(err.Error(), "6161637") {
				t.Fatalf("the error quotes argument values: %v", err)
			}
			if n := len(e.ps.Requests()) - before; n != tc.wantRequests {
				t.Fatalf("%d requests reached the petstore, want %d", n, tc.wantRequests)
			}
		})
	}
	// Audited like MCP calls: the outcome, never the arguments, the
	// credential or the body.
	b, err := os.ReadFile(e.auditPath)
	if err != nil {
		t.Fatal(err)
	}
	var outcomes []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var a upstream.AuditEntry
		if err := json.Unmarshal([]byte(line), &a); err != nil {
			t.Fatal(err)
		}
		if a.Server != "petstore" || a.Tool == "" || a.ID == "" {
			t.Errorf("audit entry %s", line)
		}
		outcomes = append(outcomes, a.Outcome)
	}
	want := []string{upstream.KindTooLarge, upstream.KindTimeout, upstream.KindUncertain, upstream.KindUncertain}
	if strings.Join(outcomes, ",") != strings.Join(want, ",") {
		t.Fatalf("audit outcomes %v, want %v", outcomes, want)
	}
	for _, leak := range []string{"7391957", "6161637", apiKey, "xxxx"} {
		if strings.Contains(string(b), leak) {
			t.Fatalf("the audit log holds %q:\n%s", leak, b)
		}
	}
}

func TestUnreachableAndConfig(t *testing.T) {
	// A port nobody listens on: connection refused, nothing sent, so even a
	// POST is not uncertain.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + l.Addr().String()
	l.Close()
	e := setup(t, "  - {server: petstore, tenant: globex, kind: rest, base_url: "+dead+"}\n"+
		"  - {server: petstore, tenant: initech, kind: rest, base_url: "+dead+", headers: {api_key: \"${PETSTORE_UNSET_KEY}\"}}\n"+
		"  - {server: petstore, tenant: hooli, url: "+dead+"/mcp}\n")
	t.Setenv("PETSTORE_UNSET_KEY", "")
	os.Unsetenv("PETSTORE_UNSET_KEY")
	ctx := context.Background()
	doc, err := openapiimport.Load(ctx, "../../../testdata/openapi/petstore3.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tenant := range []string{"globex", "initech", "hooli"} {
		cs, _, _ := openapiimport.ToCards(doc, tenant, "petstore")
		if _, err := e.st.Put(ctx, cs); err != nil {
			t.Fatal(err)
		}
	}
	trace := cards.Card{Tenant: "globex", Server: "petstore", Name: "traceEcho", Kind: cards.KindRESTOperation, Summary: "Echo the request.",
		InputSchema: json.RawMessage(`{"type":"object","x-cardex-http":{"method":"TRACE","path":"/echo"}}`)}
	if _, err := e.st.Put(ctx, []cards.Card{trace}); err != nil {
		t.Fatal(err)
	}
	if err := e.gw.Retriever.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tenant, tool, args, kind, want string
	}{
		{"globex", "placeOrder", `{"quantity": 1}`, upstream.KindUnreachable, "connection refused"},
		{"globex", "getPetById", `{"petId": 1}`, upstream.KindUnreachable, "GET /pet/{petId}"},
		{"initech", "getPetById", `{"petId": 1}`, upstream.KindNotRegistered, "PETSTORE_UNSET_KEY is not set"},
		{"hooli", "getPetById", `{"petId": 1}`, upstream.KindNotRegistered, "registered as a mcp upstream"},
		// A TRACE card (written by hand: the importer skips them) is never
		// forwarded: the answer would echo the credential headers.
		{"globex", "traceEcho", `{}`, upstream.KindNotRegistered, "TRACE is not forwarded"},
	} {
		c := retriever.Caller{Tenant: tc.tenant, Subject: "x", Scopes: []string{"*"}}
		_, err := e.call(t, c, tc.tool, tc.args)
		var ce *upstream.CallError
		if !errors.As(err, &ce) || ce.Kind != tc.kind || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s %s: %v, want %s with %q", tc.tenant, tc.tool, err, tc.kind, tc.want)
		}
		// The upstream's address is the deployment's business, not the
		// agent's: not in the error it is shown (issue 20, finding 11).
		if err != nil && (strings.Contains(err.Error(), "127.0.0.1") || strings.Contains(err.Error(), dead[len("http://127.0.0.1:"):])) {
			t.Errorf("%s %s: the error names the upstream's address: %v", tc.tenant, tc.tool, err)
		}
	}
	// Nor in the audit log.
	audit, err := os.ReadFile(e.auditPath)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(audit), "127.0.0.1") || strings.Contains(string(audit), dead[len("http://127.0.0.1:"):]) {
		t.Errorf("the audit log names the upstream's address:\n%s", audit)
	}
}
