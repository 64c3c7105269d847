package agents_test

// ExecutionService.SearchTools with intents, on a real gRPC server on
// loopback over the real embedded store, with callers identified by the
// agent token file.

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/access/tokens"
	"github.com/seed0cff8200/cardex/internal/execution/gateway"
	"github.com/seed0cff8200/cardex/internal/faces/agents"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
	"github.com/seed0cff8200/cardex/retriever"
)

const (
	supportToken = "support-agent-token-0123456789"
	globexToken  = "globex-agent-token-0123456789"
)

var supportScopes = []string{"support:read", "support:write", "orders:read", "billing:read"}

var supportCaller = retriever.Caller{Tenant: "acme", Subject: "support-agent", Scopes: supportScopes}

func loadCatalogue(t *testing.T, dirs ...string) []cards.Card {
	t.Helper()
	var out []cards.Card
	for _, d := range dirs {
		cs, _, err := cards.LoadPath(d)
		if err != nil || len(cs) == 0 {
			t.Fatalf("LoadPath(%s): %d cards, %v", d, len(cs), err)
		}
		out = append(out, cs...)
	}
	return out
}

// visibleToSupport selects, independently of the retriever's gate, the acme
// cards whose every required scope the support caller holds literally.
func visibleToSupport(cs []cards.Card) []cards.Card {
	var out []cards.Card
	for _, c := range cs {
		ok := c.Tenant == "acme"
		for _, s := range c.RequiredScopes {
			ok = ok && slices.Contains(supportScopes, s)
		}
		if ok {
			out = append(out, c)
		}
	}
	return out
}

type execEnv struct {
	client pb.ExecutionServiceClient
	srv    pb.ExecutionServiceServer // the handlers the client reaches
	ret    *retriever.Retriever
}

// startExec serves the ExecutionService over cs, with a retriever built with
// opts, and returns a connected client.
func startExec(t *testing.T, cs []cards.Card, opts ...retriever.Option) *execEnv {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	st, err := embedded.Open(filepath.Join(dir, "store"))
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
	tokenFile := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(tokenFile, []byte(`tokens:
  - {token: `+supportToken+`, tenant: acme, subject: support-agent, scopes: [support:read, support:write, orders:read, billing:read]}
  - {token: `+globexToken+`, tenant: globex, subject: ops, scopes: ["*"]}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := agents.Open(agents.Config{Retriever: ret, DataDir: dir, Key: []byte("0123456789abcdef0123456789abcdef"), TokenFile: tokenFile})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	gs := grpc.NewServer()
	srv := s.Execution()
	pb.RegisterExecutionServiceServer(gs, srv)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	t.Cleanup(func() {
		gs.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &execEnv{client: pb.NewExecutionServiceClient(conn), srv: srv, ret: ret}
}

func asAgent(t *testing.T, token string) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	if token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

func (e *execEnv) search(t *testing.T, token string, req *pb.ExecutionServiceSearchToolsRequest) *pb.ExecutionServiceSearchToolsResponse {
	t.Helper()
	res, err := e.client.SearchTools(asAgent(t, token), req)
	if err != nil {
		t.Fatalf("SearchTools(%q, %q): %v", req.GetQuery(), req.GetIntents(), err)
	}
	return res
}

func summaryNames(ts []*pb.ToolSummary) []string {
	out := make([]string, len(ts))
	for i, x := range ts {
		out[i] = x.GetServer() + "/" + x.GetName()
	}
	return out
}

func TestSearchToolsIntents(t *testing.T) {
	all := loadCatalogue(t, "../../../examples/catalog", "../../../examples/catalog-other-tenant")
	visible := visibleToSupport(all)
	if len(visible) != 18 {
		t.Fatalf("example catalogue changed: %d cards visible to support, want 18", len(visible))
	}
	full, bare := startExec(t, all), startExec(t, visible)
	intents := []string{"where is my package", "show the invoice with its line items", "refund the customer now", "void invoice"}

	for _, tc := range []struct {
		name  string
		req   *pb.ExecutionServiceSearchToolsRequest
		query string
		limit int
	}{
		{"intents only", &pb.ExecutionServiceSearchToolsRequest{Intents: intents}, "", gateway.DefaultLimit},
		{"query and intents", &pb.ExecutionServiceSearchToolsRequest{Query: "customer wants their money back", Intents: intents, Limit: 6}, "customer wants their money back", 6},
		{"over the cap", &pb.ExecutionServiceSearchToolsRequest{Intents: intents[:2], Limit: 500}, "", gateway.MaxLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := full.search(t, supportToken, tc.req)
			if len(res.GetMatches()) != len(res.GetTools()) || len(res.GetTools()) == 0 || res.GetAbstained() {
				t.Fatalf("%d tools, %d matches, abstained %v: matches must be parallel to a non-empty list", len(res.GetTools()), len(res.GetMatches()), res.GetAbstained())
			}
			// The same ranking the retriever gives the token's caller:
			// names in order, and per tool its confidence and intents.
			want, err := full.ret.Discover(context.Background(), retriever.Request{Caller: supportCaller, Query: tc.query, Intents: tc.req.GetIntents(), TopK: tc.limit})
			if err != nil {
				t.Fatal(err)
			}
			if len(want.Tools) != len(res.GetTools()) {
				t.Fatalf("%d tools, the retriever ranks %d", len(res.GetTools()), len(want.Tools))
			}
			for i, x := range res.GetTools() {
				w, m := want.Tools[i], res.GetMatches()[i]
				var wantIntents []int32
				for _, j := range w.Intents {
					wantIntents = append(wantIntents, int32(j))
				}
				if x.GetServer() != w.Card.Server || x.GetName() != w.Card.Name || m.GetConfidence() != w.Scores.Confidence || !slices.Equal(m.GetIntents(), wantIntents) {
					t.Errorf("#%d %s/%s %v, want %s/%s confidence %v intents %v", i+1, x.GetServer(), x.GetName(), m, w.Card.Server, w.Card.Name, w.Scores.Confidence, wantIntents)
				}
				if !(m.GetConfidence() > 0 && m.GetConfidence() < 1) {
					t.Errorf("#%d: confidence %v outside (0,1)", i+1, m.GetConfidence())
				}
			}
			// Nothing outside the token's scopes or tenant: the answer is
			// the one of a catalogue that holds only what it may see.
			if b := bare.search(t, supportToken, tc.req); !proto.Equal(res, b) {
				t.Errorf("answer differs between a catalogue with and without the forbidden cards:\n full: %v\n bare: %v", summaryNames(res.GetTools()), summaryNames(b.GetTools()))
			}
			for _, n := range summaryNames(res.GetTools()) {
				if !slices.Contains(cardNames(visible), n) {
					t.Errorf("%s is not a card the support agent may see", n)
				}
			}
		})
	}

	// globex's agent gets globex's cards only, for every intent.
	g := full.search(t, globexToken, &pb.ExecutionServiceSearchToolsRequest{Intents: intents})
	for _, x := range g.GetTools() {
		if !slices.Contains([]string{"search_orders", "get_order", "track_shipment", "issue_refund", "get_statement"}, x.GetName()) ||
			strings.Contains(x.GetSummary(), "order number, with items") {
			t.Errorf("globex agent got %s/%s %q", x.GetServer(), x.GetName(), x.GetSummary())
		}
	}
}

func cardNames(cs []cards.Card) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Server + "/" + c.Name
	}
	return out
}

func TestSearchToolsIntentsRefusals(t *testing.T) {
	e := startExec(t, loadCatalogue(t, "../../../examples/catalog"))
	nine := slices.Repeat([]string{"where is my package"}, 9)
	for _, tc := range []struct {
		name  string
		token string
		req   *pb.ExecutionServiceSearchToolsRequest
		code  codes.Code
		parts []string
	}{
		{"too many intents", supportToken, &pb.ExecutionServiceSearchToolsRequest{Intents: nine}, codes.InvalidArgument, []string{"intents", "limit is 8"}},
		{"over-long intent", supportToken, &pb.ExecutionServiceSearchToolsRequest{Intents: []string{"x", strings.Repeat("é", 201)}}, codes.InvalidArgument, []string{"intents[1]", "201 characters", "limit is 200"}},
		{"blank intent", supportToken, &pb.ExecutionServiceSearchToolsRequest{Intents: []string{"x", " "}}, codes.InvalidArgument, []string{"intents[1]", "required"}},
		{"over-long query", supportToken, &pb.ExecutionServiceSearchToolsRequest{Query: strings.Repeat("q", 201), Intents: []string{"x"}}, codes.InvalidArgument, []string{"query", "limit is 200"}},
		{"negative limit", supportToken, &pb.ExecutionServiceSearchToolsRequest{Intents: []string{"x"}, Limit: -2}, codes.InvalidArgument, []string{"limit"}},
		{"no token", "", &pb.ExecutionServiceSearchToolsRequest{Intents: []string{"x"}}, codes.Unauthenticated, nil},
		{"unknown token", "not-a-token-of-the-file-at-all", &pb.ExecutionServiceSearchToolsRequest{Intents: []string{"x"}}, codes.Unauthenticated, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.client.SearchTools(asAgent(t, tc.token), tc.req)
			if err == nil {
				t.Fatalf("accepted: %v", summaryNames(res.GetTools()))
			}
			st := status.Convert(err)
			if st.Code() != tc.code {
				t.Fatalf("code %s (%q), want %s", st.Code(), st.Message(), tc.code)
			}
			for _, p := range tc.parts {
				if !strings.Contains(st.Message(), p) {
					t.Errorf("message %q does not say %q", st.Message(), p)
				}
			}
		})
	}
}

func TestSearchToolsAbstains(t *testing.T) {
	cs := loadCatalogue(t, "../../../examples/catalog")
	// A minimum that no tool reaches (confidences are under 1).
	e := startExec(t, cs, retriever.WithMinConfidence(1))
	for _, req := range []*pb.ExecutionServiceSearchToolsRequest{
		{Intents: []string{"where is my package", "show the invoice"}},
		{Query: "where is my package", Intents: []string{"show the invoice"}, Limit: 50},
		{Query: "where is my package"},
	} {
		res := e.search(t, supportToken, req)
		if !res.GetAbstained() || len(res.GetTools()) != 0 || len(res.GetMatches()) != 0 {
			t.Errorf("%q %q: abstained %v, %d tools, %d matches; want abstained and nothing", req.GetQuery(), req.GetIntents(), res.GetAbstained(), len(res.GetTools()), len(res.GetMatches()))
		}
	}
	// An empty query lists everything the agent may use: no abstention.
	res := e.search(t, supportToken, &pb.ExecutionServiceSearchToolsRequest{Limit: 50})
	if res.GetAbstained() || len(res.GetTools()) != len(visibleToSupport(cs)) {
		t.Errorf("empty query: abstained %v, %d tools; want the %d the agent may use", res.GetAbstained(), len(res.GetTools()), len(visibleToSupport(cs)))
	}
	// The same requests on a server without a minimum answer.
	d := startExec(t, cs)
	if res := d.search(t, supportToken, &pb.ExecutionServiceSearchToolsRequest{Intents: []string{"where is my package", "show the invoice"}}); res.GetAbstained() || len(res.GetTools()) == 0 {
		t.Errorf("without a minimum: abstained %v, %d tools", res.GetAbstained(), len(res.GetTools()))
	}
}

// TestCallToolBoundsNumbers: arguments with numbers the schema validator
// would read as million-digit rationals are refused before it runs, with
// the path and the limit (issue 20, finding 4).
func TestCallToolBoundsNumbers(t *testing.T) {
	e := startExec(t, loadCatalogue(t, "../../../examples/catalog"))
	args := `{"order_id":"ORD-1","n":[` + strings.TrimSuffix(strings.Repeat("1e999999,", 2500), ",") + `]}`
	_, err := e.client.CallTool(asAgent(t, supportToken), &pb.CallToolRequest{Server: "orders", Name: "get_order", ArgumentsJson: args})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "at '/n/0': the number's exponent is 999999; the limit is ±400") {
		t.Fatalf("CallTool: %v", err)
	}
}

// TestIdentityFromTheInterceptor: behind the server's interceptor, which
// authenticates the agent token once and puts the identity in the context,
// the handlers take that identity and look nothing up; served alone, they
// read the token from the metadata.
func TestIdentityFromTheInterceptor(t *testing.T) {
	e := startExec(t, loadCatalogue(t, "../../../examples/catalog", "../../../examples/catalog-other-tenant"))
	req := &pb.ExecutionServiceDescribeToolRequest{Name: "get_order", Server: "orders"}
	if _, err := e.srv.DescribeTool(t.Context(), req); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no identity and no token: %v, want Unauthenticated", err)
	}
	for _, tenant := range []string{"acme", "globex"} {
		ctx := tokens.NewContext(t.Context(), tokens.Identity{Tenant: tenant, Subject: "ops", Scopes: []string{"*"}})
		res, err := e.srv.DescribeTool(ctx, req)
		if err != nil || res.GetCard().GetTenant() != tenant {
			t.Errorf("identity of tenant %s in the context: %v %v", tenant, res.GetCard().GetTenant(), err)
		}
	}
	// Through gRPC without the interceptor: the metadata's token.
	res, err := e.client.DescribeTool(asAgent(t, globexToken), req)
	if err != nil || res.GetCard().GetTenant() != "globex" {
		t.Errorf("globex token: %v %v", res.GetCard().GetTenant(), err)
	}
}
