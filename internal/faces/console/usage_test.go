package console_test

import (
	"context"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/faces/console"
	"github.com/seed0cff8200/cardex/internal/telemetry/feedback"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
	"github.com/seed0cff8200/cardex/retriever"
)

// use reports tool used n times by a caller, through the gRPC API.
func (h *harness) use(t *testing.T, c *pb.Caller, server, name string, n int) {
	t.Helper()
	for range n {
		d, err := h.disc.DiscoverTools(rpc(t, discoverToken), &pb.DiscoverToolsRequest{Caller: c, Query: name})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.disc.ReportOutcome(rpc(t, discoverToken), &pb.ReportOutcomeRequest{Caller: c, DiscoveryId: d.DiscoveryId,
			Outcome: &pb.ReportOutcomeRequest_UsedTool{UsedTool: &pb.ToolRef{Server: server, Name: name}}}); err != nil {
			t.Fatal(err)
		}
	}
}

// The usage page: a tenant's most used tools, its candidate pins as an
// always_load value, and each caller's.
func TestConsoleUsage(t *testing.T) {
	h := newHarness(t, false)
	alice := &pb.Caller{Tenant: "acme", Subject: "alice", Scopes: []string{"*"}}
	bob := &pb.Caller{Tenant: "acme", Subject: "bob", Scopes: []string{"*"}}
	h.use(t, alice, "billing", "get_invoice", 4)
	h.use(t, alice, "orders", "get_order", 1)
	h.use(t, bob, "orders", "track_shipment", 3)
	h.use(t, &pb.Caller{Tenant: "globex", Subject: "carol", Scopes: []string{"*"}}, "billing", "get_statement", 1)

	u := h.user(t, newBrowser(t), catalogToken)
	if st := u.open("/console/usage?tenant=acme&days=30"); st != 200 {
		t.Fatalf("usage page: HTTP %d", st)
	}
	rows := u.texts(`section[data-tenant="acme"] table.hot-tools tbody tr`)
	want := []string{"billing/get_invoice 4.00 50.0% yes", "orders/track_shipment 3.00 37.5% yes", "orders/get_order 1.00 12.5%"}
	if len(rows) != len(want) {
		t.Fatalf("rows %q, want %q", rows, want)
	}
	for i, r := range rows {
		if strings.Join(strings.Fields(r), "") != strings.Join(strings.Fields(want[i]), "") {
			t.Errorf("row %d %q, want %q", i, r, want[i])
		}
	}
	if got := u.text(`section[data-tenant="acme"] code.always-load`); got != `[{"server":"billing","name":"get_invoice"},{"server":"orders","name":"track_shipment"}]` {
		t.Errorf("always_load %q", got)
	}
	// Alice's pins are hers (get_order, used once, is no candidate); Bob's
	// his.
	if callers := u.texts(`section[data-tenant="acme"] table.hot-callers tbody tr`); len(callers) != 2 ||
		!strings.HasPrefix(callers[0], "h-alice") || !strings.Contains(callers[0], `[{"server":"billing","name":"get_invoice"}]`) ||
		!strings.HasPrefix(callers[1], "h-bob") || !strings.Contains(callers[1], `[{"server":"orders","name":"track_shipment"}]`) {
		t.Errorf("callers %q", callers)
	}
	// The other tenant's uses are not on acme's page.
	if strings.Contains(u.html(), "get_statement") {
		t.Error("globex's tool is on acme's usage page")
	}
	u.open("/console/usage")
	if got := u.texts(`section.usage h2`); strings.Join(got, ",") != "acme,globex" {
		t.Errorf("all tenants: sections %q", got)
	}
}

// A lesson the guard held back (it lowered recall on the tenant's labelled
// queries) is on the tenant's usage page; nothing of it elsewhere.
func TestConsoleUsageHeldLessons(t *testing.T) {
	var guard *feedback.Guard
	h := newHarness(t, false, func(h *harness, c *console.Config) {
		q := "show invoice INV-2024-0042 with its line items"
		res, err := h.ret.Discover(context.Background(), retriever.Request{Caller: retriever.Caller{Tenant: "acme", Scopes: []string{"*"}}, Query: q, TopK: 10})
		if err != nil || len(res.Tools) < 8 {
			t.Fatalf("precondition: %v, %d tools", err, len(res.Tools))
		}
		fifth, low := res.Tools[4].Card.Key(), res.Tools[7].Card.Key()
		emb, _ := embed.Builtin()
		guard = feedback.NewGuard(feedback.GuardConfig{Target: h.ret, Store: h.store, Embedder: emb,
			Sets: map[string][]feedback.LabelledQuery{"acme": {{ID: "l1", Tenant: "acme", Query: q, Expected: []string{fifth.Server + "/" + fifth.Name}}}}})
		if _, err := guard.Learn(context.Background(), low, q); err != nil {
			t.Fatal(err)
		}
		if err := guard.Close(); err != nil {
			t.Fatal(err)
		}
		if len(guard.Held()) != 1 {
			t.Fatalf("precondition: held %+v", guard.Held())
		}
		c.Guard = guard
	})
	u := h.user(t, newBrowser(t), catalogToken)
	u.open("/console/usage?tenant=acme")
	held := u.texts(`section[data-tenant="acme"] table.held tbody tr`)
	if len(held) != 1 || !strings.Contains(held[0], "phrasings") || !strings.Contains(held[0], "1.000 → 0.000 (1 queries)") ||
		!strings.Contains(held[0], guard.Held()[0].Cards[0].Name) {
		t.Errorf("held lessons %q", held)
	}
	u.open("/console/usage?tenant=globex")
	if strings.Contains(u.html(), "Lessons held back") {
		t.Error("acme's held lesson is on globex's page")
	}
}
