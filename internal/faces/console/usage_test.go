package console_test

import (
	"strings"
	"testing"

	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
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
