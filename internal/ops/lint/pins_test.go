package lint

import (
	"fmt"
	"testing"
	"time"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/telemetry/feedback"
)

func TestPinCandidates(t *testing.T) {
	now := time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC)
	active := []cards.Card{
		{Tenant: "acme", Server: "orders", Name: "get_order"},
		{Tenant: "acme", Server: "orders", Name: "track"},
		{Tenant: "acme", Server: "billing", Name: "get_invoice"},
	}
	var events []feedback.Event
	use := func(subject, server, name string, n int) {
		for range n {
			events = append(events, feedback.Event{Type: feedback.TypeOutcome, Time: now, Tenant: "acme", SubjectHash: subject, Tool: &feedback.Tool{Server: server, Name: name}})
		}
	}
	use("h-a", "orders", "get_order", 8)
	use("h-a", "billing", "retired", 9) // not an active card: never suggested
	use("h-b", "orders", "track", 3)
	use("h-b", "orders", "get_order", 1)
	events = append(events, feedback.Event{Type: feedback.TypeImplicitMiss, Time: now, Tenant: "acme", SubjectHash: "h-c", Tool: &feedback.Tool{Server: "billing", Name: "get_invoice"}, Miss: true})

	got := Pins(active, events, now)
	var lines []string
	for _, f := range got {
		lines = append(lines, fmt.Sprintf("%s %s %s %.0f", f.Kind, f.Caller, f.Card, f.Uses))
	}
	want := []string{
		// The tenant's: get_order (9 of 21 uses) and track (3, 14%).
		"pin_candidate  acme/orders/get_order 9",
		"pin_candidate  acme/orders/track 3",
		// Caller h-a's candidates are the tenant's first one only: shown.
		"pin_candidate h-a acme/orders/get_order 8",
		// h-b's: track (3 of 4); get_order (1) is under MinPinUses.
		"pin_candidate h-b acme/orders/track 3",
	}
	if fmt.Sprint(lines) != fmt.Sprint(want) {
		t.Errorf("findings\n%q\nwant\n%q", lines, want)
	}
	for _, f := range got {
		if f.Message == "" || f.Share <= 0 {
			t.Errorf("finding %+v lacks its message or share", f)
		}
	}
}
