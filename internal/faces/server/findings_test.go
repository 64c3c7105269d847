package server_test

// Regression tests for the six findings of the outside review (issue 9).
// Each failed on the code before the fix.

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/access/ratelimit"
	"github.com/seed0cff8200/cardex/internal/telemetry/feedback"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// Finding 2: a schema thousands of levels deep held a core for minutes at
// registration, or made one AuthorizeCall take a minute and a gigabyte.
// Now it is refused at once, naming the field and the limit.
func TestFindingDeepSchemasRefused(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, tc := range []struct{ keyword, open, shut string }{
		{"not", `{"not":`, `}`},
		{"items", `{"items":`, `}`},
	} {
		c := simpleCard("acme", "tools", "deep_"+tc.keyword)
		c.InputSchema = []byte(strings.Repeat(tc.open, 6000) + `{}` + strings.Repeat(tc.shut, 6000))
		ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
		_, err := e.cat.PutCards(ctx, cardsReq(c))
		cancel()
		wantCode(t, err, codes.InvalidArgument, "input_schema", "nests more than 64 levels deep; the limit is 64")
	}
	// $ref fan-out: 1.3 KB that would cost 2^20 evaluations per call.
	var defs []string
	for i := range 20 {
		defs = append(defs, fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1))
	}
	c := simpleCard("acme", "tools", "ref_bomb")
	c.InputSchema = []byte(`{"$defs":{` + strings.Join(defs, ",") + `,"d20":{"type":"object"}},"$ref":"#/$defs/d0"}`)
	_, err := e.cat.PutCards(rpcCtx(t), cardsReq(c))
	wantCode(t, err, codes.InvalidArgument, "input_schema", "subschema evaluations", "the limit is 100000")
}

// Finding 3: subject and session_id had no length limit (8 MB each was
// accepted and logged).
func TestFindingCallerFieldLimits(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t), logMode: "raw", feedback: true})
	huge := strings.Repeat("s", 8<<20)
	for _, tc := range []struct {
		c     *pb.Caller
		field string
	}{
		{&pb.Caller{Tenant: "acme", Scopes: []string{"*"}, SessionId: huge}, "caller.session_id: is 8388608 characters; the limit is 128"},
		{&pb.Caller{Tenant: "acme", Scopes: []string{"*"}, Subject: huge}, "caller.subject: is 8388608 characters; the limit is 256"},
		{&pb.Caller{Tenant: "acme", Scopes: []string{strings.Repeat("x", 129)}}, "caller.scopes[0]: is 129 characters; the limit is 128"},
		{&pb.Caller{Tenant: "acme", Scopes: []string{"*"}, SessionId: "a\nb"}, "caller.session_id: contains a control character"},
	} {
		_, err := e.disc.DiscoverTools(rpcCtx(t), &pb.DiscoverToolsRequest{Caller: tc.c, Query: "refund"})
		wantCode(t, err, codes.InvalidArgument, tc.field)
		_, err = e.disc.DescribeTool(rpcCtx(t), &pb.DescribeToolRequest{Caller: tc.c, Name: "get_order"})
		wantCode(t, err, codes.InvalidArgument, tc.field)
		_, err = e.disc.ReportOutcome(rpcCtx(t), &pb.ReportOutcomeRequest{Caller: tc.c, DiscoveryId: "x", Outcome: &pb.ReportOutcomeRequest_NoneFit{NoneFit: true}})
		wantCode(t, err, codes.InvalidArgument, tc.field)
	}
	// Nothing of it reached the discovery log.
	if entries, _ := readLog(t, e.dlog, e.logPath); len(entries) != 0 {
		t.Errorf("discovery log has %d entries after refused calls", len(entries))
	}
}

// Finding 4: sessions were keyed by tenant and session id only, so one
// subject's DescribeTool was recorded as another subject's implicit miss,
// naming a card that subject may not see.
func TestFindingSessionsPerSubject(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t), feedback: true})
	alice := &pb.Caller{Tenant: "acme", Subject: "alice", Scopes: supportScopes, SessionId: "conversation-1"}
	bob := &pb.Caller{Tenant: "acme", Subject: "bob", Scopes: []string{"*"}, SessionId: "conversation-1"}
	d := e.discover(t, &pb.DiscoverToolsRequest{Caller: alice, Query: "where is my package", TopK: 3})
	for _, n := range shortNames(d) {
		if n == "billing/issue_refund" || n == "support/create_ticket" {
			t.Fatalf("precondition: %s not in alice's shortlist", n)
		}
	}
	// Bob, same tenant and session id, describes and authorizes a tool
	// alice may not see: no implicit miss of alice's.
	if _, err := e.disc.DescribeTool(rpcCtx(t), &pb.DescribeToolRequest{Caller: bob, Server: "billing", Name: "issue_refund"}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.disc.AuthorizeCall(rpcCtx(t), &pb.AuthorizeCallRequest{Caller: bob, Server: "billing", Name: "issue_refund", ArgumentsJson: `{}`}); err != nil {
		t.Fatal(err)
	}
	for _, ev := range events(t, e.fbPath) {
		if ev.Type == feedback.TypeImplicitMiss {
			t.Errorf("implicit miss recorded across subjects: %+v", ev)
		}
	}
	// Alice's own describe outside her shortlist still is one.
	if _, err := e.disc.DescribeTool(rpcCtx(t), &pb.DescribeToolRequest{Caller: alice, Server: "support", Name: "create_ticket"}); err != nil {
		t.Fatal(err)
	}
	var misses []feedback.Event
	for _, ev := range events(t, e.fbPath) {
		if ev.Type == feedback.TypeImplicitMiss {
			misses = append(misses, ev)
		}
	}
	if len(misses) != 1 || misses[0].DiscoveryID != d.GetDiscoveryId() || misses[0].Tool.Name != "create_ticket" {
		t.Errorf("alice's implicit miss: %+v; want one, of her discovery, for create_ticket", misses)
	}
}

// Finding 5: arguments with a duplicate key passed validation (the last
// one won) and were forwarded as they were.
func TestFindingDuplicateKeys(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t)})
	c := &pb.Caller{Tenant: "acme", Scopes: []string{"orders:read"}}
	for _, tc := range []struct{ args, path string }{
		{`{"order_id":1,"order_id":"ORD-1"}`, `at '/order_id': duplicate key "order_id"`},
		{`{"order_id":"ORD-1","order_id":"ORD-1"}`, `at '/order_id': duplicate key "order_id"`},
	} {
		a, err := e.disc.AuthorizeCall(rpcCtx(t), &pb.AuthorizeCallRequest{Caller: c, Server: "orders", Name: "get_order", ArgumentsJson: tc.args})
		if err != nil {
			t.Fatal(err)
		}
		if a.GetAllowed() || a.GetDecision() != pb.AuthorizeCallResponse_DECISION_DENY_INVALID_ARGUMENTS {
			t.Fatalf("%s: %v; want DENY_INVALID_ARGUMENTS", tc.args, a)
		}
		if len(a.GetViolations()) != 1 || a.GetViolations()[0] != tc.path {
			t.Errorf("%s: violations %q, want [%q]", tc.args, a.GetViolations(), tc.path)
		}
	}
	// A card without an input schema refuses them too.
	nc := simpleCard("acme", "tools", "no_schema")
	e.put(t, nc)
	a, err := e.disc.AuthorizeCall(rpcCtx(t), &pb.AuthorizeCallRequest{Caller: c, Server: "tools", Name: "no_schema", ArgumentsJson: `{"a":{"b":1,"b":2}}`})
	if err != nil {
		t.Fatal(err)
	}
	if a.GetAllowed() || strings.Join(a.GetViolations(), "") != `at '/a/b': duplicate key "b"` {
		t.Errorf("schema-less card: %v", a)
	}
}

// rawCodec sends pre-encoded protobuf bytes, which may hold what a
// protobuf library refuses to produce (invalid UTF-8 in a string field).
type rawCodec struct{}

type rawMsg []byte

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(*v.(*rawMsg))}, nil
}

func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

// corrupt encodes m and replaces the marker in it with invalid UTF-8 of
// the same length.
func corrupt(t *testing.T, m proto.Message, marker string) *rawMsg {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	bad := bytes.Repeat([]byte{0xff}, len(marker))
	if !bytes.Contains(b, []byte(marker)) {
		t.Fatalf("marker %q not in the encoding", marker)
	}
	out := rawMsg(bytes.Replace(b, []byte(marker), bad, 1))
	return &out
}

// Finding 6: invalid UTF-8 answered Internal; now InvalidArgument naming
// the field.
func TestFindingInvalidUTF8(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t)})
	for _, tc := range []struct {
		method string
		req    proto.Message
		resp   proto.Message
		field  string
	}{
		{"/cardex.v1.DiscoveryService/DiscoverTools", &pb.DiscoverToolsRequest{Caller: &pb.Caller{Tenant: "acme", SessionId: "MARK"}, Query: "refund"},
			&pb.DiscoverToolsResponse{}, "caller.session_id: is not valid UTF-8"},
		{"/cardex.v1.DiscoveryService/DiscoverTools", &pb.DiscoverToolsRequest{Caller: &pb.Caller{Tenant: "acme"}, Query: "refund MARK"},
			&pb.DiscoverToolsResponse{}, "query: is not valid UTF-8"},
		{"/cardex.v1.DiscoveryService/AuthorizeCall", &pb.AuthorizeCallRequest{Caller: &pb.Caller{Tenant: "acme", Scopes: []string{"a", "MARK"}}, Name: "get_order"},
			&pb.AuthorizeCallResponse{}, "caller.scopes[1]: is not valid UTF-8"},
		{"/cardex.v1.DiscoveryService/AuthorizeCall", &pb.AuthorizeCallRequest{Caller: &pb.Caller{Tenant: "acme"}, Name: "get_order", ArgumentsJson: `{"order_id":"MARK"}`},
			&pb.AuthorizeCallResponse{}, "arguments_json: is not valid UTF-8"},
		{"/cardex.v1.CatalogService/PutCards", cardsReq(simpleCard("acme", "t", "a"), cards.Card{Tenant: "acme", Server: "t", Name: "b", Summary: "MARK"}),
			&pb.PutCardsResponse{}, "cards[1].summary: is not valid UTF-8"},
	} {
		err := e.conn.Invoke(rpcCtx(t), tc.method, corrupt(t, tc.req, "MARK"), tc.resp, grpc.ForceCodecV2(rawCodec{}))
		wantCode(t, err, codes.InvalidArgument, tc.field)
	}
	// The same connection still works.
	e.discover(t, &pb.DiscoverToolsRequest{Caller: adminCaller(), Query: "refund"})
}

// Finding 6: no rate limits. Discovery and describe draw from a bucket
// twice the size of the call bucket; a refusal is ResourceExhausted with a
// retry delay.
func TestFindingRateLimits(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t), limiter: ratelimit.New(ratelimit.Config{CallRate: 1, TenantRate: 3})})
	alice := &pb.Caller{Tenant: "acme", Subject: "alice", Scopes: []string{"*"}}
	authorize := func(c *pb.Caller) error {
		_, err := e.disc.AuthorizeCall(rpcCtx(t), &pb.AuthorizeCallRequest{Caller: c, Server: "orders", Name: "get_order", ArgumentsJson: `{"order_id":"ORD-1"}`})
		return err
	}
	describe := func(c *pb.Caller) error {
		_, err := e.disc.DescribeTool(rpcCtx(t), &pb.DescribeToolRequest{Caller: c, Server: "orders", Name: "get_order"})
		return err
	}
	if err := authorize(alice); err != nil {
		t.Fatal(err)
	}
	// The retry delay is in the status (RetryInfo) and, in whole seconds, in
	// the retry-after header (the HTTP/JSON API's Retry-After).
	var header metadata.MD
	_, err := e.disc.AuthorizeCall(rpcCtx(t), &pb.AuthorizeCallRequest{Caller: alice, Server: "orders", Name: "get_order", ArgumentsJson: `{"order_id":"ORD-1"}`}, grpc.Header(&header))
	st := wantCode(t, err, codes.ResourceExhausted, "rate limit of the caller", "call: 1 per second", "retry after")
	retry := retryDelay(t, st)
	if retry <= 0 || retry > time.Second {
		t.Errorf("retry delay %v, want within (0, 1s]", retry)
	}
	if got := header.Get("retry-after"); len(got) != 1 || got[0] != "1" {
		t.Errorf("retry-after header %q, want [1]", got)
	}
	// Discovery: twice the call rate, its own bucket.
	for i := range 2 {
		if err := describe(alice); err != nil {
			t.Fatalf("describe %d: %v", i+1, err)
		}
	}
	wantCode(t, describe(alice), codes.ResourceExhausted, "discovery: 2 per second")
	// Another caller of the tenant has its own bucket, until the tenant's
	// (3 calls per second) runs out.
	bob := &pb.Caller{Tenant: "acme", Subject: "bob", Scopes: []string{"*"}}
	if err := authorize(bob); err != nil {
		t.Fatal(err)
	}
	carol := &pb.Caller{Tenant: "acme", Subject: "carol", Scopes: []string{"*"}}
	if err := authorize(carol); err != nil {
		t.Fatal(err)
	}
	dave := &pb.Caller{Tenant: "acme", Subject: "dave", Scopes: []string{"*"}}
	wantCode(t, authorize(dave), codes.ResourceExhausted, "rate limit of the tenant")
	// Another tenant is not affected.
	if err := authorize(&pb.Caller{Tenant: "globex", Subject: "x", Scopes: []string{"*"}}); status.Code(err) == codes.ResourceExhausted {
		t.Errorf("globex limited by acme's calls: %v", err)
	}
}

func retryDelay(t *testing.T, st *status.Status) time.Duration {
	t.Helper()
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	t.Fatalf("no RetryInfo in %v", st.Details())
	return 0
}
