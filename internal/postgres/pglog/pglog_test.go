package pglog_test

import (
	"context"
	"testing"
	"time"

	"github.com/seed0cff8200/cardex/internal/postgres/pglog"
	"github.com/seed0cff8200/cardex/internal/telemetry/discoverylog"
	"github.com/seed0cff8200/cardex/internal/telemetry/feedback"
	"github.com/seed0cff8200/cardex/internal/testkit/pgtest"
)

func TestWriterRecordsDiscoveriesAndOutcomes(t *testing.T) {
	st := pgtest.Open(t, pgtest.Options{})
	w := pglog.New(st.Pool(), st.Schema(), nil)
	at := time.Date(2026, 11, 30, 3, 0, 0, 0, time.UTC)
	w.Discovery(discoverylog.Entry{ID: "d1", Time: at, Tenant: "acme", SubjectHash: "sh", SessionID: "s1", Query: "parcel late",
		TopK: 5, Returned: []discoverylog.Returned{{Server: "orders", Name: "get_order", Score: 0.5}}, CandidateCount: 18, LatencyMS: 1.25, LowConfidence: true})
	w.Discovery(discoverylog.Entry{ID: "d1", Time: at, Tenant: "acme", TopK: 5}) // a duplicate id is ignored
	tool := &feedback.Tool{Server: "orders", Name: "track_shipment"}
	w.Event(feedback.Event{Type: feedback.TypeOutcome, Time: at, Tenant: "acme", DiscoveryID: "d1", Tool: tool, Miss: true})
	w.Event(feedback.Event{Type: feedback.TypeImplicitMiss, Time: at, Tenant: "acme", DiscoveryID: "d1", Tool: tool, Miss: true})
	w.Event(feedback.Event{Type: feedback.TypeOutcome, Time: at, Tenant: "acme", DiscoveryID: "d1", NoneFit: true, Miss: true})
	w.Event(feedback.Event{Type: feedback.TypeLowConfidence, Time: at, Tenant: "acme", DiscoveryID: "d1", Miss: true})
	w.Event(feedback.Event{Type: feedback.TypeOutcome, Time: at, Tenant: "acme", DiscoveryID: "elsewhere", Tool: tool, Miss: true})
	w.Close()
	if w.Failed.Load() != 0 || w.Dropped.Load() != 0 {
		t.Fatalf("%d writes failed, %d dropped", w.Failed.Load(), w.Dropped.Load())
	}

	ctx := context.Background()
	var n, topK, cands int
	var low bool
	var query, returned string
	err := st.Pool().QueryRow(ctx, `SELECT count(*) OVER (), top_k, candidate_count, low_confidence, query, returned::text FROM `+st.Schema()+`.discoveries`).
		Scan(&n, &topK, &cands, &low, &query, &returned)
	if err != nil || n != 1 || topK != 5 || cands != 18 || !low || query != "parcel late" || returned == "[]" {
		t.Fatalf("discoveries row: n=%d top_k=%d candidates=%d low=%v query=%q returned=%s err=%v", n, topK, cands, low, query, returned, err)
	}
	rows, err := st.Pool().Query(ctx, `SELECT source, coalesce(used_name, ''), none_fit, miss FROM `+st.Schema()+`.outcomes ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	type outcome struct {
		source, name  string
		noneFit, miss bool
	}
	var got []outcome
	for rows.Next() {
		var o outcome
		if err := rows.Scan(&o.source, &o.name, &o.noneFit, &o.miss); err != nil {
			t.Fatal(err)
		}
		got = append(got, o)
	}
	want := []outcome{{"outcome", "track_shipment", false, true}, {"implicit_miss", "track_shipment", false, true}, {"outcome", "", true, true}}
	if len(got) != len(want) {
		t.Fatalf("outcomes %+v, want %+v (low-confidence events live on the discovery; an unknown discovery is skipped)", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("outcome %d = %+v, want %+v", i, got[i], want[i])
		}
	}
}
