package server_test

// Regression tests for the findings of the second outside review (issue
// 20). Each failed on the code before its fix.

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/seed0cff8200/cardex/internal/access/auth"
	"github.com/seed0cff8200/cardex/internal/access/ratelimit"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// hugeExponents are arguments whose numbers the schema validator would read
// as million-digit rationals: 22 KB that cost about 17 ms of CPU per call.
func hugeExponents() string {
	return `{"order_id":"ORD-1","n":[` + strings.TrimSuffix(strings.Repeat("1e999999,", 2500), ",") + `]}`
}

// Finding 4: huge-exponent numbers were validated, at a cost per call that
// 2,500 calls turned into 40 s of CPU. Now they are refused before the
// validator runs, naming the path and the limit.
func TestFinding2NumbersBoundedBeforeValidation(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t)})
	c := &pb.Caller{Tenant: "acme", Scopes: []string{"orders:read"}}
	for _, tc := range []struct{ args, want string }{
		{hugeExponents(), "at '/n/0': the number's exponent is 999999; the limit is ±400"},
		{`{"order_id":"ORD-1","n":1e-999999}`, "at '/n': the number's exponent is -999999; the limit is ±400"},
		{`{"order_id":"ORD-1","n":` + strings.Repeat("9", 310) + `}`, "at '/n': a number of 310 characters; the limit is 100"},
		{`{"order_id":"ORD-1","n":1e309}`, "at '/n': number 1e309 is out of the range of a float64 (±1.8e308)"},
	} {
		a, err := e.disc.AuthorizeCall(rpcCtx(t), &pb.AuthorizeCallRequest{Caller: c, Server: "orders", Name: "get_order", ArgumentsJson: tc.args})
		if err != nil {
			t.Fatal(err)
		}
		if a.GetAllowed() || a.GetDecision() != pb.AuthorizeCallResponse_DECISION_DENY_INVALID_ARGUMENTS || strings.Join(a.GetViolations(), "; ") != tc.want {
			t.Errorf("%.40s…: %v; want DENY_INVALID_ARGUMENTS with [%s]", tc.args, a, tc.want)
		}
	}
}

// Finding 10: an unbound discover token names its caller in each request,
// so varying the caller (a different tenant each time) escaped every
// bucket: 3,000 DescribeTool calls, 0 limited. The credential has a bucket
// of its own now, whatever caller it names.
func TestFinding2CredentialBucket(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t), auth: &auth.Authenticator{Tokens: serviceTokens(t)}, bearer: catalogToken,
		limiter: ratelimit.New(ratelimit.Config{CallRate: 5, TenantRate: 50, CredentialRate: 1})})
	limited, other := 0, 0
	start := time.Now()
	for i := range 300 {
		c := &pb.Caller{Tenant: fmt.Sprintf("tenant-%d", i), Subject: "u", Scopes: []string{"*"}}
		_, err := e.disc.DescribeTool(bearerCtx(t, discoverToken), &pb.DescribeToolRequest{Caller: c, Server: "orders", Name: "get_order"})
		switch st := status.Convert(err); {
		case st.Code() == codes.ResourceExhausted && strings.Contains(st.Message(), "rate limit of the credential") && strings.Contains(st.Message(), "discovery: 2 per second"):
			limited++
		case st.Code() != codes.NotFound: // other tenants have no such card
			other++
			t.Logf("call %d: %v", i, err)
		}
	}
	// The credential's discovery bucket holds 2 and refills 2 a second: at
	// most that many calls pass, however long the loop took.
	allowed := 2 + int(2*time.Since(start).Seconds()) + 1
	if 300-limited > allowed || other != 0 {
		t.Fatalf("%d of 300 calls with a new tenant each passed, want at most %d (the credential's bucket); %d other answers", 300-limited, allowed, other)
	}
	// Another credential has its own bucket.
	if _, err := e.disc.DescribeTool(bearerCtx(t, adminToken), &pb.DescribeToolRequest{Caller: &pb.Caller{Tenant: "acme", Scopes: []string{"*"}}, Server: "orders", Name: "get_order"}); err != nil {
		t.Fatalf("the admin token was limited by the orchestrator's calls: %v", err)
	}
}

// Finding 13: reserved names were accepted: a card meta/call_tool (listed
// as meta__call_tool with its author's text), a server entry cardex__x. No
// write path takes them now; each refusal names the field.
func TestFinding2ReservedNames(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, tc := range []struct{ server, name, field string }{
		{"meta", "call_tool", "name"},
		{"meta", "search_tools", "name"},
		{"meta", "Describe_Tool", "name"},
		{"meta", "cardex__x", "name"},
		{"cardex__x", "tool", "server"},
		{"cardex", "tool", "server"},
	} {
		_, err := e.cat.PutCards(rpcCtx(t), cardsReq(simpleCard("acme", tc.server, tc.name)))
		wantCode(t, err, codes.InvalidArgument, tc.field, "reserved")
	}
	for _, name := range []string{"cardex__x", "CARDEX", "cardex"} {
		_, err := e.cat.PutServers(rpcCtx(t), &pb.PutServersRequest{Servers: []*pb.ServerInfo{{Tenant: "acme", Name: name, Title: "Cardex's own"}}})
		wantCode(t, err, codes.InvalidArgument, "name", "reserved")
	}
	// Names that merely contain the words are fine.
	if _, err := e.cat.PutCards(rpcCtx(t), cardsReq(simpleCard("acme", "cardexfan", "call_tools_log"))); err != nil {
		t.Fatal(err)
	}
}

// Finding 14: a body that is not a protobuf message at all answered
// Internal; it is the caller's error, InvalidArgument, naming the request.
func TestFinding2UndecodableRequest(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t)})
	for _, tc := range []struct {
		method string
		body   rawMsg
		resp   proto.Message
	}{
		{"/cardex.v1.DiscoveryService/DiscoverTools", rawMsg{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, &pb.DiscoverToolsResponse{}}, // a length past the end
		{"/cardex.v1.DiscoveryService/AuthorizeCall", rawMsg{0xff}, &pb.AuthorizeCallResponse{}},                               // a truncated tag
		{"/cardex.v1.CatalogService/PutCards", rawMsg{0x0b}, &pb.PutCardsResponse{}},                                           // a start-group without its end
	} {
		body := tc.body
		err := e.conn.Invoke(rpcCtx(t), tc.method, &body, tc.resp, grpc.ForceCodecV2(rawCodec{}))
		wantCode(t, err, codes.InvalidArgument, "request: is not a valid protobuf encoding of cardex.v1.")
	}
	// The same connection still works.
	e.discover(t, &pb.DiscoverToolsRequest{Caller: adminCaller(), Query: "refund"})
}

// Finding 14: pins with an empty or a 10,000-character name were dropped
// silently; a malformed pin is the caller's error, refused naming the entry
// and the limit. (A well-formed pin the caller may not see is still left
// out without a word: unknown means unknown.)
func TestFinding2BadPinsRefused(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t)})
	for _, tc := range []struct {
		pin  *pb.ToolRef
		want string
	}{
		{&pb.ToolRef{Server: "orders", Name: ""}, "always_load[0].name: is required"},
		{&pb.ToolRef{Server: "orders", Name: strings.Repeat("n", 10000)}, "always_load[0].name: is 10000 characters; it must match [A-Za-z0-9_.-]{1,128}"},
		{&pb.ToolRef{Server: "orders", Name: "get order"}, "always_load[0].name: is 9 characters; it must match [A-Za-z0-9_.-]{1,128}"},
		{&pb.ToolRef{Server: "", Name: "get_order"}, "always_load[0].server: is required"},
	} {
		_, err := e.disc.DiscoverTools(rpcCtx(t), &pb.DiscoverToolsRequest{Caller: adminCaller(), Query: "refund",
			AlwaysLoad: []*pb.ToolRef{tc.pin}})
		wantCode(t, err, codes.InvalidArgument, tc.want)
	}
	d := e.discover(t, &pb.DiscoverToolsRequest{Caller: &pb.Caller{Tenant: "acme", Scopes: []string{"orders:read"}}, Query: "refund",
		AlwaysLoad: []*pb.ToolRef{{Server: "billing", Name: "issue_refund"}, {Server: "orders", Name: "no_such_tool"}}})
	for _, n := range shortNames(d) {
		if n == "billing/issue_refund" {
			t.Fatal("a pin outside the caller's scopes was listed")
		}
	}
}
