package server_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/access/audittrail"
	"github.com/seed0cff8200/cardex/internal/access/auth"
	"github.com/seed0cff8200/cardex/internal/faces/server"
	"github.com/seed0cff8200/cardex/internal/testkit/testpki"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

func tlsDial(t *testing.T, ca, cert, key string) []grpc.DialOption {
	t.Helper()
	cfg, err := auth.ClientTLS(ca, cert, key, "")
	if err != nil {
		t.Fatal(err)
	}
	return []grpc.DialOption{grpc.WithTransportCredentials(credentials.NewTLS(cfg))}
}

func serverTLS(t *testing.T, p *testpki.PKI, clientCA string) []grpc.ServerOption {
	t.Helper()
	cfg, err := auth.ServerTLS(p.ServerCert, p.ServerKey, clientCA)
	if err != nil {
		t.Fatal(err)
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(cfg))}
}

func dialAndDiscover(t *testing.T, addr string, opts ...grpc.DialOption) error {
	t.Helper()
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	_, err = pb.NewDiscoveryServiceClient(conn).DiscoverTools(ctx, &pb.DiscoverToolsRequest{Caller: adminCaller(), Query: "refund"})
	return err
}

func TestTLS(t *testing.T) {
	p := testpki.New(t)
	e := newEnv(t, envOptions{cards: acmeCards(t), serverOpts: serverTLS(t, p, ""), dialOpts: tlsDial(t, p.CA, "", "")})
	e.discover(t, &pb.DiscoverToolsRequest{Caller: adminCaller(), Query: "refund"})
	if err := dialAndDiscover(t, e.addr, grpc.WithTransportCredentials(insecure.NewCredentials())); err == nil {
		t.Error("a plaintext client was answered by a TLS server")
	}
	if err := dialAndDiscover(t, e.addr, tlsDial(t, p.OtherCA, "", "")...); err == nil {
		t.Error("a client that trusts another CA accepted the server's certificate")
	}
}

func TestMutualTLS(t *testing.T) {
	p := testpki.New(t)
	e := newEnv(t, envOptions{cards: acmeCards(t), serverOpts: serverTLS(t, p, p.CA), dialOpts: tlsDial(t, p.CA, p.ClientCert, p.ClientKey)})
	e.discover(t, &pb.DiscoverToolsRequest{Caller: adminCaller(), Query: "refund"})
	for what, opts := range map[string][]grpc.DialOption{
		"no client certificate":              tlsDial(t, p.CA, "", ""),
		"a client certificate of another CA": tlsDial(t, p.CA, p.OtherClientCert, p.OtherClientKey),
		"plaintext":                          {grpc.WithTransportCredentials(insecure.NewCredentials())},
	} {
		if err := dialAndDiscover(t, e.addr, opts...); err == nil {
			t.Errorf("%s: answered", what)
		}
	}
}

// TestHealthWarnings: the server's warnings are in every health answer.
func TestHealthWarnings(t *testing.T) {
	const w = "insecure (--insecure): DiscoveryService accept calls without a credential on 0.0.0.0:50051"
	e := newEnv(t, envOptions{warnings: []string{w}})
	var md metadata.MD
	res, err := healthpb.NewHealthClient(e.conn).Check(rpcCtx(t), &healthpb.HealthCheckRequest{}, grpc.Header(&md))
	if err != nil || res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check: %v %v", res, err)
	}
	if got := md.Get("cardex-warning"); len(got) != 1 || got[0] != w {
		t.Errorf("cardex-warning = %q, want [%q]", got, w)
	}
	// Without warnings: none.
	quiet := newEnv(t, envOptions{})
	md = nil
	if _, err := healthpb.NewHealthClient(quiet.conn).Check(rpcCtx(t), &healthpb.HealthCheckRequest{}, grpc.Header(&md)); err != nil {
		t.Fatal(err)
	}
	if got := md.Get("cardex-warning"); len(got) != 0 {
		t.Errorf("cardex-warning = %q without warnings", got)
	}
}

// blockingStore's Put waits for its context: a write that never ends by
// itself.
type blockingStore struct{ cards.Store }

func (s blockingStore) Put(ctx context.Context, cs []cards.Card) ([]cards.PutResult, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// TestServerDeadline: the server bounds a call whose client set no
// deadline.
func TestServerDeadline(t *testing.T) {
	e := newEnv(t, envOptions{timeout: 200 * time.Millisecond, wrap: func(s cards.Store) cards.Store { return blockingStore{s} }})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second) // far beyond the server's
	defer cancel()
	_, err := e.cat.PutCards(ctx, cardsReq(simpleCard("acme", "tools", "slow")))
	wantCode(t, err, codes.DeadlineExceeded)
}

func readTrail(t *testing.T, path string) []audittrail.Entry {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []audittrail.Entry
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line == "" {
			continue
		}
		var e audittrail.Entry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit trail line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// TestAuditTrail: catalogue writes with principal and versions,
// AuthorizeCall decisions and refused credentials are recorded, in order;
// nothing of the request bodies is.
func TestAuditTrail(t *testing.T) {
	e := authEnv(t, envOptions{trail: true})
	start := len(readTrail(t, e.trail)) // the 53 example cards, created by ops
	if start != 53 {
		t.Fatalf("%d trail entries after loading the catalogue, want 53", start)
	}
	c := simpleCard("acme", "tools", "audited")
	c.Summary = "A secret-looking summary that must not be in the trail."
	put := func(c cards.Card) {
		t.Helper()
		if _, err := e.cat.PutCards(bearerCtx(t, catalogToken), cardsReq(c)); err != nil {
			t.Fatal(err)
		}
	}
	put(c)
	put(c)
	c.Summary = "Changed."
	put(c)
	if _, err := e.cat.DeleteCard(bearerCtx(t, catalogToken), &pb.DeleteCardRequest{Tenant: "acme", Server: "tools", Name: "audited"}); err != nil {
		t.Fatal(err)
	}
	bad := c
	bad.Summary = ""
	if _, err := e.cat.PutCards(bearerCtx(t, catalogToken), cardsReq(bad)); err == nil {
		t.Fatal("an empty summary was accepted")
	}
	// Server entries: created, updated, deleted, and a failed batch.
	putServer := func(title string) error {
		_, err := e.cat.PutServers(bearerCtx(t, catalogToken), &pb.PutServersRequest{Servers: []*pb.ServerInfo{
			{Tenant: "acme", Name: "audited_srv", Title: title, Description: "A secret-looking description."}}})
		return err
	}
	for _, title := range []string{"Audited", "Audited, renamed"} {
		if err := putServer(title); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.cat.DeleteServer(bearerCtx(t, catalogToken), &pb.DeleteServerRequest{Tenant: "acme", Name: "audited_srv"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cat.PutServers(bearerCtx(t, catalogToken), &pb.PutServersRequest{Servers: []*pb.ServerInfo{{Tenant: "acme", Name: "bad name!"}}}); err == nil {
		t.Fatal("a server name with a space was accepted")
	}
	sc := supportCaller()
	for _, name := range []string{"get_order", "issue_refund"} {
		if _, err := e.disc.AuthorizeCall(bearerCtx(t, discoverToken), &pb.AuthorizeCallRequest{Caller: sc, Name: name, ArgumentsJson: `{"order_id":"ORD-1"}`}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := e.cat.ListCards(bearerCtx(t, "a-token-nobody-has-0000"), &pb.ListCardsRequest{Tenant: "acme"})
	wantCode(t, err, codes.Unauthenticated)
	_, err = e.cat.ListCards(bearerCtx(t, discoverToken), &pb.ListCardsRequest{Tenant: "acme"})
	wantCode(t, err, codes.PermissionDenied)

	got := readTrail(t, e.trail)[start:]
	type row struct {
		Type, Method, Principal, Server, Name, Outcome string
		Before, After, Card                            int64
	}
	var rows []row
	for _, x := range got {
		rows = append(rows, row{x.Type, x.Method, x.Principal, x.Server, x.Name, x.Outcome, x.BeforeVersion, x.AfterVersion, x.CardVersion})
		if x.Time.IsZero() {
			t.Errorf("entry without a time: %+v", x)
		}
	}
	want := []row{
		{"catalog_write", "PutCards", "platform-ci", "tools", "audited", "created", 0, 1, 0},
		{"catalog_write", "PutCards", "platform-ci", "tools", "audited", "unchanged", 1, 1, 0},
		{"catalog_write", "PutCards", "platform-ci", "tools", "audited", "updated", 1, 2, 0},
		{"catalog_write", "DeleteCard", "platform-ci", "tools", "audited", "deleted", 2, 0, 0},
		{"catalog_write", "PutCards", "platform-ci", "", "", "failed", 0, 0, 0},
		{"catalog_write", "PutServers", "platform-ci", "audited_srv", "", "created", 0, 1, 0},
		{"catalog_write", "PutServers", "platform-ci", "audited_srv", "", "updated", 1, 2, 0},
		{"catalog_write", "DeleteServer", "platform-ci", "audited_srv", "", "deleted", 2, 0, 0},
		{"catalog_write", "PutServers", "platform-ci", "", "", "failed", 0, 0, 0},
		{"authorize", "AuthorizeCall", "orchestrator", "orders", "get_order", "allow", 0, 0, 1},
		{"authorize", "AuthorizeCall", "orchestrator", "", "issue_refund", "deny_unknown_tool", 0, 0, 0},
		{"authentication", "ListCards", "", "", "", "refused", 0, 0, 0},
		{"authentication", "ListCards", "orchestrator", "", "", "refused", 0, 0, 0},
	}
	if len(rows) != len(want) {
		t.Fatalf("trail:\n got %+v\nwant %+v", rows, want)
	}
	for i := range want {
		if rows[i] != want[i] {
			t.Errorf("trail entry %d: got %+v, want %+v", i, rows[i], want[i])
		}
	}
	if got[9].SubjectHash == "" || strings.Contains(got[9].SubjectHash, "agent-7") {
		t.Errorf("authorize entry's subject: %q, want a keyed hash", got[9].SubjectHash)
	}
	if got[11].Peer == "" {
		t.Error("a refused credential without the peer's address")
	}
	raw, _ := os.ReadFile(e.trail)
	for _, secret := range []string{"secret-looking", "ORD-1", "a-token-nobody-has", discoverToken} {
		if strings.Contains(string(raw), secret) {
			t.Errorf("the audit trail holds %q", secret)
		}
	}
}

// TestAuditTrailBoundsRefusals: a flood of bad credentials from one
// address is refused in full but recorded only MaxRefusalsAudited times a
// second, so it cannot fill the disk.
func TestAuditTrailBoundsRefusals(t *testing.T) {
	e := authEnv(t, envOptions{trail: true})
	start := len(readTrail(t, e.trail))
	const calls = 200
	for range calls {
		_, err := e.cat.ListCards(bearerCtx(t, "a-token-nobody-has-0000"), &pb.ListCardsRequest{Tenant: "acme"})
		wantCode(t, err, codes.Unauthenticated)
	}
	// The burst, plus what refilled while the calls ran: far from all.
	if got := len(readTrail(t, e.trail)) - start; got < server.MaxRefusalsAudited || got > calls/2 {
		t.Errorf("%d of %d refusals recorded, want the first %d and few more", got, calls, server.MaxRefusalsAudited)
	}
}
