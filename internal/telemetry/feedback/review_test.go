package feedback

import (
	"testing"
	"time"
)

func TestReviewQueries(t *testing.T) {
	at := time.Date(2026, 11, 30, 1, 2, 3, 0, time.UTC)
	tool := &Tool{Server: "orders", Name: "track_shipment"}
	events := []Event{
		{Type: TypeOutcome, Time: at, Tenant: "acme", DiscoveryID: "d1", Query: "parcel late", Tool: tool, Miss: true, Shortlist: []Tool{{"orders", "get_order"}}},
		{Type: TypeImplicitMiss, Time: at, Tenant: "acme", DiscoveryID: "d2", Query: "Parcel LATE", Tool: tool, Miss: true},
		{Type: TypeOutcome, Time: at, Tenant: "acme", DiscoveryID: "d3", Query: "get order 5", Tool: &Tool{"orders", "get_order"}, Miss: false},
		{Type: TypeOutcome, Time: at, Tenant: "acme", DiscoveryID: "d4", Query: "do the thing", NoneFit: true, Miss: true},
		{Type: TypeLowConfidence, Time: at, Tenant: "acme", DiscoveryID: "d5", Query: "zzqx", Miss: true},
		{Type: TypeOutcome, Time: at, Tenant: "acme", DiscoveryID: "d6", QueryHash: "abc", Tool: tool, Miss: true},
		{Type: TypeOutcome, Time: at, Tenant: "globex", DiscoveryID: "d7", Query: "parcel late", Tool: tool, Miss: true},
	}
	got, skipped := ReviewQueries(events)
	if skipped != 1 {
		t.Errorf("skipped %d, want 1 (the hashed query)", skipped)
	}
	want := []struct {
		source, query, expected string
	}{
		{"outcome", "parcel late", "orders/track_shipment"},
		{"none_fit", "do the thing", ""},
		{"low_confidence", "zzqx", ""},
		{"outcome", "parcel late", "orders/track_shipment"}, // another tenant
	}
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		exp := ""
		if len(g.Expected) > 0 {
			exp = g.Expected[0]
		}
		if g.Source != w.source || g.Query != w.query || exp != w.expected {
			t.Errorf("row %d = %+v, want %+v", i, g, w)
		}
	}
	if got[0].ID != "log-d1-1" || got[0].Time != "2026-11-30T01:02:03Z" || len(got[0].Shortlist) != 1 || got[3].Tenant != "globex" {
		t.Errorf("row details: %+v / %+v", got[0], got[3])
	}
}
