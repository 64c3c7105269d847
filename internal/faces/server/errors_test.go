package server_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/codec/apiconv"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

func TestDiscoveryInvalidArguments(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t)})
	long := strings.Repeat("a", 1001)
	ok := supportCaller()
	f := func(v float64) *float64 { return &v }
	sixPins := make([]*pb.ToolRef, 6)
	for i := range sixPins {
		sixPins[i] = &pb.ToolRef{Server: "orders", Name: fmt.Sprintf("t%d", i)}
	}
	otherCursor := func() string {
		res, err := e.disc.SearchTools(rpcCtx(t), &pb.SearchToolsRequest{Caller: ok, Query: "order", PageSize: 1})
		if err != nil || res.GetNextCursor() == "" {
			t.Fatalf("SearchTools for a cursor: %v %v", res, err)
		}
		return res.GetNextCursor()
	}()

	type call func(ctx context.Context) error
	discover := func(r *pb.DiscoverToolsRequest) call {
		return func(ctx context.Context) error { _, err := e.disc.DiscoverTools(ctx, r); return err }
	}
	search := func(r *pb.SearchToolsRequest) call {
		return func(ctx context.Context) error { _, err := e.disc.SearchTools(ctx, r); return err }
	}
	describe := func(r *pb.DescribeToolRequest) call {
		return func(ctx context.Context) error { _, err := e.disc.DescribeTool(ctx, r); return err }
	}
	authorize := func(r *pb.AuthorizeCallRequest) call {
		return func(ctx context.Context) error { _, err := e.disc.AuthorizeCall(ctx, r); return err }
	}
	cases := []struct {
		name  string
		call  call
		parts []string // the field and the limit
	}{
		{"discover/no caller", discover(&pb.DiscoverToolsRequest{Query: "x"}), []string{"caller.tenant", "required"}},
		{"discover/no tenant", discover(&pb.DiscoverToolsRequest{Caller: &pb.Caller{Scopes: []string{"*"}}, Query: "x"}), []string{"caller.tenant", "required"}},
		{"discover/bad tenant", discover(&pb.DiscoverToolsRequest{Caller: &pb.Caller{Tenant: "ac me"}, Query: "x"}), []string{"caller.tenant", "128"}},
		{"discover/too many scopes", discover(&pb.DiscoverToolsRequest{Caller: &pb.Caller{Tenant: "acme", Scopes: make([]string, 257)}, Query: "x"}), []string{"caller.scopes", "257", "256"}},
		{"search/no caller", search(&pb.SearchToolsRequest{}), []string{"caller.tenant", "required"}},
		{"describe/no caller", describe(&pb.DescribeToolRequest{Name: "get_order"}), []string{"caller.tenant", "required"}},
		{"authorize/no caller", authorize(&pb.AuthorizeCallRequest{Name: "get_order"}), []string{"caller.tenant", "required"}},
		{"discover/empty query", discover(&pb.DiscoverToolsRequest{Caller: ok}), []string{"query", "required"}},
		{"discover/blank query", discover(&pb.DiscoverToolsRequest{Caller: ok, Query: " \t\n"}), []string{"query", "required"}},
		{"discover/query 1001", discover(&pb.DiscoverToolsRequest{Caller: ok, Query: long}), []string{"query", "1001", "1000"}},
		{"search/query 1001", search(&pb.SearchToolsRequest{Caller: ok, Query: long}), []string{"query", "1001", "1000"}},
		{"discover/top_k 51", discover(&pb.DiscoverToolsRequest{Caller: ok, Query: "x", TopK: 51}), []string{"top_k", "51", "50"}},
		{"discover/top_k -1", discover(&pb.DiscoverToolsRequest{Caller: ok, Query: "x", TopK: -1}), []string{"top_k", "-1", "50"}},
		{"discover/fusion", discover(&pb.DiscoverToolsRequest{Caller: ok, Query: "x", Fusion: "bm25"}), []string{"fusion", "bm25", "rrf", "relative"}},
		{"discover/alpha 1.5", discover(&pb.DiscoverToolsRequest{Caller: ok, Query: "x", Fusion: "relative", Alpha: f(1.5)}), []string{"alpha", "1.5", "0", "1"}},
		{"discover/alpha -0.1", discover(&pb.DiscoverToolsRequest{Caller: ok, Query: "x", Fusion: "relative", Alpha: f(-0.1)}), []string{"alpha", "-0.1"}},
		{"discover/alpha NaN", discover(&pb.DiscoverToolsRequest{Caller: ok, Query: "x", Fusion: "relative", Alpha: f(math.NaN())}), []string{"alpha", "between 0 and 1"}},
		{"discover/alpha +Inf", discover(&pb.DiscoverToolsRequest{Caller: ok, Query: "x", Fusion: "relative", Alpha: f(math.Inf(1))}), []string{"alpha", "between 0 and 1"}},
		{"discover/always_load 6", discover(&pb.DiscoverToolsRequest{Caller: ok, Query: "x", AlwaysLoad: sixPins}), []string{"always_load", "6", "5"}},
		{"search/page_size 101", search(&pb.SearchToolsRequest{Caller: ok, PageSize: 101}), []string{"page_size", "101", "100"}},
		{"search/page_size -1", search(&pb.SearchToolsRequest{Caller: ok, PageSize: -1}), []string{"page_size", "-1", "100"}},
		{"search/garbage cursor", search(&pb.SearchToolsRequest{Caller: ok, Cursor: "%%%not-a-cursor"}), []string{"cursor"}},
		{"search/cursor of another query", search(&pb.SearchToolsRequest{Caller: ok, Query: "invoice", Cursor: otherCursor}), []string{"cursor"}},
		{"search/cursor of a query, no query", search(&pb.SearchToolsRequest{Caller: ok, Cursor: otherCursor}), []string{"cursor"}},
		{"describe/no name", describe(&pb.DescribeToolRequest{Caller: ok}), []string{"name", "required"}},
		{"describe/bad name", describe(&pb.DescribeToolRequest{Caller: ok, Name: "get order"}), []string{"name", "128"}},
		{"describe/bad server", describe(&pb.DescribeToolRequest{Caller: ok, Name: "get_order", Server: "a/b"}), []string{"server", "128"}},
		{"authorize/no name", authorize(&pb.AuthorizeCallRequest{Caller: ok}), []string{"name", "required"}},
		{"authorize/arguments too big", authorize(&pb.AuthorizeCallRequest{Caller: ok, Name: "get_order",
			ArgumentsJson: `{"order_id":"` + strings.Repeat("1", 1<<20) + `"}`}), []string{"arguments_json", "1048576"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call(rpcCtx(t))
			wantCode(t, err, codes.InvalidArgument, tc.parts...)
		})
	}

	// The limits themselves are accepted.
	for _, r := range []*pb.DiscoverToolsRequest{
		{Caller: ok, Query: strings.Repeat("a", 1000)},
		{Caller: ok, Query: strings.Repeat("é", 1000)}, // characters, not bytes
		{Caller: ok, Query: "x", TopK: 50},
		{Caller: ok, Query: "x", Fusion: "relative", Alpha: f(0)},
		{Caller: ok, Query: "x", Fusion: "relative", Alpha: f(1)},
		{Caller: ok, Query: "x", AlwaysLoad: sixPins[:5]},
	} {
		if _, err := e.disc.DiscoverTools(rpcCtx(t), r); err != nil {
			t.Errorf("DiscoverTools(top_k %d, %d-character query, alpha %v, %d pins): %v", r.GetTopK(), len([]rune(r.GetQuery())), r.Alpha, len(r.GetAlwaysLoad()), err)
		}
	}
	if _, err := e.disc.SearchTools(rpcCtx(t), &pb.SearchToolsRequest{Caller: ok, PageSize: 100}); err != nil {
		t.Errorf("SearchTools(page_size 100): %v", err)
	}
}

// cardsReq builds a PutCards request.
func cardsReq(cs ...cards.Card) *pb.PutCardsRequest {
	req := &pb.PutCardsRequest{}
	for i := range cs {
		req.Cards = append(req.Cards, apiconv.CardToProto(&cs[i], true))
	}
	return req
}

func simpleCard(tenant, server, name string) cards.Card {
	return cards.Card{Tenant: tenant, Server: server, Name: name, Summary: "Do the " + name + " thing."}
}

func TestPutCardsIsAllOrNothing(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t)})
	before := e.listAll(t, "acme")

	changed := acmeCards(t)[0] // an existing card, changed
	changed.Summary = "A changed summary that must not be written."
	bad := simpleCard("batchco", "billing", "third_card")
	bad.Summary = strings.Repeat("s", 501)
	brokenSchema := simpleCard("batchco", "tools", "broken")
	brokenSchema.InputSchema = []byte(`{"type": "objekt", "properties": {"a": {"minimum": "zero"}}}`)
	canon, err := cards.CanonicalJSON(brokenSchema.InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	_, compileErr := cards.CompileSchema(canon)
	if compileErr == nil {
		t.Fatal("the test schema compiles")
	}
	notJSON := simpleCard("batchco", "tools", "not_json")
	notJSON.InputSchema = []byte(`{"type":`)
	wildScope := simpleCard("batchco", "tools", "wild")
	wildScope.RequiredScopes = []string{"billing:read", "billing:*"}
	reserved := simpleCard("batchco", "tools", "cardex__search_tools")
	manyExamples := simpleCard("batchco", "tools", "many_examples")
	for i := range cards.MaxSearchExamples + 1 {
		manyExamples.SearchExamples = append(manyExamples.SearchExamples, fmt.Sprintf("example %d", i))
	}
	longExample := simpleCard("batchco", "tools", "long_example")
	longExample.SearchExamples = []string{"ok", strings.Repeat("e", cards.MaxSearchExampleLen+1)}

	cases := []struct {
		name  string
		batch []cards.Card
		parts []string
	}{
		{"third card summary 501", []cards.Card{changed, simpleCard("batchco", "billing", "first"), bad, simpleCard("batchco", "billing", "fourth")},
			[]string{"cards[2]", "billing/third_card", "summary", "501", "500"}},
		{"schema does not compile", []cards.Card{simpleCard("batchco", "tools", "ok"), brokenSchema},
			[]string{"cards[1]", "tools/broken", "input_schema", compileErr.Error()}},
		{"schema is not JSON", []cards.Card{notJSON}, []string{"cards[0]", "tools/not_json", "input_schema", "JSON"}},
		{"wildcard required scope", []cards.Card{simpleCard("batchco", "tools", "ok"), wildScope}, []string{"cards[1]", "tools/wild", "required_scopes[1]"}},
		{"reserved prefix", []cards.Card{reserved}, []string{"cards[0]", "name", "cardex__"}},
		{"33 search examples", []cards.Card{simpleCard("batchco", "tools", "ok"), manyExamples}, []string{"cards[1]", "tools/many_examples", "search_examples", "33", "32"}},
		{"search example of 201", []cards.Card{longExample}, []string{"cards[0]", "search_examples[1]", "201", "200"}},
		{"duplicate key", []cards.Card{simpleCard("batchco", "tools", "dup"), simpleCard("batchco", "tools", "dup")}, []string{"cards[1]", "tools/dup", "cards[0]"}},
		{"no tenant", []cards.Card{simpleCard("batchco", "tools", "ok"), simpleCard("", "tools", "x")}, []string{"cards[1]", "tenant", "required"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := e.cat.PutCards(rpcCtx(t), cardsReq(tc.batch...))
			wantCode(t, err, codes.InvalidArgument, tc.parts...)
			if got := e.listAll(t, "batchco"); len(got) != 0 {
				t.Errorf("a failed batch wrote %d cards", len(got))
			}
			after := e.listAll(t, "acme")
			if len(after) != len(before) {
				t.Fatalf("acme has %d cards, had %d", len(after), len(before))
			}
			for i := range after {
				sameProto(t, "acme card after a failed batch", after[i], before[i])
			}
		})
	}
	// The compiler's own words reach the caller.
	t.Logf("schema compiler message: %s", compileErr)
}

func TestPutCardsLimitsAndConflicts(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t)[:3]})
	t.Run("empty batch", func(t *testing.T) {
		_, err := e.cat.PutCards(rpcCtx(t), &pb.PutCardsRequest{})
		wantCode(t, err, codes.InvalidArgument, "cards", "empty", "1000")
	})
	t.Run("1001 cards", func(t *testing.T) {
		cs := make([]cards.Card, 1001)
		for i := range cs {
			cs[i] = simpleCard("bulk", "tools", fmt.Sprintf("t%04d", i))
		}
		_, err := e.cat.PutCards(rpcCtx(t), cardsReq(cs...))
		wantCode(t, err, codes.InvalidArgument, "cards", "1001", "1000")
		if n := len(e.listAll(t, "bulk")); n != 0 {
			t.Errorf("%d cards written", n)
		}
		res, err := e.cat.PutCards(rpcCtx(t), cardsReq(cs[:1000]...))
		if err != nil || len(res.GetResults()) != 1000 {
			t.Fatalf("1000 cards: %v", err)
		}
	})

	existing := acmeCards(t)[0]
	key := existing.Server + "/" + existing.Name
	t.Run("stale version", func(t *testing.T) {
		c := existing
		c.Summary = "New words."
		c.Version = 5
		_, err := e.cat.PutCards(rpcCtx(t), cardsReq(c))
		wantCode(t, err, codes.Aborted, key, "expected version 5", "stored version is 1")
	})
	t.Run("version of a card that does not exist", func(t *testing.T) {
		c := simpleCard("acme", "tools", "ghost")
		c.Version = 1
		_, err := e.cat.PutCards(rpcCtx(t), cardsReq(c))
		wantCode(t, err, codes.Aborted, "tools/ghost", "does not exist")
	})
	t.Run("conflict in a batch writes nothing", func(t *testing.T) {
		c := existing
		c.Summary = "New words."
		c.Version = 7
		_, err := e.cat.PutCards(rpcCtx(t), cardsReq(simpleCard("acme", "tools", "first_of_batch"), c))
		wantCode(t, err, codes.Aborted)
		_, err = e.cat.GetCard(rpcCtx(t), &pb.GetCardRequest{Tenant: "acme", Server: "tools", Name: "first_of_batch"})
		wantCode(t, err, codes.NotFound)
	})
	t.Run("matching version updates", func(t *testing.T) {
		c := existing
		c.Summary = "New words for the card."
		c.Version = 1
		res, err := e.cat.PutCards(rpcCtx(t), cardsReq(c))
		if err != nil || res.GetResults()[0].GetVersion() != 2 || res.GetResults()[0].GetOutcome() != "updated" {
			t.Fatalf("PutCards with the current version: %v %v", res, err)
		}
	})
	t.Run("delete with a stale version", func(t *testing.T) {
		_, err := e.cat.DeleteCard(rpcCtx(t), &pb.DeleteCardRequest{Tenant: "acme", Server: existing.Server, Name: existing.Name, ExpectedVersion: 1})
		wantCode(t, err, codes.Aborted, "expected version 1", "stored version is 2")
		_, err = e.cat.DeleteCard(rpcCtx(t), &pb.DeleteCardRequest{Tenant: "acme", Server: existing.Server, Name: existing.Name, ExpectedVersion: -1})
		wantCode(t, err, codes.InvalidArgument, "expected_version")
		if _, err := e.cat.DeleteCard(rpcCtx(t), &pb.DeleteCardRequest{Tenant: "acme", Server: existing.Server, Name: existing.Name, ExpectedVersion: 2}); err != nil {
			t.Errorf("DeleteCard with the current version: %v", err)
		}
	})
}

func TestCatalogLookupErrors(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t)})
	cases := []struct {
		name  string
		call  func(ctx context.Context) error
		code  codes.Code
		parts []string
	}{
		{"GetCard not found", func(ctx context.Context) error {
			_, err := e.cat.GetCard(ctx, &pb.GetCardRequest{Tenant: "acme", Server: "billing", Name: "nope"})
			return err
		}, codes.NotFound, []string{"billing/nope", "not found"}},
		{"GetCard other tenant's key", func(ctx context.Context) error {
			_, err := e.cat.GetCard(ctx, &pb.GetCardRequest{Tenant: "globex", Server: "billing", Name: "void_invoice"})
			return err
		}, codes.NotFound, []string{"billing/void_invoice"}},
		{"GetCard no tenant", func(ctx context.Context) error {
			_, err := e.cat.GetCard(ctx, &pb.GetCardRequest{Server: "billing", Name: "get_invoice"})
			return err
		}, codes.InvalidArgument, []string{"tenant", "required"}},
		{"GetCard bad name", func(ctx context.Context) error {
			_, err := e.cat.GetCard(ctx, &pb.GetCardRequest{Tenant: "acme", Server: "billing", Name: "get invoice"})
			return err
		}, codes.InvalidArgument, []string{"name", "128"}},
		{"DeleteCard not found", func(ctx context.Context) error {
			_, err := e.cat.DeleteCard(ctx, &pb.DeleteCardRequest{Tenant: "acme", Server: "billing", Name: "nope"})
			return err
		}, codes.NotFound, []string{"not found"}},
		{"ListCards no tenant", func(ctx context.Context) error {
			_, err := e.cat.ListCards(ctx, &pb.ListCardsRequest{})
			return err
		}, codes.InvalidArgument, []string{"tenant", "required"}},
		{"ListCards page_size 101", func(ctx context.Context) error {
			_, err := e.cat.ListCards(ctx, &pb.ListCardsRequest{Tenant: "acme", PageSize: 101})
			return err
		}, codes.InvalidArgument, []string{"page_size", "101", "100"}},
		{"ListCards bad status", func(ctx context.Context) error {
			_, err := e.cat.ListCards(ctx, &pb.ListCardsRequest{Tenant: "acme", Status: []string{"active", "deleted"}})
			return err
		}, codes.InvalidArgument, []string{"status[1]", "deleted"}},
		{"ListCards bad cursor", func(ctx context.Context) error {
			_, err := e.cat.ListCards(ctx, &pb.ListCardsRequest{Tenant: "acme", Cursor: "!!"})
			return err
		}, codes.InvalidArgument, []string{"cursor"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantCode(t, tc.call(rpcCtx(t)), tc.code, tc.parts...)
		})
	}
}

func TestCatalogToken(t *testing.T) {
	const token = "s3cret-token"
	e := newEnv(t, envOptions{token: token})
	card := simpleCard("acme", "tools", "tokened")
	withAuth := func(v string) context.Context {
		return metadata.AppendToOutgoingContext(rpcCtx(t), "authorization", v)
	}
	calls := map[string]func(ctx context.Context) error{
		"PutCards": func(ctx context.Context) error { _, err := e.cat.PutCards(ctx, cardsReq(card)); return err },
		"GetCard": func(ctx context.Context) error {
			_, err := e.cat.GetCard(ctx, &pb.GetCardRequest{Tenant: "acme", Server: "tools", Name: "tokened"})
			return err
		},
		"ListCards": func(ctx context.Context) error {
			_, err := e.cat.ListCards(ctx, &pb.ListCardsRequest{Tenant: "acme"})
			return err
		},
		"DeleteCard": func(ctx context.Context) error {
			_, err := e.cat.DeleteCard(ctx, &pb.DeleteCardRequest{Tenant: "acme", Server: "tools", Name: "tokened"})
			return err
		},
	}
	for _, m := range []string{"PutCards", "GetCard", "ListCards", "DeleteCard"} {
		t.Run(m, func(t *testing.T) {
			wantCode(t, calls[m](rpcCtx(t)), codes.Unauthenticated, "role catalog")
			wantCode(t, calls[m](withAuth("Bearer wrong")), codes.Unauthenticated)
			wantCode(t, calls[m](withAuth("Bearer "+token+"x")), codes.Unauthenticated)
			wantCode(t, calls[m](withAuth("Bearer "+token[:len(token)-1])), codes.Unauthenticated)
			wantCode(t, calls[m](withAuth("Bearer ")), codes.Unauthenticated)
			if err := calls[m](withAuth("Bearer " + token)); err != nil {
				t.Errorf("%s with the token: %v", m, err)
			}
		})
		if m == "PutCards" {
			// DiscoveryService needs no token.
			res, err := e.disc.DiscoverTools(rpcCtx(t), &pb.DiscoverToolsRequest{Caller: adminCaller(), Query: "tokened thing"})
			if err != nil || len(res.GetTools()) != 1 {
				t.Errorf("DiscoverTools without a token: %v %v", res, err)
			}
			if _, err := e.disc.DescribeTool(rpcCtx(t), &pb.DescribeToolRequest{Caller: adminCaller(), Name: "tokened"}); err != nil {
				t.Errorf("DescribeTool without a token: %v", err)
			}
		}
	}
}

// TestPutCardsSchemaBytesKept: a schema comes back from GetCard, DescribeTool
// and DiscoverTools as the same normalised bytes, whatever its input form.
func TestPutCardsSchemaBytesKept(t *testing.T) {
	e := newEnv(t, envOptions{})
	c := simpleCard("acme", "tools", "schema_keeper")
	c.InputSchema = []byte("{\n  \"type\": \"object\",\n  \"properties\": {\"b\": {\"type\": \"number\", \"maximum\": 1.50}, \"a\": {\"description\": \"<x> & y\"}}\n}")
	e.put(t, c)
	want, err := cards.CanonicalJSON(c.InputSchema)
	if err != nil {
		t.Fatal(err)
	}
	g, err := e.cat.GetCard(rpcCtx(t), &pb.GetCardRequest{Tenant: "acme", Server: "tools", Name: "schema_keeper"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := e.disc.DescribeTool(rpcCtx(t), &pb.DescribeToolRequest{Caller: adminCaller(), Name: "schema_keeper"})
	if err != nil {
		t.Fatal(err)
	}
	r := e.discover(t, &pb.DiscoverToolsRequest{Caller: adminCaller(), Query: "schema keeper"})
	for what, got := range map[string]string{"GetCard": g.GetCard().GetInputSchema(), "DescribeTool": d.GetCard().GetInputSchema(),
		"DiscoverTools": r.GetTools()[0].GetCard().GetInputSchema()} {
		if !bytes.Equal([]byte(got), want) {
			t.Errorf("%s input_schema %s, want %s", what, got, want)
		}
	}
}
