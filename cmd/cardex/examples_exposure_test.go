package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// TestSearchExamplesNeverReachAnAgent: a card's search examples are
// searched — a request worded only like one of them finds the card — but no
// answer an agent can get carries them: DiscoverTools (and its token
// estimate), SearchTools, DescribeTool and AuthorizeCall over gRPC, MCP
// tools/list, search_tools and describe_tool over /mcp, and the console's
// playground. Catalogue readers (GetCard, ListCards, cards get) see them.
func TestSearchExamplesNeverReachAnAgent(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	// The marker words occur in the examples and nowhere else.
	const marker = "flibbertigibbet"
	examples := []string{"reconcile the quarterly " + marker + " ledger", "balance my zorbulent accounts"}

	dir := t.TempDir()
	tokens := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(tokens, []byte(`tokens:
  - {token: progressive-agent-0123456789, tenant: acme, subject: books-agent, scopes: ["books:read"]}
  - {token: full-agent-token-0123456789, tenant: acme, subject: lister, scopes: ["books:read"], disclosure: full}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CARDEX_AGENT_TOKENS", tokens)
	bin := buildBinary(t)
	addr, httpAddr, _ := startServerHTTP(t, bin, filepath.Join(dir, "data"))
	conn, err := dial(addr, "", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := t.Context()
	cat, disc := pb.NewCatalogServiceClient(conn), pb.NewDiscoveryServiceClient(conn)

	card := &pb.Card{Tenant: "acme", Server: "books", Name: "close_period", Kind: "mcp_tool",
		Summary: "Close an accounting period.", RequiredScopes: []string{"books:read"},
		InputSchema: `{"type":"object","properties":{"period":{"type":"string"}},"required":["period"]}`}
	other := &pb.Card{Tenant: "acme", Server: "books", Name: "list_invoices", Kind: "mcp_tool",
		Summary: "List the invoices of a period.", RequiredScopes: []string{"books:read"}}
	if _, err := cat.PutCards(ctx, &pb.PutCardsRequest{Cards: []*pb.Card{card, other}}); err != nil {
		t.Fatal(err)
	}
	caller := &pb.Caller{Tenant: "acme", Subject: "a", Scopes: []string{"books:read"}}
	discover := func(q string) *pb.DiscoverToolsResponse {
		t.Helper()
		res, err := disc.DiscoverTools(ctx, &pb.DiscoverToolsRequest{Caller: caller, Query: q, TopK: 5})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	before := discover("close an accounting period")

	// The same card with examples, written as a model would.
	withEx := proto.Clone(card).(*pb.Card)
	withEx.SearchExamples = examples
	withEx.SearchExamplesSource = &pb.ExamplesSource{Author: "model", Model: "test-model", PromptVersion: "v1"}
	if _, err := cat.PutCards(ctx, &pb.PutCardsRequest{Cards: []*pb.Card{withEx}}); err != nil {
		t.Fatal(err)
	}

	// Found through its examples alone.
	found := discover("reconcile the " + marker + " ledger")
	if len(found.Tools) == 0 || found.Tools[0].GetCard().GetName() != "close_period" {
		t.Fatalf("a request worded like an example did not find the card first: %v", found.Tools)
	}
	noMarker := func(surface string, b []byte) {
		t.Helper()
		if s := strings.ToLower(string(b)); strings.Contains(s, marker) || strings.Contains(s, "zorbulent") || strings.Contains(s, "search_examples") ||
			strings.Contains(s, "searchexamples") || strings.Contains(s, "test-model") {
			t.Errorf("%s carries the search examples:\n%s", surface, b)
		}
	}
	pj := func(m proto.Message) []byte { b, _ := protojson.Marshal(m); return b }
	noMarker("DiscoverTools", pj(found))

	// The token estimate is the same with and without examples.
	after := discover("close an accounting period")
	noMarker("DiscoverTools", pj(after))
	if before.GetTokens().GetShortlistTokens() != after.GetTokens().GetShortlistTokens() ||
		before.GetTokens().GetCatalogTokens() != after.GetTokens().GetCatalogTokens() || after.GetTokens().GetCatalogTokens() == 0 {
		t.Errorf("token estimate moved with the examples: %v → %v", before.GetTokens(), after.GetTokens())
	}
	for i, tool := range after.Tools {
		if tool.GetTokens() != before.Tools[i].GetTokens() {
			t.Errorf("tool %s: %d tokens, %d before the examples", tool.GetCard().GetName(), tool.GetTokens(), before.Tools[i].GetTokens())
		}
	}

	st, err := disc.SearchTools(ctx, &pb.SearchToolsRequest{Caller: caller, Query: marker + " ledger"})
	if err != nil {
		t.Fatal(err)
	}
	noMarker("SearchTools", pj(st))
	dt, err := disc.DescribeTool(ctx, &pb.DescribeToolRequest{Caller: caller, Server: "books", Name: "close_period"})
	if err != nil || dt.GetCard().GetName() != "close_period" {
		t.Fatalf("DescribeTool: %v %v", err, dt)
	}
	noMarker("DescribeTool", pj(dt))
	ac, err := disc.AuthorizeCall(ctx, &pb.AuthorizeCallRequest{Caller: caller, Server: "books", Name: "close_period", ArgumentsJson: `{"period": 7}`})
	if err != nil {
		t.Fatal(err)
	}
	noMarker("AuthorizeCall", pj(ac))

	// MCP, as an agent holding a token.
	session := func(token string) *mcp.ClientSession {
		t.Helper()
		tr := &mcp.StreamableClientTransport{Endpoint: "http://" + httpAddr + "/mcp", MaxRetries: -1,
			HTTPClient: &http.Client{Transport: bearerTransport{token}}}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil).Connect(context.Background(), tr, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		return cs
	}
	full := session("full-agent-token-0123456789")
	lt, err := full.ListTools(ctx, nil)
	if err != nil || len(lt.Tools) != 2 {
		t.Fatalf("tools/list (full disclosure): %v %+v", err, lt)
	}
	b, _ := json.Marshal(lt)
	noMarker("MCP tools/list", b)
	prog := session("progressive-agent-0123456789")
	for _, call := range []mcp.CallToolParams{
		{Name: "search_tools", Arguments: map[string]any{"query": "reconcile the " + marker + " ledger"}},
		{Name: "describe_tool", Arguments: map[string]any{"name": "close_period"}},
	} {
		res, err := prog.CallTool(ctx, &call)
		if err != nil || res.IsError {
			t.Fatalf("%s: %v %+v", call.Name, err, res)
		}
		b, _ := json.Marshal(res)
		if !strings.Contains(string(b), "close_period") {
			t.Errorf("%s does not name the card: %s", call.Name, b)
		}
		noMarker("MCP "+call.Name, b)
	}

	// The console's playground.
	q := url.Values{"query": {"reconcile the " + marker + " ledger"}, "tenant": {"acme"}, "subject": {"a"}, "scopes": {"books:read"}}
	resp, err := http.Get("http://" + httpAddr + "/console/playground?" + q.Encode())
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(page), "close_period") {
		t.Fatalf("playground: %d\n%s", resp.StatusCode, page)
	}
	// The page echoes the query the person typed; the examples are not on it.
	noMarker("console playground", []byte(strings.ReplaceAll(string(page), marker+" ledger", "")))

	// Catalogue readers see them.
	gc, err := cat.GetCard(ctx, &pb.GetCardRequest{Tenant: "acme", Server: "books", Name: "close_period"})
	if err != nil || strings.Join(gc.GetCard().GetSearchExamples(), "|") != strings.Join(examples, "|") ||
		gc.GetCard().GetSearchExamplesSource().GetModel() != "test-model" || gc.GetCard().GetSearchExamplesStale() {
		t.Fatalf("GetCard: %v %v", err, gc)
	}
	lc, err := cat.ListCards(ctx, &pb.ListCardsRequest{Tenant: "acme"})
	if err != nil || len(lc.GetCards()) != 2 || len(lc.GetCards()[0].GetSearchExamples()) != 2 {
		t.Fatalf("ListCards: %v %v", err, lc)
	}
	if out, code := run(t, bin, addr, "cards", "get", "books/close_period", "--tenant", "acme"); code != 0 ||
		!strings.Contains(out, marker) || !strings.Contains(out, "model test-model (prompt v1)") {
		t.Fatalf("cards get: exit %d\n%s", code, out)
	}
}
