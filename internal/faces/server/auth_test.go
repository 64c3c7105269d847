package server_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/seed0cff8200/cardex/internal/access/auth"
	"github.com/seed0cff8200/cardex/internal/access/tokens"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// The service tokens of these tests (at least 16 characters, as real ones).
const (
	discoverToken = "discover-token-0123456789"
	catalogToken  = "catalog-token-0123456789"
	adminToken    = "admin-token-0123456789ab"
	boundToken    = "bound-support-token-0123"
	aliceToken    = "bound-alice-token-012345"
	agentToken    = "agent-token-0123456789ab"
)

func serviceTokens(t *testing.T) *auth.Tokens {
	t.Helper()
	toks, err := auth.NewTokens(auth.TokenFile{Tokens: []auth.TokenEntry{
		{Name: "orchestrator", Role: auth.RoleDiscover, TokenSHA256: tokens.HashToken(discoverToken)},
		{Name: "platform-ci", Role: auth.RoleCatalog, TokenSHA256: tokens.HashToken(catalogToken)},
		{Name: "ops", Role: auth.RoleAdmin, TokenSHA256: tokens.HashToken(adminToken)},
		{Name: "support-bot", Role: auth.RoleDiscover, TokenSHA256: tokens.HashToken(boundToken),
			Caller: &auth.Binding{Tenant: "acme", Scopes: supportScopes}},
		{Name: "alice", Role: auth.RoleDiscover, TokenSHA256: tokens.HashToken(aliceToken),
			Caller: &auth.Binding{Tenant: "acme", Subject: "alice", Scopes: []string{"orders:read"}}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	return toks
}

const agentTokenFile = `tokens:
  - token: ` + agentToken + `
    tenant: acme
    subject: agent-1
    scopes: ["*"]
`

func authEnv(t *testing.T, o envOptions) *env {
	t.Helper()
	if o.auth == nil {
		o.auth = &auth.Authenticator{Tokens: serviceTokens(t)}
	}
	o.bearer = adminToken
	o.agentTokens = agentTokenFile
	o.cards = acmeCards(t)
	return newEnv(t, o)
}

func bearerCtx(t *testing.T, token string) context.Context {
	t.Helper()
	if token == "" {
		return rpcCtx(t)
	}
	return metadata.AppendToOutgoingContext(rpcCtx(t), "authorization", "Bearer "+token)
}

// TestEveryRPCAuthenticates: every RPC of every cardex service refuses a
// call without a credential, with an unknown one and with one of the wrong
// role, and takes the right one.
func TestEveryRPCAuthenticates(t *testing.T) {
	e := authEnv(t, envOptions{})
	support := supportCaller()
	type rpc struct {
		call     func(ctx context.Context) error
		right    []string // tokens that may call it
		wrong    []string // tokens of another role: PermissionDenied (Unauthenticated for ExecutionService)
		wrongErr codes.Code
		foreign  []string // credentials of the other scheme: unknown here
	}
	discovery := func(f func(ctx context.Context) error) rpc {
		return rpc{call: f, right: []string{discoverToken, adminToken, boundToken}, wrong: []string{catalogToken}, wrongErr: codes.PermissionDenied, foreign: []string{agentToken}}
	}
	catalog := func(f func(ctx context.Context) error) rpc {
		return rpc{call: f, right: []string{catalogToken, adminToken}, wrong: []string{discoverToken, boundToken}, wrongErr: codes.PermissionDenied, foreign: []string{agentToken}}
	}
	execution := func(f func(ctx context.Context) error) rpc {
		return rpc{call: f, right: []string{agentToken}, wrong: []string{adminToken, discoverToken, catalogToken}, wrongErr: codes.Unauthenticated, foreign: []string{boundToken}}
	}
	rpcs := map[string]rpc{
		"DiscoveryService/DiscoverTools": discovery(func(ctx context.Context) error {
			_, err := e.disc.DiscoverTools(ctx, &pb.DiscoverToolsRequest{Caller: support, Query: "refund"})
			return err
		}),
		"DiscoveryService/SearchTools": discovery(func(ctx context.Context) error {
			_, err := e.disc.SearchTools(ctx, &pb.SearchToolsRequest{Caller: support})
			return err
		}),
		"DiscoveryService/DescribeTool": discovery(func(ctx context.Context) error {
			_, err := e.disc.DescribeTool(ctx, &pb.DescribeToolRequest{Caller: support, Name: "get_order"})
			return err
		}),
		"DiscoveryService/AuthorizeCall": discovery(func(ctx context.Context) error {
			_, err := e.disc.AuthorizeCall(ctx, &pb.AuthorizeCallRequest{Caller: support, Name: "get_order", ArgumentsJson: `{"order_id":"ORD-1"}`})
			return err
		}),
		"DiscoveryService/ReportOutcome": discovery(func(ctx context.Context) error {
			_, err := e.disc.ReportOutcome(ctx, &pb.ReportOutcomeRequest{Caller: support, DiscoveryId: "d", Outcome: &pb.ReportOutcomeRequest_NoneFit{NoneFit: true}})
			if status.Code(err) == codes.Unavailable { // no feedback recorder in this server
				return nil
			}
			return err
		}),
		"CatalogService/PutCards": catalog(func(ctx context.Context) error {
			_, err := e.cat.PutCards(ctx, cardsReq(simpleCard("acme", "tools", "authed")))
			return err
		}),
		"CatalogService/GetCard": catalog(func(ctx context.Context) error {
			_, err := e.cat.GetCard(ctx, &pb.GetCardRequest{Tenant: "acme", Server: "orders", Name: "get_order"})
			return err
		}),
		"CatalogService/ListCards": catalog(func(ctx context.Context) error {
			_, err := e.cat.ListCards(ctx, &pb.ListCardsRequest{Tenant: "acme"})
			return err
		}),
		"CatalogService/DeleteCard": catalog(func(ctx context.Context) error {
			_, err := e.cat.DeleteCard(ctx, &pb.DeleteCardRequest{Tenant: "acme", Server: "tools", Name: "no_such_card"})
			if status.Code(err) == codes.NotFound {
				return nil
			}
			return err
		}),
		"CatalogService/PutServers": catalog(func(ctx context.Context) error {
			_, err := e.cat.PutServers(ctx, &pb.PutServersRequest{Servers: []*pb.ServerInfo{{Tenant: "acme", Name: "tools", Title: "Tools"}}})
			return err
		}),
		"CatalogService/ListServers": catalog(func(ctx context.Context) error {
			_, err := e.cat.ListServers(ctx, &pb.ListServersRequest{Tenant: "acme"})
			return err
		}),
		"CatalogService/DeleteServer": catalog(func(ctx context.Context) error {
			_, err := e.cat.DeleteServer(ctx, &pb.DeleteServerRequest{Tenant: "acme", Name: "no_such_server"})
			if status.Code(err) == codes.NotFound {
				return nil
			}
			return err
		}),
		"ExecutionService/ListTools": execution(func(ctx context.Context) error {
			_, err := e.exec.ListTools(ctx, &pb.ExecutionServiceListToolsRequest{})
			return err
		}),
		"ExecutionService/SearchTools": execution(func(ctx context.Context) error {
			_, err := e.exec.SearchTools(ctx, &pb.ExecutionServiceSearchToolsRequest{Query: "order"})
			return err
		}),
		"ExecutionService/DescribeTool": execution(func(ctx context.Context) error {
			_, err := e.exec.DescribeTool(ctx, &pb.ExecutionServiceDescribeToolRequest{Name: "get_order"})
			return err
		}),
		"ExecutionService/CallTool": execution(func(ctx context.Context) error {
			_, err := e.exec.CallTool(ctx, &pb.CallToolRequest{Name: "get_order", ArgumentsJson: `{"order_id":"ORD-1"}`})
			if status.Code(err) == codes.FailedPrecondition { // authorized; no upstream registered
				return nil
			}
			return err
		}),
	}
	// The table covers every method of the three services.
	var want []string
	for _, sd := range []struct {
		name    string
		methods []string
	}{
		{"DiscoveryService", methodNames(pb.DiscoveryService_ServiceDesc.Methods)},
		{"CatalogService", methodNames(pb.CatalogService_ServiceDesc.Methods)},
		{"ExecutionService", methodNames(pb.ExecutionService_ServiceDesc.Methods)},
	} {
		for _, m := range sd.methods {
			want = append(want, sd.name+"/"+m)
		}
	}
	var got []string
	for m := range rpcs {
		got = append(got, m)
	}
	slices.Sort(got)
	slices.Sort(want)
	mustEqualStrings(t, "RPCs tested", got, want)

	for _, name := range got {
		r := rpcs[name]
		t.Run(name, func(t *testing.T) {
			wantCode(t, r.call(bearerCtx(t, "")), codes.Unauthenticated, "authorization: Bearer")
			wantCode(t, r.call(bearerCtx(t, "not-a-token-of-this-server")), codes.Unauthenticated)
			wantCode(t, r.call(metadata.AppendToOutgoingContext(rpcCtx(t), "authorization", "Basic "+adminToken)), codes.Unauthenticated)
			for _, tok := range r.wrong {
				wantCode(t, r.call(bearerCtx(t, tok)), r.wrongErr)
			}
			for _, tok := range r.foreign {
				wantCode(t, r.call(bearerCtx(t, tok)), codes.Unauthenticated)
			}
			for _, tok := range r.right {
				if err := r.call(bearerCtx(t, tok)); err != nil {
					t.Errorf("with a token that may: %v", err)
				}
			}
		})
	}
}

func methodNames(ms []grpc.MethodDesc) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.MethodName)
	}
	return out
}

// TestOpenServices: without any credential configured both services take
// calls without one (the README's tour on loopback); a catalog token alone
// protects CatalogService only.
func TestOpenServices(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t)})
	if _, err := e.disc.DiscoverTools(rpcCtx(t), &pb.DiscoverToolsRequest{Caller: supportCaller(), Query: "refund"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.cat.ListCards(rpcCtx(t), &pb.ListCardsRequest{Tenant: "acme"}); err != nil {
		t.Fatal(err)
	}
	// A token sent to an open service is not looked at.
	if _, err := e.cat.ListCards(bearerCtx(t, "whatever-token-value"), &pb.ListCardsRequest{Tenant: "acme"}); err != nil {
		t.Fatal(err)
	}
}

// TestBoundCaller: a discover token bound to a caller is that caller,
// whatever the request says; the request may repeat or narrow it, never
// widen it (the review's finding 1: any client could claim scopes "*").
func TestBoundCaller(t *testing.T) {
	e := authEnv(t, envOptions{})
	discover := func(token string, c *pb.Caller) (*pb.DiscoverToolsResponse, error) {
		return e.disc.DiscoverTools(bearerCtx(t, token), &pb.DiscoverToolsRequest{Caller: c, Query: "customer wants their money back for order 1234"})
	}
	// Bound: tenant acme, the support scopes (18 of the 53 cards).
	for _, c := range []*pb.Caller{nil, {}, {Tenant: "acme"}, {Tenant: "acme", Subject: "agent-7", Scopes: supportScopes}, {SessionId: "s1"}} {
		res, err := discover(boundToken, c)
		if err != nil {
			t.Fatalf("caller %v: %v", c, err)
		}
		if res.GetCandidateCount() != 18 {
			t.Errorf("caller %v: candidate_count %d, want the binding's 18", c, res.GetCandidateCount())
		}
		for _, tl := range res.GetTools() {
			if tl.GetCard().GetName() == "issue_refund" {
				t.Errorf("caller %v: got billing/issue_refund, which needs billing:admin", c)
			}
		}
	}
	// Narrowed: fewer scopes than bound.
	res, err := discover(boundToken, &pb.Caller{Scopes: []string{"orders:read"}})
	if err != nil {
		t.Fatal(err)
	}
	if n := res.GetCandidateCount(); n == 0 || n >= 18 {
		t.Errorf("narrowed to orders:read: candidate_count %d, want fewer than 18", n)
	}
	// Widened or another tenant or subject: refused, nothing answered.
	for _, tc := range []struct {
		c    *pb.Caller
		part string
	}{
		{&pb.Caller{Tenant: "acme", Scopes: []string{"*"}}, "caller.scopes[0]"},
		{&pb.Caller{Scopes: []string{"support:read", "billing:*"}}, "caller.scopes[1]"},
		{&pb.Caller{Tenant: "globex"}, "caller.tenant"},
	} {
		_, err := discover(boundToken, tc.c)
		wantCode(t, err, codes.PermissionDenied, tc.part)
		_, err = e.disc.DescribeTool(bearerCtx(t, boundToken), &pb.DescribeToolRequest{Caller: tc.c, Name: "issue_refund"})
		wantCode(t, err, codes.PermissionDenied, tc.part)
	}
	// A bound subject is the subject.
	_, err = discover(aliceToken, &pb.Caller{Subject: "bob"})
	wantCode(t, err, codes.PermissionDenied, "caller.subject")
	if _, err := discover(aliceToken, &pb.Caller{Subject: "alice"}); err != nil {
		t.Errorf("alice as alice: %v", err)
	}
	// AuthorizeCall of a tool outside the binding: unknown, even when the
	// request claims "*"... which it may not.
	a, err := e.disc.AuthorizeCall(bearerCtx(t, boundToken), &pb.AuthorizeCallRequest{Name: "issue_refund", ArgumentsJson: `{}`})
	if err != nil {
		t.Fatal(err)
	}
	if a.GetAllowed() || a.GetDecision() != pb.AuthorizeCallResponse_DECISION_DENY_UNKNOWN_TOOL {
		t.Errorf("bound support caller authorized billing/issue_refund: %v", a)
	}
	// An unbound discover token trusts the request (the orchestrator is
	// trusted to state its end user): all 53.
	res, err = discover(discoverToken, adminCaller())
	if err != nil {
		t.Fatal(err)
	}
	if res.GetCandidateCount() != 53 {
		t.Errorf("unbound token with caller *: candidate_count %d, want 53", res.GetCandidateCount())
	}
}

// jwks is an issuer for tests: an ECDSA key, its JWKS served over HTTP on
// loopback, and a signer.
type jwks struct {
	srv    *httptest.Server
	signer jose.Signer
}

func newJWKS(t *testing.T) *jwks {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	set := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &key.PublicKey, KeyID: "k1", Algorithm: string(jose.ES256), Use: "sig"}}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(set)
	}))
	t.Cleanup(srv.Close)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	return &jwks{srv: srv, signer: signer}
}

func (j *jwks) token(t *testing.T, extra map[string]any, exp time.Duration) string {
	t.Helper()
	now := time.Now()
	c := jwt.Claims{Issuer: "https://idp.example", Audience: jwt.Audience{"cardex"}, Subject: "alice@acme.example",
		Expiry: jwt.NewNumericDate(now.Add(exp)), IssuedAt: jwt.NewNumericDate(now)}
	s, err := jwt.Signed(j.signer).Claims(c).Claims(extra).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestJWTCaller: with a JWKS configured, a JWT is a discover credential
// whose claims are the caller.
func TestJWTCaller(t *testing.T) {
	j := newJWKS(t)
	v, err := auth.NewJWTVerifier(t.Context(), auth.JWTConfig{JWKS: j.srv.URL, Issuer: "https://idp.example", Audience: "cardex"})
	if err != nil {
		t.Fatal(err)
	}
	e := authEnv(t, envOptions{auth: &auth.Authenticator{Tokens: serviceTokens(t), JWT: v}})
	tok := j.token(t, map[string]any{"tenant": "acme", "scope": "support:read support:write orders:read billing:read"}, time.Hour)
	res, err := e.disc.DiscoverTools(bearerCtx(t, tok), &pb.DiscoverToolsRequest{Query: "refund the customer now"})
	if err != nil {
		t.Fatal(err)
	}
	if res.GetCandidateCount() != 18 {
		t.Errorf("JWT with the support scopes: candidate_count %d, want 18", res.GetCandidateCount())
	}
	_, err = e.disc.DiscoverTools(bearerCtx(t, tok), &pb.DiscoverToolsRequest{Caller: adminCaller(), Query: "refund"})
	wantCode(t, err, codes.PermissionDenied, "caller.")
	expired := j.token(t, map[string]any{"tenant": "acme", "scope": "*"}, -time.Hour)
	_, err = e.disc.DiscoverTools(bearerCtx(t, expired), &pb.DiscoverToolsRequest{Query: "refund"})
	wantCode(t, err, codes.Unauthenticated, "expired")
	// A JWT is no catalog credential.
	_, err = e.cat.ListCards(bearerCtx(t, tok), &pb.ListCardsRequest{Tenant: "acme"})
	wantCode(t, err, codes.PermissionDenied, "role discover")
}
