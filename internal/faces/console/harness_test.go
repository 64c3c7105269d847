package console_test

// The harness: the real serve wiring on loopback — the embedded store with
// the example catalogue, the retriever with the built-in embedder, the gRPC
// server with service tokens, a feedback log, and the console on the HTTP
// listener of internal/faces/agents — and misses recorded through the gRPC API.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/eval"
	"github.com/seed0cff8200/cardex/internal/access/audittrail"
	"github.com/seed0cff8200/cardex/internal/access/auth"
	"github.com/seed0cff8200/cardex/internal/faces/agents"
	"github.com/seed0cff8200/cardex/internal/faces/console"
	"github.com/seed0cff8200/cardex/internal/faces/server"
	"github.com/seed0cff8200/cardex/internal/telemetry/feedback"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
	"github.com/seed0cff8200/cardex/retriever"
)

// The service tokens of the harness (the token file holds their hashes).
const (
	adminToken    = "console-test-admin-token-0123456789"
	catalogToken  = "console-test-catalog-token-0123456789"
	discoverToken = "console-test-discover-token-0123456789"
	supportToken  = "console-test-support-bot-token-0123456789" // discover, bound
)

// supportScopes are the support agent's of the README tour: billing/issue_refund
// (billing:admin) is outside them.
var supportScopes = []string{"support:read", "support:write", "orders:read", "billing:read"}

type harness struct {
	url      string // the console's base URL, http://127.0.0.1:PORT
	grpcAddr string
	conn     *grpc.ClientConn
	disc     pb.DiscoveryServiceClient
	cat      pb.CatalogServiceClient
	store    *embedded.Store
	ret      *retriever.Retriever
	entries  cards.Entries // the example catalogue as loaded
	fbPath   string
	evalDir  string
	trail    string
}

func sum(tok string) string {
	h := sha256.Sum256([]byte(tok))
	return hex.EncodeToString(h[:])
}

// newHarness starts everything; open: no credential configured at all;
// opts may change the console's configuration (the store is open by then).
func newHarness(t *testing.T, open bool, opts ...func(*harness, *console.Config)) *harness {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	h := &harness{fbPath: filepath.Join(dir, "feedback.jsonl"), evalDir: filepath.Join(dir, "eval"), trail: filepath.Join(dir, "audit-trail.jsonl")}
	store, err := embedded.Open(filepath.Join(dir, "data"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	h.store = store
	entries, err := cards.LoadEntries("../../../examples")
	if err != nil {
		t.Fatal(err)
	}
	h.entries = entries
	if _, err := store.Put(ctx, entries.Cards); err != nil {
		t.Fatal(err)
	}
	if _, err := store.PutServers(ctx, entries.Servers); err != nil {
		t.Fatal(err)
	}
	emb, err := embed.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	ret, err := retriever.New(ctx, store, emb, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ret.Close() })
	h.ret = ret

	authn := &auth.Authenticator{}
	if !open {
		toks, err := auth.NewTokens(auth.TokenFile{Tokens: []auth.TokenEntry{
			{Name: "ops", Role: auth.RoleAdmin, TokenSHA256: sum(adminToken)},
			{Name: "platform-ci", Role: auth.RoleCatalog, TokenSHA256: sum(catalogToken)},
			{Name: "orchestrator", Role: auth.RoleDiscover, TokenSHA256: sum(discoverToken)},
			{Name: "support-bot", Role: auth.RoleDiscover, TokenSHA256: sum(supportToken),
				Caller: &auth.Binding{Tenant: "acme", Subject: "support-bot", Scopes: supportScopes}},
		}})
		if err != nil {
			t.Fatal(err)
		}
		authn.Tokens = toks
	}
	trail, err := audittrail.Open(h.trail, []byte("console-test-trail-key"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = trail.Close() })
	fb, err := feedback.New(ctx, feedback.Config{Path: h.fbPath, Hash: func(s string) string { return "h-" + s }, RawQueries: true, Learner: ret})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fb.Close() })

	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h.grpcAddr = lis.Addr().String()
	gs, _ := server.New(server.Config{Store: store, Retriever: ret, Feedback: fb, Auth: authn, Trail: trail})
	served := make(chan error, 1)
	go func() { served <- gs.Serve(lis) }()
	t.Cleanup(func() {
		gs.Stop()
		<-served
	})

	if err := os.MkdirAll(h.evalDir, 0o755); err != nil {
		t.Fatal(err)
	}
	cc := console.Config{Store: store, Retriever: ret, Auth: authn, Trail: trail,
		FeedbackLog: h.fbPath, EvalDir: h.evalDir, GRPCAddr: h.grpcAddr}
	for _, o := range opts {
		o(h, &cc)
	}
	web, err := console.New(cc)
	if err != nil {
		t.Fatal(err)
	}
	as, err := agents.Open(agents.Config{Retriever: ret, DataDir: dir, Key: []byte("console-test-audit-key"), HTTPListen: "127.0.0.1:0", Console: web})
	if err != nil {
		t.Fatal(err)
	}
	as.Serve()
	t.Cleanup(func() {
		sctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_ = as.Shutdown(sctx)
		_ = as.Close()
	})
	h.url = "http://" + as.Addr()

	conn, err := grpc.NewClient(h.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	h.conn, h.disc, h.cat = conn, pb.NewDiscoveryServiceClient(conn), pb.NewCatalogServiceClient(conn)
	return h
}

// rpc is a bounded context carrying the bearer token (none when "").
func rpc(t *testing.T, token string) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	return ctx
}

// recordMisses makes the feedback log hold one miss of every kind, the way
// agents make them: through DiscoverTools, DescribeTool and ReportOutcome.
func (h *harness) recordMisses(t *testing.T, token string) {
	t.Helper()
	admin := &pb.Caller{Tenant: "acme", Subject: "agent-7", Scopes: []string{"*"}, SessionId: "s1"}
	// An implicit miss: the session's shortlist lacked the tool it then
	// described.
	d, err := h.disc.DiscoverTools(rpc(t, token), &pb.DiscoverToolsRequest{Caller: admin, Query: "customer wants their money back for order 1234", TopK: 1})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Tools[0].Card.Name; got == "issue_refund" {
		t.Fatalf("the setup needs a shortlist without issue_refund; got %s", got)
	}
	if _, err := h.disc.DescribeTool(rpc(t, token), &pb.DescribeToolRequest{Caller: admin, Name: "issue_refund", Server: "billing"}); err != nil {
		t.Fatal(err)
	}
	// An outcome naming a used tool the shortlist lacked.
	d, err = h.disc.DiscoverTools(rpc(t, token), &pb.DiscoverToolsRequest{Caller: admin, Query: "the customer was charged twice, reverse it", TopK: 1})
	if err != nil {
		t.Fatal(err)
	}
	if d.Tools[0].Card.Name == "issue_refund" {
		t.Fatal("the setup needs a shortlist without issue_refund")
	}
	out, err := h.disc.ReportOutcome(rpc(t, token), &pb.ReportOutcomeRequest{Caller: admin, DiscoveryId: d.DiscoveryId, Outcome: &pb.ReportOutcomeRequest_UsedTool{UsedTool: &pb.ToolRef{Server: "billing", Name: "issue_refund"}}})
	if err != nil || !out.Miss {
		t.Fatalf("ReportOutcome: %v, %v", out, err)
	}
	// None fit.
	d, err = h.disc.DiscoverTools(rpc(t, token), &pb.DiscoverToolsRequest{Caller: admin, Query: "book a meeting room for tomorrow"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.disc.ReportOutcome(rpc(t, token), &pb.ReportOutcomeRequest{Caller: admin, DiscoveryId: d.DiscoveryId, Outcome: &pb.ReportOutcomeRequest_NoneFit{NoneFit: true}}); err != nil {
		t.Fatal(err)
	}
	// Low confidence.
	d, err = h.disc.DiscoverTools(rpc(t, token), &pb.DiscoverToolsRequest{Caller: admin, Query: "zarquon florp wibblewobble"})
	if err != nil {
		t.Fatal(err)
	}
	if !d.LowConfidence {
		t.Fatal("the setup needs a low-confidence discovery")
	}
}

// writeReports puts a report of a fresh in-process run of the tiny dataset
// and the stored LiveMCPBench report (testdata; `cardex eval` wrote it)
// into the report directory.
func (h *harness) writeReports(t *testing.T) *eval.Report {
	t.Helper()
	d, err := eval.Load("../../../eval/testdata/tiny")
	if err != nil {
		t.Fatal(err)
	}
	b := eval.NewInProcess(embed.NewHashed(embed.DefaultDim))
	defer b.Close()
	tk, err := eval.NewBPE(eval.DefaultEncoding)
	if err != nil {
		t.Fatal(err)
	}
	rep, _, err := eval.Run(context.Background(), d, b, eval.Options{TopK: 5, Tokenizer: tk})
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(h.evalDir, "eval-tiny.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.WriteJSON(f); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	live, err := os.ReadFile("testdata/eval-livemcpbench.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(h.evalDir, "eval-livemcpbench.json"), live, 0o644); err != nil {
		t.Fatal(err)
	}
	return rep
}
