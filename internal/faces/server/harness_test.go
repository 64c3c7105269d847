package server_test

// The harness: a real gRPC server on loopback, backed by the real embedded
// store in t.TempDir() and a real retriever with the built-in hashed
// embedder, talked to through a real client connection.

import (
	"context"
	"fmt"
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
	"github.com/seed0cff8200/cardex/internal/access/audittrail"
	"github.com/seed0cff8200/cardex/internal/access/auth"
	"github.com/seed0cff8200/cardex/internal/access/ratelimit"
	"github.com/seed0cff8200/cardex/internal/codec/apiconv"
	"github.com/seed0cff8200/cardex/internal/faces/agents"
	"github.com/seed0cff8200/cardex/internal/faces/server"
	"github.com/seed0cff8200/cardex/internal/telemetry/discoverylog"
	"github.com/seed0cff8200/cardex/internal/telemetry/feedback"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
	"github.com/seed0cff8200/cardex/retriever"
)

// env is one running server and a client connected to it.
type env struct {
	disc    pb.DiscoveryServiceClient
	cat     pb.CatalogServiceClient
	conn    *grpc.ClientConn
	store   *embedded.Store
	logPath string // discovery log file, "" when not logging
	dlog    *discoverylog.Log
	fbPath  string // feedback log file, "" without feedback
	fb      *feedback.Recorder
	ret     *retriever.Retriever
	addr    string
	exec    pb.ExecutionServiceClient // with envOptions.agentTokens
	trail   string                    // audit trail file, with envOptions.trail
	bearer  string                    // envOptions.bearer
}

type envOptions struct {
	token   string                 // server.Config.CatalogToken
	logMode discoverylog.QueryMode // "" means no discovery log
	cards   []cards.Card           // loaded through PutCards before the test
	// wrap, if set, wraps the store that the retriever and the server use.
	wrap func(cards.Store) cards.Store
	// feedback records outcomes (raw queries, learning on).
	feedback bool
	// autoPins is server.Config.AutoPins (with feedback).
	autoPins int
	// state is server.Config.State.
	state *server.State
	// retriever options (the service's defaults when nil).
	retriever []retriever.Option
	// emb is the retriever's embedder (nil: the hashed one).
	emb embed.Embedder

	auth        *auth.Authenticator
	limiter     *ratelimit.Limiter
	trail       bool          // record the audit trail (env.trail)
	timeout     time.Duration // server.Config.RPCTimeout
	warnings    []string
	serverOpts  []grpc.ServerOption
	dialOpts    []grpc.DialOption // instead of plaintext
	agentTokens string            // agent token file content: registers the ExecutionService
	bearer      string            // sent by put (a catalog or admin token)
	// wrapDiscovery, if set, is handed the DiscoveryService (server.NewWrapped).
	wrapDiscovery func(pb.DiscoveryServiceServer) pb.DiscoveryServiceServer
}

// newEnv starts a server and returns a connected client. Everything is torn
// down when the test ends.
func newEnv(t testing.TB, o envOptions) *env {
	t.Helper()
	dir := t.TempDir()
	store, err := embedded.Open(dir)
	if err != nil {
		t.Fatalf("embedded.Open: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	ctx := context.Background()
	var used cards.Store = store
	if o.wrap != nil {
		used = o.wrap(store)
	}
	var emb embed.Embedder = embed.NewHashed(embed.DefaultDim)
	if o.emb != nil {
		emb = o.emb
	}
	ret, err := retriever.New(ctx, used, emb, nil, o.retriever...)
	if err != nil {
		t.Fatalf("retriever.New: %v", err)
	}
	t.Cleanup(func() { _ = ret.Close() })
	e := &env{store: store, ret: ret, bearer: o.bearer}
	var dlog *discoverylog.Log
	if o.logMode != "" {
		e.logPath = filepath.Join(dir, "discoveries.jsonl")
		if dlog, err = discoverylog.Open(e.logPath, o.logMode, []byte("server-test-log-key")); err != nil {
			t.Fatalf("discoverylog.Open: %v", err)
		}
		t.Cleanup(func() { _ = dlog.Close() })
		e.dlog = dlog
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	var fb *feedback.Recorder
	if o.feedback {
		e.fbPath = filepath.Join(dir, "feedback.jsonl")
		fb, err = feedback.New(ctx, feedback.Config{Path: e.fbPath, LearnedPath: filepath.Join(dir, "learned.jsonl"),
			Hash: func(s string) string { return "h:" + fmt.Sprint(len(s)) }, RawQueries: true, Learner: ret, CoUse: ret, Hot: feedback.NewHot()})
		if err != nil {
			t.Fatalf("feedback.New: %v", err)
		}
		t.Cleanup(func() { _ = fb.Close() })
		e.fb = fb
	}
	cfg := server.Config{Store: used, Retriever: ret, DiscoveryLog: dlog, Feedback: fb, AutoPins: o.autoPins, CatalogToken: o.token, State: o.state,
		Auth: o.auth, Limiter: o.limiter, RPCTimeout: o.timeout, Warnings: o.warnings, ServerOptions: o.serverOpts}
	if o.trail {
		e.trail = filepath.Join(dir, "audit-trail.jsonl")
		tr, err := audittrail.Open(e.trail, []byte("server-test-trail-key"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = tr.Close() })
		cfg.Trail = tr
	}
	if o.agentTokens != "" {
		tf := filepath.Join(dir, "agent-tokens.yaml")
		if err := os.WriteFile(tf, []byte(o.agentTokens), 0o600); err != nil {
			t.Fatal(err)
		}
		as, err := agents.Open(agents.Config{Retriever: ret, DataDir: dir, Key: []byte("server-test-audit-key"), TokenFile: tf})
		if err != nil {
			t.Fatalf("agents.Open: %v", err)
		}
		t.Cleanup(func() { _ = as.Close() })
		cfg.Execution, cfg.AgentTokens = as.Execution(), as.Tokens()
	}
	gs, _ := server.NewWrapped(cfg, o.wrapDiscovery)
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	t.Cleanup(func() {
		gs.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	e.addr = lis.Addr().String()
	dial := o.dialOpts
	if dial == nil {
		dial = []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}
	}
	conn, err := grpc.NewClient(e.addr, dial...)
	if err != nil {
		t.Fatalf("grpc.NewClient: %v", err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	e.conn = conn
	e.disc = pb.NewDiscoveryServiceClient(conn)
	e.cat = pb.NewCatalogServiceClient(conn)
	e.exec = pb.NewExecutionServiceClient(conn)
	if len(o.cards) > 0 {
		e.put(t, o.cards...)
	}
	return e
}

// rpcCtx is the context of one call: bounded, so a hung server fails the
// test instead of the test binary's timeout.
func rpcCtx(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// put writes cards through PutCards in batches of at most server.MaxBatch.
func (e *env) put(t testing.TB, cs ...cards.Card) []*pb.PutResult {
	t.Helper()
	var out []*pb.PutResult
	for start := 0; start < len(cs); start += server.MaxBatch {
		part := cs[start:min(start+server.MaxBatch, len(cs))]
		req := &pb.PutCardsRequest{}
		for i := range part {
			req.Cards = append(req.Cards, apiconv.CardToProto(&part[i], true))
		}
		ctx := rpcCtx(t)
		if e.bearer != "" {
			ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+e.bearer)
		}
		res, err := e.cat.PutCards(ctx, req)
		if err != nil {
			t.Fatalf("PutCards: %v", err)
		}
		out = append(out, res.GetResults()...)
	}
	return out
}

func (e *env) discover(t *testing.T, req *pb.DiscoverToolsRequest) *pb.DiscoverToolsResponse {
	t.Helper()
	res, err := e.disc.DiscoverTools(rpcCtx(t), req)
	if err != nil {
		t.Fatalf("DiscoverTools(%q): %v", req.GetQuery(), err)
	}
	return res
}

// searchAll pages through SearchTools to the end and returns every row.
func (e *env) searchAll(t *testing.T, c *pb.Caller, query string, pageSize int32) []*pb.ToolSummary {
	t.Helper()
	var out []*pb.ToolSummary
	cursor := ""
	for page := 0; ; page++ {
		if page > 200 {
			t.Fatalf("SearchTools(%q): more than 200 pages; the cursor does not advance", query)
		}
		res, err := e.disc.SearchTools(rpcCtx(t), &pb.SearchToolsRequest{Caller: c, Query: query, PageSize: pageSize, Cursor: cursor})
		if err != nil {
			t.Fatalf("SearchTools(%q, page %d): %v", query, page, err)
		}
		if int32(len(res.GetTools())) > pageSize {
			t.Fatalf("SearchTools(%q): page of %d rows, page_size %d", query, len(res.GetTools()), pageSize)
		}
		out = append(out, res.GetTools()...)
		if res.GetNextCursor() == "" {
			return out
		}
		cursor = res.GetNextCursor()
	}
}

func (e *env) listAll(t *testing.T, tenant string) []*pb.Card {
	t.Helper()
	var out []*pb.Card
	cursor := ""
	for {
		res, err := e.cat.ListCards(rpcCtx(t), &pb.ListCardsRequest{Tenant: tenant, PageSize: 100, Cursor: cursor, IncludeSchemas: true})
		if err != nil {
			t.Fatalf("ListCards(%s): %v", tenant, err)
		}
		out = append(out, res.GetCards()...)
		if res.GetNextCursor() == "" {
			return out
		}
		cursor = res.GetNextCursor()
	}
}

// --- the example catalogue ---------------------------------------------

func loadDir(t *testing.T, dir string) []cards.Card {
	t.Helper()
	cs, _, err := cards.LoadPath(dir)
	if err != nil {
		t.Fatalf("LoadPath(%s): %v", dir, err)
	}
	if len(cs) == 0 {
		t.Fatalf("LoadPath(%s): no cards", dir)
	}
	return cs
}

// acmeCards and globexCards are the example catalogue as written.
func acmeCards(t *testing.T) []cards.Card { return loadDir(t, "../../../examples/catalog") }
func globexCards(t *testing.T) []cards.Card {
	return loadDir(t, "../../../examples/catalog-other-tenant")
}

// Inactive extras: acme cards a support caller would hold the scopes for,
// but whose status hides them from everyone.
func inactiveCards() []cards.Card {
	return []cards.Card{
		{Tenant: "acme", Server: "support", Name: "export_ticket_archive", Status: cards.StatusRevoked,
			Summary: "Export every support ticket and customer conversation as a zip archive.",
			Aliases: []string{"download all tickets", "ticket export"}, RequiredScopes: []string{"support:read"},
			InputSchema: []byte(`{"type":"object","properties":{"since":{"type":"string"}}}`)},
		{Tenant: "acme", Server: "support", Name: "draft_ticket_macro", Status: cards.StatusPending,
			Summary: "Create a canned reply macro for support tickets.",
			Aliases: []string{"new macro", "canned response"}, RequiredScopes: []string{"support:write"}},
		{Tenant: "acme", Server: "orders", Name: "refund_order_instantly", Status: cards.StatusRevoked,
			Summary: "Refund an order and give the customer their money back immediately.",
			Aliases: []string{"money back for order"}, RequiredScopes: []string{"orders:read"}},
	}
}

var supportScopes = []string{"support:read", "support:write", "orders:read", "billing:read"}

func supportCaller() *pb.Caller {
	return &pb.Caller{Tenant: "acme", Subject: "agent-7@acme.example", Scopes: supportScopes}
}

func adminCaller() *pb.Caller {
	return &pb.Caller{Tenant: "acme", Subject: "root@acme.example", Scopes: []string{"*"}}
}

func globexAdmin() *pb.Caller {
	return &pb.Caller{Tenant: "globex", Subject: "ops@globex.example", Scopes: []string{"*"}}
}

// supportVisible selects, independently of the retriever's gate, the cards a
// support caller may see: tenant acme, active, and every required scope held
// literally (the support caller holds no wildcard).
func supportVisible(cs []cards.Card) []cards.Card {
	var out []cards.Card
	for _, c := range cs {
		if c.Tenant != "acme" || (c.Status != "" && c.Status != cards.StatusActive) {
			continue
		}
		ok := true
		for _, s := range c.RequiredScopes {
			if !slices.Contains(supportScopes, s) {
				ok = false
			}
		}
		if ok {
			out = append(out, c)
		}
	}
	return out
}

func names(cs []cards.Card) []string {
	out := make([]string, len(cs))
	for i := range cs {
		out[i] = cs[i].Server + "/" + cs[i].Name
	}
	return out
}

func toolNames(ts []*pb.DiscoveredTool) []string {
	out := make([]string, len(ts))
	for i, x := range ts {
		out[i] = x.GetCard().GetServer() + "/" + x.GetCard().GetName()
	}
	return out
}

func summaryNames(ts []*pb.ToolSummary) []string {
	out := make([]string, len(ts))
	for i, x := range ts {
		out[i] = x.GetServer() + "/" + x.GetName()
	}
	return out
}

// --- assertions ---------------------------------------------------------

// wantCode checks a call's status code and that its message contains every
// one of the given parts.
func wantCode(t *testing.T, err error, code codes.Code, parts ...string) *status.Status {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok {
		t.Fatalf("not a gRPC status error: %v", err)
	}
	if st.Code() != code {
		t.Fatalf("code = %s (%q), want %s", st.Code(), st.Message(), code)
	}
	for _, p := range parts {
		if !strings.Contains(st.Message(), p) {
			t.Errorf("message %q does not contain %q", st.Message(), p)
		}
	}
	return st
}

// stable strips what legitimately differs between two equal answers: the
// discovery id (random) and cards' updated_at (the write time).
func stable[M proto.Message](m M) M {
	m = proto.Clone(m).(M)
	switch x := any(m).(type) {
	case *pb.DiscoverToolsResponse:
		x.DiscoveryId = ""
		for _, tl := range x.GetTools() {
			tl.GetCard().UpdatedAt = nil
		}
	case *pb.DescribeToolResponse:
		if x.GetCard() != nil {
			x.GetCard().UpdatedAt = nil
		}
	case *pb.Card:
		x.UpdatedAt = nil
	}
	return m
}

func sameProto(t *testing.T, what string, got, want proto.Message) {
	t.Helper()
	if !proto.Equal(got, want) {
		t.Errorf("%s differs:\n got: %v\nwant: %v", what, got, want)
	}
}

func mustEqualStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s:\n got: %q\nwant: %q", what, got, want)
	}
}

func fmtTool(x *pb.DiscoveredTool) string {
	if x == nil {
		return "(none)"
	}
	s := x.GetScores()
	return fmt.Sprintf("%s/%s lexical=%v (#%d) semantic=%v (#%d) fused=%v",
		x.GetCard().GetServer(), x.GetCard().GetName(), s.GetLexical(), s.GetLexicalRank(), s.GetSemantic(), s.GetSemanticRank(), s.GetFused())
}

// firstDiff describes the first position where two shortlists differ.
func firstDiff(a, b []*pb.DiscoveredTool) string {
	for i := range max(len(a), len(b)) {
		var x, y *pb.DiscoveredTool
		if i < len(a) {
			x = stable(a[i])
		}
		if i < len(b) {
			y = stable(b[i])
		}
		if x != nil && y != nil {
			x.GetCard().UpdatedAt, y.GetCard().UpdatedAt = nil, nil
		}
		if !proto.Equal(x, y) {
			return fmt.Sprintf("first difference at #%d:\n  %s\n  %s", i+1, fmtTool(x), fmtTool(y))
		}
	}
	return "no difference in the tools"
}

func protoEqual[M proto.Message](a, b M) bool { return proto.Equal(a, b) }
