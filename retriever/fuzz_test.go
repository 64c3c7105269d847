package retriever_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/retriever"
)

// Fuzz targets of the query path: whatever the query, caller, cursor or
// arguments, the answer is an invalid-argument error or holds only cards
// the caller may use.

func fuzzCatalogue(f *testing.F) *retriever.Retriever {
	f.Helper()
	schema := []byte(`{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"],"additionalProperties":false}`)
	cs := []cards.Card{
		with(card("orders", "get_order", "Show one order by its number.", "orders:read"), func(c *cards.Card) { c.InputSchema = schema }),
		card("orders", "search_orders", "Find a customer's orders.", "orders:read"),
		card("billing", "issue_refund", "Refund a customer's payment.", "billing:admin"),
		card("billing", "get_invoice", "Show an invoice.", "billing:read"),
		card("support", "search", "Search support tickets."),
		card("github", "search", "Search code and issues.", "github:read"),
		with(card("ops", "restart_service", "Restart a service.", "ops:admin"), func(c *cards.Card) { c.Status = cards.StatusRevoked }),
		with(card("orders", "get_order", "Globex orders.", "orders:read"), func(c *cards.Card) { c.Tenant = "globex" }),
	}
	return newRetriever(f, newStore(f, cs...), nil)
}

// fuzzActive are the active cards of the fuzz catalogue and their
// required scopes, by tenant/server/name.
var fuzzActive = map[string][]string{
	"acme/orders/get_order": {"orders:read"}, "acme/orders/search_orders": {"orders:read"}, "acme/billing/issue_refund": {"billing:admin"},
	"acme/billing/get_invoice": {"billing:read"}, "acme/support/search": nil, "acme/github/search": {"github:read"},
	"globex/orders/get_order": {"orders:read"},
}

// may is the authorization rule written out for the fuzz catalogue.
func may(c retriever.Caller, server, name string) bool {
	req, ok := fuzzActive[c.Tenant+"/"+server+"/"+name]
	if !ok {
		return false // revoked, another tenant's, or unknown
	}
	for _, r := range req {
		held := false
		for _, h := range c.Scopes {
			if h == "*" || h == r || (strings.HasSuffix(h, ":*") && strings.HasPrefix(r, strings.TrimSuffix(h, "*"))) {
				held = true
			}
		}
		if !held {
			return false
		}
	}
	return true
}

func fuzzCaller(tenant, scopes, subject, session string) retriever.Caller {
	c := retriever.Caller{Tenant: tenant, Subject: subject, SessionID: session}
	if scopes != "" {
		c.Scopes = strings.Split(scopes, ",")
	}
	return c
}

func fuzzWantInvalid(t *testing.T, err error) {
	t.Helper()
	var fe *cards.FieldError
	if !errors.Is(err, cards.ErrInvalid) || !errors.As(err, &fe) || fe.Field == "" {
		t.Fatalf("error %v is not an invalid argument naming a field", err)
	}
}

func FuzzDiscover(f *testing.F) {
	r := fuzzCatalogue(f)
	f.Add("refund the customer", acme, "orders:read,billing:read", "u", "", 5)
	f.Add("issue_refund billing admin", acme, "billing:*", "u", "s1", 50)
	f.Add("search", acme, "*", "", "", 0)
	f.Add("get_order", "globex", "*", "u", "", 3)
	f.Add("", acme, "*", "u", "", 5)
	f.Add(strings.Repeat("x", 1001), acme, "*", "u", "", 5)
	f.Add("restart", "acme\x00", "ops:admin", "\xff", "\n", -1)
	f.Fuzz(func(t *testing.T, query, tenant, scopes, subject, session string, topK int) {
		c := fuzzCaller(tenant, scopes, subject, session)
		res, err := r.Discover(context.Background(), retriever.Request{Caller: c, Query: query, TopK: topK})
		if err != nil {
			fuzzWantInvalid(t, err)
			return
		}
		allowed := 0
		for k := range fuzzActive {
			parts := strings.Split(k, "/")
			if parts[0] == c.Tenant && may(c, parts[1], parts[2]) {
				allowed++
			}
		}
		if res.CandidateCount != allowed {
			t.Fatalf("caller %+v: candidate_count %d, want %d", c, res.CandidateCount, allowed)
		}
		for _, tl := range res.Tools {
			if tl.Card.Tenant != c.Tenant || !may(c, tl.Card.Server, tl.Card.Name) {
				t.Fatalf("caller %+v got %s/%s/%s", c, tl.Card.Tenant, tl.Card.Server, tl.Card.Name)
			}
		}
	})
}

func FuzzSearchCursor(f *testing.F) {
	r := fuzzCatalogue(f)
	c := retriever.Caller{Tenant: acme, Scopes: []string{"orders:read", "github:read"}}
	_, next, err := r.Search(context.Background(), c, "", 1, "")
	if err != nil || next == "" {
		f.Fatalf("first page: %q %v", next, err)
	}
	f.Add("", next, 1)
	f.Add("search", "", 2)
	f.Add("", "eyJvIjotMSwicSI6IiJ9", 1) // a negative offset
	f.Add("order", "not base64!", 1)
	f.Add("", "eyJvIjoxMDAwMDAwMDAwMDAwLCJxIjoiNDdERVFwajgifQ", 5) // a huge offset
	f.Fuzz(func(t *testing.T, query, cursor string, pageSize int) {
		rows, _, err := r.Search(context.Background(), c, query, pageSize, cursor)
		if err != nil {
			fuzzWantInvalid(t, err)
			return
		}
		for _, row := range rows {
			if !may(c, row.Server, row.Name) {
				t.Fatalf("cursor %q returned %s/%s", cursor, row.Server, row.Name)
			}
		}
	})
}

// FuzzAuthorize: arguments are allowed only when they are one JSON object,
// without a repeated key, holding exactly a string order_id.
func FuzzAuthorize(f *testing.F) {
	r := fuzzCatalogue(f)
	c := retriever.Caller{Tenant: acme, Scopes: []string{"orders:read"}}
	for _, a := range []string{`{"order_id":"ORD-1"}`, `{"order_id":1,"order_id":"ORD-1"}`, `{"order_id":"ORD-1","x":1}`, `{}`, ``, `[]`, `{"order_id":"a"} {}`, `{"order_id":"\u0000"}`, `null`} {
		f.Add([]byte(a))
	}
	f.Fuzz(func(t *testing.T, args []byte) {
		a, err := r.Authorize(context.Background(), c, "get_order", "orders", args)
		if err != nil {
			fuzzWantInvalid(t, err)
			return
		}
		if a.Decision != retriever.Allow {
			return
		}
		var m map[string]any
		if json.Unmarshal(args, &m) != nil || len(m) != 1 {
			t.Fatalf("allowed %q", args)
		}
		if _, ok := m["order_id"].(string); !ok || countKeys(args) != 1 {
			t.Fatalf("allowed %q", args)
		}
	})
}

// countKeys counts the top-level keys of a JSON object in the token
// stream (repeats included).
func countKeys(b []byte) int {
	dec := json.NewDecoder(bytes.NewReader(b))
	n, depth, key := 0, 0, true
	for {
		tok, err := dec.Token()
		if err == io.EOF || err != nil {
			return n
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				depth++
			default:
				depth--
			}
			if depth <= 1 {
				key = true // a container value at depth 1 just ended, or the object began
			}
			continue
		}
		if depth == 1 {
			if key {
				n++
			}
			key = !key
		}
	}
}
