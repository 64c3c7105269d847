package server_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/seed0cff8200/cardex/cards"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

func TestDiscoverToolsReturnsSchemasAsStored(t *testing.T) {
	e := newEnv(t, envOptions{cards: slices.Concat(acmeCards(t), globexCards(t))})
	for _, q := range []string{"customer wants their money back for order 1234", "where is my package", "open a bug about the login page", "revenue"} {
		res := e.discover(t, &pb.DiscoverToolsRequest{Caller: adminCaller(), Query: q, TopK: 50})
		if len(res.GetTools()) == 0 {
			t.Fatalf("%q: no tools", q)
		}
		var shortlist int64
		for _, x := range res.GetTools() {
			c := x.GetCard()
			got, err := e.cat.GetCard(rpcCtx(t), &pb.GetCardRequest{Tenant: c.GetTenant(), Server: c.GetServer(), Name: c.GetName()})
			if err != nil {
				t.Fatalf("GetCard(%s/%s): %v", c.GetServer(), c.GetName(), err)
			}
			if c.GetInputSchema() == "" {
				t.Errorf("%s: no input_schema in the discovered card", c.GetName())
			}
			if c.GetInputSchema() != got.GetCard().GetInputSchema() || c.GetOutputSchema() != got.GetCard().GetOutputSchema() {
				t.Errorf("%s: schemas differ from GetCard's:\n%s\n%s", c.GetName(), c.GetInputSchema(), got.GetCard().GetInputSchema())
			}
			sameProto(t, "discovered card vs GetCard", c, got.GetCard())
			if x.GetTokens() <= 0 || x.GetReason() == "" {
				t.Errorf("%s: tokens %d, reason %q", c.GetName(), x.GetTokens(), x.GetReason())
			}
			shortlist += int64(x.GetTokens())
		}
		if res.GetTokens().GetShortlistTokens() != shortlist {
			t.Errorf("%q: shortlist_tokens %d, sum of the tools' tokens %d", q, res.GetTokens().GetShortlistTokens(), shortlist)
		}
		if res.GetTokens().GetMethod() == "" || res.GetTokens().GetCatalogTokens() < shortlist {
			t.Errorf("%q: tokens %v", q, res.GetTokens())
		}
		if res.GetDiscoveryId() == "" {
			t.Errorf("%q: no discovery_id", q)
		}
	}
}

func TestDiscoverToolsTopK(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t)})
	cases := []struct {
		topK int32
		want int
	}{{0, 5}, {1, 1}, {5, 5}, {12, 12}, {50, 50}}
	// "customer order invoice ticket service ..." matches most of the
	// catalogue, so every top_k can be filled.
	q := "customer order invoice ticket service deployment issue report refund payment logs search list get create update"
	for _, tc := range cases {
		res := e.discover(t, &pb.DiscoverToolsRequest{Caller: adminCaller(), Query: q, TopK: tc.topK})
		if len(res.GetTools()) != tc.want {
			t.Errorf("top_k %d: %d tools, want %d", tc.topK, len(res.GetTools()), tc.want)
		}
	}
}

func TestDiscoverToolsAlwaysLoad(t *testing.T) {
	e := newEnv(t, envOptions{cards: slices.Concat(acmeCards(t), globexCards(t), inactiveCards())})
	q := "restart the payments service" // nothing of the pins' own words
	plain := e.discover(t, &pb.DiscoverToolsRequest{Caller: supportCaller(), Query: q})
	pins := []*pb.ToolRef{
		{Server: "orders", Name: "get_order"},
		{Server: "billing", Name: "issue_refund"},          // billing:admin: dropped
		{Server: "support", Name: "search"},                //
		{Server: "support", Name: "export_ticket_archive"}, // revoked: dropped
		{Server: "nowhere", Name: "no_such_tool"},          // unknown: dropped
	}
	res := e.discover(t, &pb.DiscoverToolsRequest{Caller: supportCaller(), Query: q, AlwaysLoad: pins})
	got := toolNames(res.GetTools())
	if len(got) < 2 || got[0] != "orders/get_order" || got[1] != "support/search" {
		t.Fatalf("pins first, in request order: got %q", got)
	}
	for i, x := range res.GetTools() {
		if x.GetPinned() != (i < 2) {
			t.Errorf("%s pinned=%v", fmtTool(x), x.GetPinned())
		}
		if x.GetCard().GetName() == "issue_refund" || x.GetCard().GetName() == "export_ticket_archive" {
			t.Errorf("a forbidden pin was returned: %s", fmtTool(x))
		}
	}
	if res.GetCandidateCount() != plain.GetCandidateCount() || res.GetTokens().GetCatalogTokens() != plain.GetTokens().GetCatalogTokens() {
		t.Errorf("pins changed the counts: %d/%d vs %d/%d", res.GetCandidateCount(), res.GetTokens().GetCatalogTokens(),
			plain.GetCandidateCount(), plain.GetTokens().GetCatalogTokens())
	}
	var sum int64
	for _, x := range res.GetTools() {
		sum += int64(x.GetTokens())
	}
	if res.GetTokens().GetShortlistTokens() != sum {
		t.Errorf("shortlist_tokens %d, sum %d (a dropped pin counted?)", res.GetTokens().GetShortlistTokens(), sum)
	}
	// After the pins, the ranked list is the unpinned answer's, with the
	// pinned tools taken out (a pin that also ranks keeps its place as a pin).
	var wantRanked []string
	for _, n := range toolNames(plain.GetTools()) {
		if n != "orders/get_order" && n != "support/search" {
			wantRanked = append(wantRanked, n)
		}
	}
	mustEqualStrings(t, "ranked tools after the pins", got[2:], wantRanked)

	// A pin that also ranks appears once, pinned, with its scores.
	res = e.discover(t, &pb.DiscoverToolsRequest{Caller: supportCaller(), Query: "track my package shipment",
		AlwaysLoad: []*pb.ToolRef{{Server: "orders", Name: "track_shipment"}}})
	n := 0
	for _, x := range res.GetTools() {
		if x.GetCard().GetName() == "track_shipment" {
			n++
			if !x.GetPinned() || x.GetScores().GetFused() == 0 {
				t.Errorf("pinned and ranked: %s pinned=%v", fmtTool(x), x.GetPinned())
			}
		}
	}
	if n != 1 {
		t.Errorf("track_shipment appears %d times", n)
	}

	// Pins name a tool of the caller's tenant only: globex's pin of
	// orders/get_order gets globex's card.
	res = e.discover(t, &pb.DiscoverToolsRequest{Caller: &pb.Caller{Tenant: "globex", Scopes: []string{"orders:read"}}, Query: "pallets",
		AlwaysLoad: []*pb.ToolRef{{Server: "orders", Name: "get_order"}, {Server: "support", Name: "search"}}})
	for _, x := range res.GetTools() {
		if x.GetCard().GetTenant() != "globex" {
			t.Errorf("globex pin returned %s/%s/%s", x.GetCard().GetTenant(), x.GetCard().GetServer(), x.GetCard().GetName())
		}
	}
	if len(res.GetTools()) == 0 || !res.GetTools()[0].GetPinned() || res.GetTools()[0].GetCard().GetName() != "get_order" {
		t.Errorf("globex pin of orders/get_order: %q", toolNames(res.GetTools()))
	}
}

func TestDescribeToolAmbiguous(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t)})
	describe := func(c *pb.Caller, name, server string) *pb.DescribeToolResponse {
		t.Helper()
		res, err := e.disc.DescribeTool(rpcCtx(t), &pb.DescribeToolRequest{Caller: c, Name: name, Server: server})
		if err != nil {
			t.Fatalf("DescribeTool(%s, %q): %v", name, server, err)
		}
		return res
	}
	both := &pb.Caller{Tenant: "acme", Scopes: []string{"support:read", "repo:read"}}
	for _, c := range []*pb.Caller{adminCaller(), both} {
		res := describe(c, "search", "")
		if res.GetCard() != nil {
			t.Errorf("ambiguous name answered with a card: %v", res.GetCard())
		}
		mustEqualStrings(t, "ambiguous_servers", res.GetAmbiguousServers(), []string{"github", "support"})
		for _, srv := range []string{"github", "support"} {
			res := describe(c, "search", srv)
			if res.GetCard().GetServer() != srv || len(res.GetAmbiguousServers()) > 0 {
				t.Errorf("search on %s: %v", srv, res)
			}
		}
	}
	res := describe(supportCaller(), "search", "")
	if res.GetCard().GetServer() != "support" || len(res.GetAmbiguousServers()) > 0 {
		t.Errorf("support-only caller: %v, want exactly support/search", res)
	}
	_, err := e.disc.DescribeTool(rpcCtx(t), &pb.DescribeToolRequest{Caller: supportCaller(), Name: "search", Server: "github"})
	wantCode(t, err, codes.NotFound)
}

func TestAuthorizeCall(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t)})
	const (
		allow   = pb.AuthorizeCallResponse_DECISION_ALLOW
		unknown = pb.AuthorizeCallResponse_DECISION_DENY_UNKNOWN_TOOL
		ambig   = pb.AuthorizeCallResponse_DECISION_DENY_AMBIGUOUS
		invalid = pb.AuthorizeCallResponse_DECISION_DENY_INVALID_ARGUMENTS
	)
	cases := []struct {
		name         string
		caller       *pb.Caller
		tool, server string
		args         string
		want         pb.AuthorizeCallResponse_Decision
		wantTool     string   // server/name when the card is identified
		violations   []string // substrings, one per expected violation
		ambiguous    []string
	}{
		{"allow", supportCaller(), "get_order", "", `{"order_id":"ORD-1234"}`, allow, "orders/get_order", nil, nil},
		{"allow with server", supportCaller(), "get_order", "orders", `{"order_id":"1234"}`, allow, "orders/get_order", nil, nil},
		{"allow wildcard", adminCaller(), "issue_refund", "billing",
			`{"invoice_id":"in_1","reason":"other","idempotency_key":"k"}`, allow, "billing/issue_refund", nil, nil},
		{"unknown name", supportCaller(), "no_such_tool", "", `{}`, unknown, "", nil, nil},
		{"forbidden is unknown", supportCaller(), "issue_refund", "billing", `{"invoice_id":"in_1","reason":"other","idempotency_key":"k"}`, unknown, "", nil, nil},
		{"wrong server is unknown", supportCaller(), "get_order", "billing", `{"order_id":"1"}`, unknown, "", nil, nil},
		{"ambiguous", adminCaller(), "search", "", `{"query":"x"}`, ambig, "", nil, []string{"github", "support"}},
		{"ambiguous resolved", adminCaller(), "search", "support", `{"query":"password reset"}`, allow, "support/search", nil, nil},
		{"missing required", supportCaller(), "get_order", "", `{}`, invalid, "orders/get_order", []string{"order_id"}, nil},
		{"empty means {}", supportCaller(), "get_order", "", ``, invalid, "orders/get_order", []string{"order_id"}, nil},
		{"pattern and extra property", supportCaller(), "get_order", "", `{"order_id":"abc","note":"x"}`, invalid, "orders/get_order",
			[]string{"order_id", "note"}, nil},
		{"several violations", adminCaller(), "issue_refund", "", `{"invoice_id":7,"reason":"because","amount_cents":0}`, invalid,
			"billing/issue_refund", []string{"idempotency_key", "invoice_id", "reason", "amount_cents"}, nil},
		{"array", supportCaller(), "get_order", "", `[{"order_id":"1"}]`, invalid, "orders/get_order", []string{"JSON object"}, nil},
		{"string", supportCaller(), "get_order", "", `"1234"`, invalid, "orders/get_order", []string{"JSON object"}, nil},
		{"number", supportCaller(), "get_order", "", `1234`, invalid, "orders/get_order", []string{"JSON object"}, nil},
		{"null", supportCaller(), "get_order", "", `null`, invalid, "orders/get_order", []string{""}, nil},
		{"not JSON", supportCaller(), "get_order", "", `{order_id: 1}`, invalid, "orders/get_order", []string{"JSON object"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			res, err := e.disc.AuthorizeCall(rpcCtx(t), &pb.AuthorizeCallRequest{Caller: tc.caller, Name: tc.tool, Server: tc.server, ArgumentsJson: tc.args})
			if err != nil {
				t.Fatalf("AuthorizeCall: %v", err)
			}
			if res.GetDecision() != tc.want || res.GetAllowed() != (tc.want == allow) {
				t.Fatalf("decision %s allowed=%v (%q), want %s", res.GetDecision(), res.GetAllowed(), res.GetMessage(), tc.want)
			}
			if res.GetMessage() == "" {
				t.Errorf("no message")
			}
			gotTool := ""
			if res.GetTool() != nil {
				gotTool = res.GetTool().GetServer() + "/" + res.GetTool().GetName()
			}
			if gotTool != tc.wantTool {
				t.Errorf("tool %q, want %q", gotTool, tc.wantTool)
			}
			if (tc.wantTool != "") != (res.GetCardVersion() == 1) {
				t.Errorf("card_version %d", res.GetCardVersion())
			}
			mustEqualStrings(t, "ambiguous_servers", res.GetAmbiguousServers(), tc.ambiguous)
			if len(res.GetViolations()) < len(tc.violations) || (tc.violations == nil && len(res.GetViolations()) > 0) {
				t.Errorf("violations %q, want at least %d", res.GetViolations(), len(tc.violations))
			}
			all := strings.Join(res.GetViolations(), "\n")
			for _, v := range tc.violations {
				if !strings.Contains(all, v) {
					t.Errorf("violations %q do not mention %q", res.GetViolations(), v)
				}
			}
		})
	}
}

// TestCatalogWritesAreVisibleAtOnce: a write through CatalogService is
// reflected by DiscoveryService as soon as the call returns.
func TestCatalogWritesAreVisibleAtOnce(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t)})
	zebra := cards.Card{Tenant: "acme", Server: "zoo", Name: "feed_zebra", Kind: cards.KindFunction,
		Summary: "Feed the zebrafrobnicator in the zoo enclosure.", RequiredScopes: []string{"zoo:write"},
		InputSchema: []byte(`{"type":"object","properties":{"kg":{"type":"number"}},"required":["kg"]}`)}
	keeper := &pb.Caller{Tenant: "acme", Scopes: []string{"zoo:*", "support:read"}}
	query := &pb.DiscoverToolsRequest{Caller: keeper, Query: "zebrafrobnicator", TopK: 50}

	before := e.discover(t, query)
	if slices.Contains(toolNames(before.GetTools()), "zoo/feed_zebra") {
		t.Fatal("found before it was written")
	}
	res := e.put(t, zebra)
	if len(res) != 1 || res[0].GetOutcome() != "created" || res[0].GetVersion() != 1 {
		t.Fatalf("PutCards: %v", res)
	}

	t.Run("put_then_discoverable", func(t *testing.T) {
		got := e.discover(t, query)
		if names := toolNames(got.GetTools()); len(names) == 0 || names[0] != "zoo/feed_zebra" {
			t.Errorf("after PutCards: %q, want zoo/feed_zebra first", names)
		}
		if got.GetCandidateCount() != before.GetCandidateCount()+1 {
			t.Errorf("candidate_count %d, want %d", got.GetCandidateCount(), before.GetCandidateCount()+1)
		}
		if _, err := e.disc.DescribeTool(rpcCtx(t), &pb.DescribeToolRequest{Caller: keeper, Name: "feed_zebra"}); err != nil {
			t.Errorf("DescribeTool: %v", err)
		}
	})

	t.Run("same_content_is_unchanged", func(t *testing.T) {
		res := e.put(t, zebra)
		if res[0].GetOutcome() != "unchanged" || res[0].GetVersion() != 1 {
			t.Errorf("re-put of the same card: %v", res[0])
		}
	})

	t.Run("update_to_pending_then_active", func(t *testing.T) {
		p := zebra.Clone()
		p.Status = cards.StatusPending
		if r := e.put(t, p); r[0].GetOutcome() != "updated" || r[0].GetVersion() != 2 {
			t.Fatalf("PutCards pending: %v", r[0])
		}
		if slices.Contains(toolNames(e.discover(t, query).GetTools()), "zoo/feed_zebra") {
			t.Errorf("pending card still discoverable")
		}
		a := zebra.Clone()
		a.Status = cards.StatusActive
		e.put(t, a)
		if !slices.Contains(toolNames(e.discover(t, query).GetTools()), "zoo/feed_zebra") {
			t.Errorf("re-activated card not discoverable")
		}
	})

	t.Run("update_to_revoked_disappears", func(t *testing.T) {
		r := zebra.Clone()
		r.Status = cards.StatusRevoked
		e.put(t, r)
		got := e.discover(t, query)
		if slices.Contains(toolNames(got.GetTools()), "zoo/feed_zebra") {
			t.Errorf("revoked card still discoverable")
		}
		if got.GetCandidateCount() != before.GetCandidateCount() {
			t.Errorf("candidate_count %d, want %d", got.GetCandidateCount(), before.GetCandidateCount())
		}
		_, err := e.disc.DescribeTool(rpcCtx(t), &pb.DescribeToolRequest{Caller: keeper, Name: "feed_zebra"})
		wantCode(t, err, codes.NotFound)
		a, err := e.disc.AuthorizeCall(rpcCtx(t), &pb.AuthorizeCallRequest{Caller: keeper, Name: "feed_zebra", ArgumentsJson: `{"kg":2}`})
		if err != nil || a.GetDecision() != pb.AuthorizeCallResponse_DECISION_DENY_UNKNOWN_TOOL {
			t.Errorf("AuthorizeCall of a revoked card: %v %v", a, err)
		}
		if slices.Contains(summaryNames(e.searchAll(t, keeper, "", 100)), "zoo/feed_zebra") {
			t.Errorf("SearchTools lists the revoked card")
		}
		g, err := e.cat.GetCard(rpcCtx(t), &pb.GetCardRequest{Tenant: "acme", Server: "zoo", Name: "feed_zebra"})
		if err != nil || g.GetCard().GetStatus() != "revoked" {
			t.Errorf("GetCard: %v %v", g, err)
		}
		e.put(t, zebra) // back to active
	})

	t.Run("delete_then_gone", func(t *testing.T) {
		if !slices.Contains(toolNames(e.discover(t, query).GetTools()), "zoo/feed_zebra") {
			t.Fatal("precondition: card discoverable")
		}
		if _, err := e.cat.DeleteCard(rpcCtx(t), &pb.DeleteCardRequest{Tenant: "acme", Server: "zoo", Name: "feed_zebra"}); err != nil {
			t.Fatalf("DeleteCard: %v", err)
		}
		got := e.discover(t, query)
		if slices.Contains(toolNames(got.GetTools()), "zoo/feed_zebra") {
			t.Errorf("deleted card still discoverable")
		}
		if got.GetCandidateCount() != before.GetCandidateCount() {
			t.Errorf("candidate_count %d, want %d", got.GetCandidateCount(), before.GetCandidateCount())
		}
		_, err := e.disc.DescribeTool(rpcCtx(t), &pb.DescribeToolRequest{Caller: keeper, Name: "feed_zebra"})
		wantCode(t, err, codes.NotFound)
		_, err = e.cat.GetCard(rpcCtx(t), &pb.GetCardRequest{Tenant: "acme", Server: "zoo", Name: "feed_zebra"})
		wantCode(t, err, codes.NotFound, "zoo/feed_zebra")
		_, err = e.cat.DeleteCard(rpcCtx(t), &pb.DeleteCardRequest{Tenant: "acme", Server: "zoo", Name: "feed_zebra"})
		wantCode(t, err, codes.NotFound)
	})
}

func TestListCards(t *testing.T) {
	all := slices.Concat(acmeCards(t), globexCards(t), inactiveCards())
	e := newEnv(t, envOptions{cards: all})
	got := e.listAll(t, "acme")
	if len(got) != 53+len(inactiveCards()) {
		t.Errorf("ListCards(acme): %d cards", len(got))
	}
	for _, c := range got {
		if c.GetTenant() != "acme" {
			t.Errorf("ListCards(acme) returned a %s card", c.GetTenant())
		}
	}
	res, err := e.cat.ListCards(rpcCtx(t), &pb.ListCardsRequest{Tenant: "acme", Status: []string{"revoked"}})
	if err != nil || len(res.GetCards()) != 2 {
		t.Errorf("ListCards(status=revoked): %d cards, %v", len(res.GetCards()), err)
	}
	res, err = e.cat.ListCards(rpcCtx(t), &pb.ListCardsRequest{Tenant: "acme", Server: "billing"})
	if err != nil || len(res.GetCards()) != 12 || res.GetCards()[0].GetInputSchema() != "" {
		t.Errorf("ListCards(server=billing): %d cards (schemas left out: %v), %v", len(res.GetCards()), res.GetCards()[0].GetInputSchema() == "", err)
	}
}

// TestAuthorizeCallArgumentsMustBeAnObject: the gateway's contract is "the
// call's arguments as a JSON object"; that holds for a card without an input
// schema too.
func TestAuthorizeCallArgumentsMustBeAnObject(t *testing.T) {
	e := newEnv(t, envOptions{cards: []cards.Card{simpleCard("acme", "tools", "no_schema")}})
	for _, tc := range []struct {
		args string
		want pb.AuthorizeCallResponse_Decision
	}{
		{``, pb.AuthorizeCallResponse_DECISION_ALLOW},
		{`{}`, pb.AuthorizeCallResponse_DECISION_ALLOW},
		{`{"anything": [1, 2]}`, pb.AuthorizeCallResponse_DECISION_ALLOW},
		{`null`, pb.AuthorizeCallResponse_DECISION_DENY_INVALID_ARGUMENTS},
		{`[]`, pb.AuthorizeCallResponse_DECISION_DENY_INVALID_ARGUMENTS},
		{`"text"`, pb.AuthorizeCallResponse_DECISION_DENY_INVALID_ARGUMENTS},
		{`42`, pb.AuthorizeCallResponse_DECISION_DENY_INVALID_ARGUMENTS},
		{`true`, pb.AuthorizeCallResponse_DECISION_DENY_INVALID_ARGUMENTS},
		{`{} {}`, pb.AuthorizeCallResponse_DECISION_DENY_INVALID_ARGUMENTS},
	} {
		res, err := e.disc.AuthorizeCall(rpcCtx(t), &pb.AuthorizeCallRequest{Caller: adminCaller(), Name: "no_schema", ArgumentsJson: tc.args})
		if err != nil {
			t.Fatalf("AuthorizeCall(%s): %v", tc.args, err)
		}
		if res.GetDecision() != tc.want {
			t.Errorf("arguments %s: decision %s %q, want %s", tc.args, res.GetDecision(), res.GetViolations(), tc.want)
		}
	}
}

// pausingStore holds a PutCards call, once armed, after its write has
// committed until the call's context is cancelled, and reports when the
// retriever's next Sync has finished reading changes.
type pausingStore struct {
	cards.Store
	armed         atomic.Bool
	wrote, synced chan struct{}
}

func (s *pausingStore) Put(ctx context.Context, cs []cards.Card) ([]cards.PutResult, error) {
	res, err := s.Store.Put(ctx, cs)
	if err == nil && s.armed.Load() {
		close(s.wrote)
		<-ctx.Done() // the client has gone away after the commit
	}
	return res, err
}

func (s *pausingStore) Changes(ctx context.Context, since uint64, limit int) ([]cards.Change, error) {
	ch, err := s.Store.Changes(ctx, since, limit)
	if s.armed.Load() && (err != nil || len(ch) == 0) {
		s.armed.Store(false)
		close(s.synced)
	}
	return ch, err
}

// TestCommittedWriteVisibleWhenClientCancels: once PutCards has committed,
// the card is in the store; a client that gives up at that moment must not
// leave the retriever's view without it (there is no periodic sync to heal
// it: only the next write would).
func TestCommittedWriteVisibleWhenClientCancels(t *testing.T) {
	ps := &pausingStore{wrote: make(chan struct{}), synced: make(chan struct{})}
	e := newEnv(t, envOptions{cards: acmeCards(t)[:2], wrap: func(s cards.Store) cards.Store { ps.Store = s; return ps }})
	ps.armed.Store(true)
	ctx, cancel := context.WithCancel(rpcCtx(t))
	go func() { <-ps.wrote; cancel() }()
	card := simpleCard("acme", "zoo", "feed_okapi")
	_, err := e.cat.PutCards(ctx, cardsReq(card))
	wantCode(t, err, codes.Canceled)
	select {
	case <-ps.synced:
	case <-rpcCtx(t).Done():
		t.Fatal("the server never synced after the write")
	}
	if _, err := e.cat.GetCard(rpcCtx(t), &pb.GetCardRequest{Tenant: "acme", Server: "zoo", Name: "feed_okapi"}); err != nil {
		t.Fatalf("the write did not commit: %v", err)
	}
	if _, err := e.disc.DescribeTool(rpcCtx(t), &pb.DescribeToolRequest{Caller: adminCaller(), Name: "feed_okapi"}); err != nil {
		t.Errorf("committed card not discoverable after the client cancelled: %v", err)
	}
}

// TestConcurrentReadsAndWrites runs discovery RPCs while cards are written
// and deleted; under -race this checks the retriever's view is guarded, and
// that no read fails or shows a tool of another tenant meanwhile.
func TestConcurrentReadsAndWrites(t *testing.T) {
	e := newEnv(t, envOptions{cards: slices.Concat(acmeCards(t), globexCards(t))})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := range 4 {
		wg.Go(func() {
			caller := []*pb.Caller{adminCaller(), supportCaller(), globexAdmin(), adminCaller()}[r]
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				res, err := e.disc.DiscoverTools(rpcCtx(t), &pb.DiscoverToolsRequest{Caller: caller, Query: "churn order refund", TopK: 10})
				if err != nil {
					t.Errorf("DiscoverTools: %v", err)
					return
				}
				for _, x := range res.GetTools() {
					if x.GetCard().GetTenant() != caller.GetTenant() {
						t.Errorf("a %s card for a %s caller", x.GetCard().GetTenant(), caller.GetTenant())
					}
				}
				if _, err := e.disc.SearchTools(rpcCtx(t), &pb.SearchToolsRequest{Caller: caller, Query: []string{"", "order"}[i%2], PageSize: 3}); err != nil {
					t.Errorf("SearchTools: %v", err)
					return
				}
			}
		})
	}
	for i := range 30 {
		c := simpleCard("acme", "churn", fmt.Sprintf("churn_tool_%d", i%5))
		c.Summary = fmt.Sprintf("Churn order refund helper number %d.", i)
		e.put(t, c)
		if i%3 == 0 {
			if _, err := e.cat.DeleteCard(rpcCtx(t), &pb.DeleteCardRequest{Tenant: "acme", Server: "churn", Name: c.Name}); err != nil {
				t.Errorf("DeleteCard: %v", err)
			}
		}
	}
	close(stop)
	wg.Wait()
}
