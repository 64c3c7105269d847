package metrics_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/telemetry/metrics"
	"github.com/seed0cff8200/cardex/retriever"
)

// scrape GETs url and parses the Prometheus text format.
func scrape(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s", url, resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return fams
}

// sample finds the series of name whose labels include labels; ok is false
// when there is none.
func sample(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (*dto.Metric, bool) {
	f := fams[name]
	if f == nil {
		return nil, false
	}
next:
	for _, m := range f.GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if have[k] != v {
				continue next
			}
		}
		return m, true
	}
	return nil, false
}

// value is a counter's or gauge's value, or -1 when the series is absent.
func value(fams map[string]*dto.MetricFamily, name string, labels map[string]string) float64 {
	m, ok := sample(fams, name, labels)
	switch {
	case !ok:
		return -1
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	}
	return -1
}

func tools(n int) []retriever.Scored { return make([]retriever.Scored, n) }

// TestSeriesOverHTTP: what was recorded is what a scrape of the handler
// over HTTP shows, with the tenant label bounded.
func TestSeriesOverHTTP(t *testing.T) {
	m := metrics.New(metrics.Options{MaxTenants: 2})
	ms := time.Millisecond
	m.Discovery("acme", &retriever.Result{CandidateCount: 10, Tools: tools(3), LowConfidence: true,
		Timings: retriever.Timings{Embed: ms, Authorize: 2 * ms, Lexical: 3 * ms, Semantic: 4 * ms, Fuse: 5 * ms, Hydrate: 6 * ms}}, 21*ms)
	m.Discovery("acme", &retriever.Result{CandidateCount: 10, Tools: tools(5)}, 2*ms)
	m.Discovery("nobody", &retriever.Result{LowConfidence: true}, ms)                                // no candidates: no label of its own
	m.Discovery("globex", &retriever.Result{CandidateCount: 5, Abstained: true, Degraded: true}, ms) // the second label
	m.Discovery("initech", &retriever.Result{CandidateCount: 4, Tools: tools(1)}, ms)                // past the bound
	m.Outcome("acme", false, false)
	m.Outcome("acme", true, false)
	m.Outcome("globex", true, true)
	m.Outcome("initech", true, false)
	m.ImplicitMiss("acme")
	m.ImplicitMiss("nobody")
	m.DiscoveryLogDropped(func() uint64 { return 7 })

	call := m.UnaryInterceptor()
	info := &grpc.UnaryServerInfo{FullMethod: "/cardex.v1.DiscoveryService/DiscoverTools"}
	ok := func(context.Context, any) (any, error) { return "ok", nil }
	bad := func(context.Context, any) (any, error) {
		return nil, status.Error(codes.InvalidArgument, "query: is required")
	}
	for _, h := range []grpc.UnaryHandler{ok, ok, bad} {
		resp, err := call(t.Context(), nil, info, h)
		if want, _ := h(t.Context(), nil); resp != want || (err == nil) != (resp != nil) {
			t.Fatalf("the interceptor changed the answer: %v, %v", resp, err)
		}
	}

	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	fams := scrape(t, srv.URL+"/metrics")
	other := metrics.OtherTenant
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"cardex_discoveries_total", map[string]string{"tenant": "acme"}, 2},
		{"cardex_discovery_log_dropped_total", nil, 7},
		{"cardex_discoveries_total", map[string]string{"tenant": "globex"}, 1},
		{"cardex_discoveries_total", map[string]string{"tenant": other}, 2}, // nobody, initech
		{"cardex_discoveries_total", map[string]string{"tenant": "nobody"}, -1},
		{"cardex_discoveries_total", map[string]string{"tenant": "initech"}, -1},
		{"cardex_discovery_low_confidence_total", map[string]string{"tenant": "acme"}, 1},
		{"cardex_discovery_low_confidence_total", map[string]string{"tenant": other}, 1},
		{"cardex_discovery_abstained_total", map[string]string{"tenant": "globex"}, 1},
		{"cardex_discovery_degraded_total", nil, 1},
		{"cardex_outcomes_total", map[string]string{"tenant": "acme", "outcome": "hit"}, 1},
		{"cardex_outcomes_total", map[string]string{"tenant": "acme", "outcome": "miss"}, 1},
		{"cardex_outcomes_total", map[string]string{"tenant": "globex", "outcome": "none_fit"}, 1},
		{"cardex_outcomes_total", map[string]string{"tenant": other, "outcome": "miss"}, 1},
		{"cardex_implicit_misses_total", map[string]string{"tenant": "acme"}, 1},
		{"cardex_implicit_misses_total", map[string]string{"tenant": other}, 1},
		{"cardex_grpc_requests_total", map[string]string{"method": info.FullMethod, "code": "OK"}, 2},
		{"cardex_grpc_requests_total", map[string]string{"method": info.FullMethod, "code": "InvalidArgument"}, 1},
	} {
		if got := value(fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	hist := func(name string, labels map[string]string) *dto.Histogram {
		t.Helper()
		s, ok := sample(fams, name, labels)
		if !ok || s.Histogram == nil {
			t.Fatalf("no histogram %s%v", name, labels)
		}
		return s.GetHistogram()
	}
	if h := hist("cardex_discovery_duration_seconds", nil); h.GetSampleCount() != 5 || h.GetSampleSum() < 0.025 || h.GetSampleSum() > 0.027 {
		t.Errorf("duration: %d samples, sum %v; want 5, 0.026", h.GetSampleCount(), h.GetSampleSum())
	}
	for i, leg := range metrics.Legs {
		h := hist("cardex_discovery_leg_duration_seconds", map[string]string{"leg": leg})
		if want := float64(i+1) / 1000; h.GetSampleCount() != 5 || h.GetSampleSum() != want {
			t.Errorf("leg %s: %d samples, sum %v; want 5, %v", leg, h.GetSampleCount(), h.GetSampleSum(), want)
		}
	}
	if h := hist("cardex_discovery_candidates", nil); h.GetSampleCount() != 5 || h.GetSampleSum() != 29 {
		t.Errorf("candidates: %d samples, sum %v; want 5, 29", h.GetSampleCount(), h.GetSampleSum())
	}
	if h := hist("cardex_discovery_shortlist_tools", nil); h.GetSampleCount() != 5 || h.GetSampleSum() != 9 {
		t.Errorf("shortlist: %d samples, sum %v; want 5, 9", h.GetSampleCount(), h.GetSampleSum())
	}
	if h := hist("cardex_grpc_request_duration_seconds", map[string]string{"method": info.FullMethod}); h.GetSampleCount() != 3 {
		t.Errorf("request durations: %d samples, want 3", h.GetSampleCount())
	}
	for _, name := range []string{"go_goroutines", "process_resident_memory_bytes"} {
		if fams[name] == nil {
			t.Errorf("no %s: the runtime and process collectors are not registered", name)
		}
	}
}

// TestTenantBound: the tenant label holds at most MaxTenants tenants, and
// a negative bound labels none.
func TestTenantBound(t *testing.T) {
	for _, tc := range []struct {
		max, want int
	}{{3, 3}, {-1, 0}, {0, 20}} {
		m := metrics.New(metrics.Options{MaxTenants: tc.max})
		for i := range 20 {
			m.Discovery(string(rune('a'+i)), &retriever.Result{CandidateCount: 1}, time.Millisecond)
		}
		srv := httptest.NewServer(m.Handler())
		fams := scrape(t, srv.URL)
		srv.Close()
		labelled, other := 0, 0.0
		for _, s := range fams["cardex_discoveries_total"].GetMetric() {
			if v := s.GetLabel()[0].GetValue(); v == metrics.OtherTenant {
				other = s.GetCounter().GetValue()
			} else {
				labelled++
			}
		}
		if labelled != tc.want || other != float64(20-tc.want) {
			t.Errorf("MaxTenants %d: %d tenants labelled, %v under %s; want %d, %d", tc.max, labelled, other, metrics.OtherTenant, tc.want, 20-tc.want)
		}
	}
}

// TestNil: a nil *Metrics records nothing and passes calls through.
func TestNil(t *testing.T) {
	var m *metrics.Metrics
	m.Discovery("acme", &retriever.Result{}, time.Millisecond)
	m.Outcome("acme", true, false)
	m.ImplicitMiss("acme")
	m.DiscoveryLogDropped(func() uint64 { return 1 })
	m.FollowCatalog(t.Context(), nil, nil, time.Second, nil)
	want := errors.New("handler error")
	_, err := m.UnaryInterceptor()(t.Context(), nil, &grpc.UnaryServerInfo{FullMethod: "/x/Y"}, func(context.Context, any) (any, error) { return nil, want })
	if err != want {
		t.Errorf("interceptor: %v, want %v", err, want)
	}
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	if resp, err := http.Get(srv.URL); err != nil || resp.StatusCode != http.StatusNotFound {
		t.Errorf("nil handler: %v, %v; want 404", resp, err)
	}
}

// TestFollowCatalog: the catalogue gauges follow a real store and
// retriever: active cards, server entries, both sequences, and the lag of
// writes the view has not applied yet.
func TestFollowCatalog(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	card := func(name string) cards.Card {
		return cards.Card{Tenant: "acme", Server: "ops", Name: name, Summary: "Does " + name + " on a service."}
	}
	if _, err := st.Put(ctx, []cards.Card{card("restart"), card("deploy")}); err != nil {
		t.Fatal(err)
	}
	if _, err := st.PutServers(ctx, []cards.ServerInfo{{Tenant: "acme", Name: "ops", Title: "Operations"}, {Tenant: "acme", Name: "billing"}}); err != nil {
		t.Fatal(err)
	}
	ret, err := retriever.New(ctx, st, embed.NewHashed(64), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ret.Close()
	m := metrics.New(metrics.Options{})
	done := make(chan struct{})
	go func() { m.FollowCatalog(ctx, ret, st, 20*time.Millisecond, nil); close(done) }()
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()

	// waitFor scrapes until the gauges are as wanted (or fails after 10 s:
	// a bound on a wait, not a timing assertion).
	waitFor := func(what string, want map[string]float64) {
		t.Helper()
		var fams map[string]*dto.MetricFamily
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			fams = scrape(t, srv.URL)
			ok := true
			for name, v := range want {
				ok = ok && value(fams, name, nil) == v
			}
			if ok {
				return
			}
		}
		for name, v := range want {
			t.Errorf("%s: %s = %v, want %v", what, name, value(fams, name, nil), v)
		}
		t.FailNow()
	}
	seq, _ := st.Seq(ctx)
	waitFor("at start", map[string]float64{"cardex_catalog_active_cards": 2, "cardex_catalog_server_entries": 2,
		"cardex_view_sequence": float64(seq), "cardex_store_sequence": float64(seq), "cardex_replica_lag_changes": 0})

	// Written to the store but not applied to the view: lag.
	if _, err := st.Put(ctx, []cards.Card{card("rollback")}); err != nil {
		t.Fatal(err)
	}
	if err := st.DeleteServer(ctx, "acme", "billing", 0); err != nil {
		t.Fatal(err)
	}
	waitFor("before the view syncs", map[string]float64{"cardex_catalog_active_cards": 2, "cardex_view_sequence": float64(seq),
		"cardex_store_sequence": float64(seq + 2), "cardex_replica_lag_changes": 2})
	if err := ret.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor("after the sync", map[string]float64{"cardex_catalog_active_cards": 3, "cardex_catalog_server_entries": 1,
		"cardex_view_sequence": float64(seq + 2), "cardex_replica_lag_changes": 0})
	cancel()
	<-done
}

// TestWatchEnrichment: the enrichment worker's status, read at each scrape.
func TestWatchEnrichment(t *testing.T) {
	m := metrics.New(metrics.Options{})
	st := metrics.EnrichmentStatus{Leader: true, Backlog: 7, Written: 5, Unchanged: 1, KeptPerson: 2, Failed: 3, Calls: 8, CacheHits: 4}
	m.WatchEnrichment(func() metrics.EnrichmentStatus { return st })
	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	fams := scrape(t, srv.URL)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"cardex_enrich_leader", nil, 1},
		{"cardex_enrich_backlog_cards", nil, 7},
		{"cardex_enrich_cards_total", map[string]string{"outcome": "written"}, 5},
		{"cardex_enrich_cards_total", map[string]string{"outcome": "kept_person"}, 2},
		{"cardex_enrich_cards_total", map[string]string{"outcome": "failed"}, 3},
		{"cardex_enrich_model_calls_total", nil, 8},
		{"cardex_enrich_cache_hits_total", nil, 4},
	} {
		if got := value(fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	st.Leader, st.Backlog = false, 0
	fams = scrape(t, srv.URL)
	if value(fams, "cardex_enrich_leader", nil) != 0 || value(fams, "cardex_enrich_backlog_cards", nil) != 0 {
		t.Error("the second scrape did not read the status again")
	}
	var nilM *metrics.Metrics
	nilM.WatchEnrichment(func() metrics.EnrichmentStatus { return st })
}
