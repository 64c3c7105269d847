package main

import (
	"bufio"
	"encoding/json"
	"net/http"
	"os/exec"
	"slices"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// startServerJSON runs `cardex serve --log-format json` and returns its gRPC
// and HTTP addresses once it serves, failing if any line of its log up to
// then is not a JSON object with time, level and msg.
func startServerJSON(t *testing.T, bin, dataDir string) (addr, httpAddr string) {
	t.Helper()
	cmd := exec.Command(bin, "serve", "--data-dir", dataDir, "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0", "--log-format", "json")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	type line struct {
		Time, Level, Msg, Addr, HTTP string
	}
	lines := make(chan line, 64)
	bad := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			var l line
			var obj map[string]any
			if json.Unmarshal(sc.Bytes(), &obj) != nil || json.Unmarshal(sc.Bytes(), &l) != nil || l.Time == "" || l.Level == "" || l.Msg == "" {
				select {
				case bad <- sc.Text():
				default:
				}
				continue
			}
			select {
			case lines <- l:
			default: // full: after the start nobody reads
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve exited with %v after SIGTERM", err)
			}
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			t.Error("serve did not stop within 15s of SIGTERM")
		}
	})
	timeout := time.After(30 * time.Second)
	for addr == "" {
		select {
		case l := <-lines:
			switch l.Msg {
			case "agent surfaces":
				httpAddr = l.HTTP
			case "cardex serving":
				addr = l.Addr
			}
		case s := <-bad:
			t.Fatalf("a log line that is not a JSON object with time, level and msg: %q", s)
		case <-timeout:
			t.Fatal("server did not start within 30s")
		}
	}
	if httpAddr == "" {
		t.Fatal("no HTTP listener logged")
	}
	return addr, httpAddr
}

func scrapeMetrics(t testing.TB, url string) map[string]*dto.MetricFamily {
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

// metricValue is the value (a histogram's sample count) of the series of
// name with exactly labels, or -1 when there is none.
func metricValue(fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	for _, m := range fams[name].GetMetric() {
		var have []string
		for _, l := range m.GetLabel() {
			have = append(have, l.GetName(), l.GetValue())
		}
		if !slices.Equal(have, labels) {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		case m.Histogram != nil:
			return float64(m.GetHistogram().GetSampleCount())
		}
	}
	return -1
}

// TestMetricsAndJSONLogs: `cardex serve --log-format json` logs JSON lines,
// and after a few discoveries, outcomes and a miss, GET /metrics on its
// HTTP listener shows the series an operator watches.
func TestMetricsAndJSONLogs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	addr, httpAddr := startServerJSON(t, bin, t.TempDir())
	if _, code := run(t, bin, addr, "cards", "apply", "-f", "../../examples/"); code != 0 {
		t.Fatal("apply")
	}
	conn, err := dial(addr, "", nil, false)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := t.Context()
	dc := pb.NewDiscoveryServiceClient(conn)
	support := &pb.Caller{Tenant: "acme", Subject: "agent-7", SessionId: "s1", Scopes: []string{"support:read", "support:write", "orders:read", "billing:read"}}

	discover := func(q string) *pb.DiscoverToolsResponse {
		t.Helper()
		res, err := dc.DiscoverTools(ctx, &pb.DiscoverToolsRequest{Caller: support, Query: q})
		if err != nil {
			t.Fatalf("discover %q: %v", q, err)
		}
		return res
	}
	first := discover("customer wants their money back for order 1234")
	if _, err := dc.ReportOutcome(ctx, &pb.ReportOutcomeRequest{Caller: support, DiscoveryId: first.GetDiscoveryId(),
		Outcome: &pb.ReportOutcomeRequest_UsedTool{UsedTool: &pb.ToolRef{Server: first.GetTools()[0].GetCard().GetServer(), Name: first.GetTools()[0].GetCard().GetName()}}}); err != nil {
		t.Fatal(err)
	}
	second := discover("print a shipping label for a return")
	if _, err := dc.ReportOutcome(ctx, &pb.ReportOutcomeRequest{Caller: support, DiscoveryId: second.GetDiscoveryId(),
		Outcome: &pb.ReportOutcomeRequest_NoneFit{NoneFit: true}}); err != nil {
		t.Fatal(err)
	}
	low := discover("zqxv florbish wumpus")
	if !low.GetLowConfidence() {
		t.Fatalf("a nonsense query is not low-confidence: %v", low)
	}
	// A tool the session's shortlists did not hold, described: an
	// implicit miss.
	shown := map[string]bool{}
	for _, r := range []*pb.DiscoverToolsResponse{first, second, low} {
		for _, tool := range r.GetTools() {
			shown[tool.GetCard().GetServer()+"/"+tool.GetCard().GetName()] = true
		}
	}
	all, err := dc.SearchTools(ctx, &pb.SearchToolsRequest{Caller: support, PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	var missed *pb.ToolSummary
	for _, s := range all.GetTools() {
		if !shown[s.GetServer()+"/"+s.GetName()] {
			missed = s
			break
		}
	}
	if _, err := dc.DescribeTool(ctx, &pb.DescribeToolRequest{Caller: support, Server: missed.GetServer(), Name: missed.GetName()}); err != nil {
		t.Fatal(err)
	}
	if _, err := dc.DiscoverTools(ctx, &pb.DiscoverToolsRequest{Caller: support}); err == nil {
		t.Fatal("a discovery without a query was answered")
	}
	// A tenant a caller merely names takes no label of its own.
	if _, err := dc.DiscoverTools(ctx, &pb.DiscoverToolsRequest{Caller: &pb.Caller{Tenant: "no-such-tenant", Scopes: []string{"*"}}, Query: "anything"}); err != nil {
		t.Fatal(err)
	}
	if _, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}

	url := "http://" + httpAddr + "/metrics"
	var fams map[string]*dto.MetricFamily
	// The catalogue gauges follow the view in the background: wait until
	// they reflect every write (a bound on a wait, not a timing assertion;
	// the server entries, written first, can be counted before the cards).
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		fams = scrapeMetrics(t, url)
		seq := metricValue(fams, "cardex_store_sequence")
		if (metricValue(fams, "cardex_catalog_server_entries") == 8 && seq > 0 && metricValue(fams, "cardex_view_sequence") == seq) || time.Now().After(deadline) {
			break
		}
	}
	const discoverRPC, healthRPC = "/cardex.v1.DiscoveryService/DiscoverTools", "/grpc.health.v1.Health/Check"
	for _, c := range []struct {
		name   string
		labels []string
		want   float64
	}{
		{"cardex_discoveries_total", []string{"tenant", "acme"}, 3},
		{"cardex_discoveries_total", []string{"tenant", "(other)"}, 1},
		{"cardex_discoveries_total", []string{"tenant", "no-such-tenant"}, -1},
		{"cardex_discovery_low_confidence_total", []string{"tenant", "acme"}, 1},
		{"cardex_outcomes_total", []string{"outcome", "hit", "tenant", "acme"}, 1},
		{"cardex_outcomes_total", []string{"outcome", "none_fit", "tenant", "acme"}, 1},
		{"cardex_implicit_misses_total", []string{"tenant", "acme"}, 1},
		{"cardex_discovery_duration_seconds", nil, 4},
		{"cardex_discovery_leg_duration_seconds", []string{"leg", "lexical"}, 4},
		{"cardex_discovery_leg_duration_seconds", []string{"leg", "hydrate"}, 4},
		{"cardex_discovery_candidates", nil, 4},
		{"cardex_discovery_shortlist_tools", nil, 4},
		{"cardex_grpc_requests_total", []string{"code", "OK", "method", discoverRPC}, 4},
		{"cardex_grpc_requests_total", []string{"code", "InvalidArgument", "method", discoverRPC}, 1},
		{"cardex_grpc_requests_total", []string{"code", "OK", "method", healthRPC}, 1},
		{"cardex_catalog_server_entries", nil, 8},
		{"cardex_replica_lag_changes", nil, 0},
	} {
		if got := metricValue(fams, c.name, c.labels...); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if n := metricValue(fams, "cardex_catalog_active_cards"); n < 50 {
		t.Errorf("cardex_catalog_active_cards = %v, want the example catalogue's active cards", n)
	}
	if v, s := metricValue(fams, "cardex_view_sequence"), metricValue(fams, "cardex_store_sequence"); v <= 0 || v != s {
		t.Errorf("view sequence %v, store sequence %v; want equal and positive", v, s)
	}
	if metricValue(fams, "cardex_discovery_degraded_total") != 0 {
		t.Error("a degraded answer was counted on the embedded store")
	}
}
