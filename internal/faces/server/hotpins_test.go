package server_test

import (
	"slices"
	"testing"

	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// report discovers for a caller and reports tool used, n times.
func (e *env) report(t *testing.T, c *pb.Caller, server, name string, n int) {
	t.Helper()
	for range n {
		d := e.discover(t, &pb.DiscoverToolsRequest{Caller: c, Query: name})
		if _, err := e.disc.ReportOutcome(rpcCtx(t), &pb.ReportOutcomeRequest{Caller: c, DiscoveryId: d.GetDiscoveryId(),
			Outcome: &pb.ReportOutcomeRequest_UsedTool{UsedTool: &pb.ToolRef{Server: server, Name: name}}}); err != nil {
			t.Fatalf("ReportOutcome: %v", err)
		}
	}
}

func pinned(res *pb.DiscoverToolsResponse) []string {
	var out []string
	for _, tl := range res.GetTools() {
		if tl.GetPinned() {
			out = append(out, tl.GetCard().GetServer()+"/"+tl.GetCard().GetName()+" ("+tl.GetReason()+")")
		}
	}
	return out
}

// With automatic pins on, a caller's most used tools are pinned to its
// discoveries, then its tenant's — each authorized like every pin — and a
// request's own always_load replaces them.
func TestAutoPinsOfHotTools(t *testing.T) {
	e := newEnv(t, envOptions{cards: acmeCards(t), feedback: true, autoPins: 2})
	admin, support := adminCaller(), supportCaller()
	e.report(t, admin, "billing", "issue_refund", 6) // billing:admin: not for support
	e.report(t, admin, "analytics", "run_report", 4)
	e.report(t, support, "orders", "track_shipment", 3)
	e.report(t, admin, "orders", "get_order", 3)
	q := "a customer asks about their account"
	for _, tc := range []struct {
		name   string
		caller *pb.Caller
		want   []string
	}{
		{"admin: its own", admin, []string{"billing/issue_refund (pinned (hot: used often))", "analytics/run_report (pinned (hot: used often))"}},
		// The support caller's own first, then the tenant's it may use:
		// issue_refund and run_report are not, and take no place.
		{"support: its own, then the tenant's it may use", support, []string{"orders/track_shipment (pinned (hot: used often))", "orders/get_order (pinned (hot: used often))"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := pinned(e.discover(t, &pb.DiscoverToolsRequest{Caller: tc.caller, Query: q}))
			if !slices.Equal(got, tc.want) {
				t.Errorf("pins %q, want %q", got, tc.want)
			}
		})
	}
	// The request's own pins replace the automatic ones.
	own := e.discover(t, &pb.DiscoverToolsRequest{Caller: admin, Query: q, AlwaysLoad: []*pb.ToolRef{{Server: "orders", Name: "get_order"}}})
	if got := pinned(own); !slices.Equal(got, []string{"orders/get_order (pinned (always_load))"}) {
		t.Errorf("with always_load: pins %q", got)
	}
	// Off by default.
	off := newEnv(t, envOptions{cards: acmeCards(t), feedback: true})
	off.report(t, admin, "billing", "issue_refund", 6)
	if got := pinned(off.discover(t, &pb.DiscoverToolsRequest{Caller: admin, Query: q})); len(got) != 0 {
		t.Errorf("automatic pins off: %q", got)
	}
}
