package feedback

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"
)

func names(ts []HotTool) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Server+"/"+t.Name)
	}
	return out
}

func TestHotTallies(t *testing.T) {
	h := NewHot()
	t0 := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	add := func(subject, server, name string, n int, at time.Time) {
		for range n {
			h.Add("acme", subject, Tool{server, name}, at)
		}
	}
	add("alice", "orders", "get_order", 6, t0)
	add("alice", "orders", "track", 2, t0)
	add("bob", "billing", "get_invoice", 10, t0)
	add("bob", "misc", "rare", 1, t0)
	h.Add("globex", "carol", Tool{"x", "y"}, t0)

	if got := names(h.Tenant("acme", t0)); !slices.Equal(got, []string{"billing/get_invoice", "orders/get_order", "orders/track", "misc/rare"}) {
		t.Errorf("acme's tools %v", got)
	}
	if got := h.Tenant("acme", t0)[0]; got.Uses != 10 || math.Abs(got.Share-10.0/19) > 1e-9 {
		t.Errorf("get_invoice %+v, want 10 uses, share 10/19", got)
	}
	// Alice's pins: her own first (track is under MinPinUses), then the
	// tenant's; never another tenant's tool.
	if got := h.Pins("acme", "alice", t0, 5); fmt.Sprint(got) != "[{orders get_order} {billing get_invoice}]" {
		t.Errorf("alice's pins %v", got)
	}
	if got := h.Pins("acme", "alice", t0, 1); len(got) != 1 || got[0].Name != "get_order" {
		t.Errorf("alice's first pin %v", got)
	}
	if got := h.Pins("acme", "nobody", t0, 5); fmt.Sprint(got) != "[{billing get_invoice} {orders get_order}]" {
		t.Errorf("a caller without a tally gets the tenant's pins: %v", got)
	}
	if got := h.Pins("initech", "alice", t0, 5); len(got) != 0 {
		t.Errorf("a tenant without uses has pins %v", got)
	}
	if got := h.Callers("acme"); !slices.Equal(got, []string{"alice", "bob"}) {
		t.Errorf("acme's callers %v", got)
	}
	// Decay: two half-lives later get_order's 6 uses count 1.5, under
	// MinPinUses; the share is unchanged.
	later := t0.Add(2 * HotHalfLife)
	if got := h.Caller("acme", "alice", later); math.Abs(got[0].Uses-1.5) > 1e-9 || math.Abs(got[0].Share-0.75) > 1e-9 {
		t.Errorf("after two half-lives %+v", got[0])
	}
	if got := h.Pins("acme", "alice", later, 5); len(got) != 0 {
		t.Errorf("stale uses still pin: %v", got)
	}
}

func TestHotIsBounded(t *testing.T) {
	h := NewHot()
	t0 := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	for i := range MaxHotTools + 10 {
		for range i + 1 {
			h.Add("acme", "", Tool{"s", fmt.Sprintf("t%03d", i)}, t0)
		}
	}
	got := h.Tenant("acme", t0)
	if len(got) != MaxHotTools || got[0].Name != fmt.Sprintf("t%03d", MaxHotTools+9) || got[len(got)-1].Name != "t010" {
		t.Errorf("%d tools kept, from %s to %s; want the %d most used", len(got), got[0].Name, got[len(got)-1].Name, MaxHotTools)
	}
	for i := range MaxHotCallers + 3 {
		h.Add("acme", fmt.Sprint(i), Tool{"s", "x"}, t0.Add(time.Duration(i)*time.Second))
	}
	if n := len(h.callers); n != MaxHotCallers {
		t.Errorf("%d callers' tallies kept, want %d", n, MaxHotCallers)
	}
	if h.Caller("acme", "0", t0) != nil || h.Caller("acme", fmt.Sprint(MaxHotCallers+2), t0) == nil {
		t.Error("the least recently seen caller's tally was not the one dropped")
	}
}

func TestHotFromEvents(t *testing.T) {
	t0 := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	var events []Event
	for i := range 4 {
		events = append(events, Event{Type: TypeOutcome, Time: t0, Tenant: "acme", SubjectHash: "h1", Tool: &Tool{"orders", "get_order"}, Miss: i%2 == 0})
	}
	events = append(events,
		Event{Type: TypeOutcome, Time: t0, Tenant: "acme", SubjectHash: "h1", NoneFit: true, Miss: true},
		Event{Type: TypeImplicitMiss, Time: t0, Tenant: "acme", SubjectHash: "h1", Tool: &Tool{"billing", "issue_refund"}, Miss: true})
	h := HotFromEvents(events)
	if got := h.Caller("acme", "h1", t0); len(got) != 1 || got[0].Uses != 4 {
		t.Errorf("h1's tally %+v: want the 4 outcomes' tool only (describes and none_fit are no use)", got)
	}
}
