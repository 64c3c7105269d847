package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type benchOut struct {
	Addr    string `json:"addr"`
	Tenant  string `json:"tenant"`
	Queries int    `json:"queries"`
	Count   int    `json:"count"`
	Results []struct {
		RPC         string           `json:"rpc"`
		Concurrency int              `json:"concurrency"`
		Requests    int64            `json:"requests"`
		Errors      map[string]int64 `json:"errors"`
		Throttled   int64            `json:"throttled"`
		QPS         float64          `json:"qps"`
		LatencyMS   struct {
			P50, P90, P99, Max float64
		} `json:"latency_ms"`
	} `json:"results"`
	RateLimited *struct {
		Limits []string `json:"limits"`
		Advice string   `json:"advice"`
	} `json:"rate_limited"`
}

// TestBench runs `cardex bench` against a real server on loopback: the
// counts, the errors by code, the mixed mode's writes (and their cleanup),
// the queries file, the table, and the refusals. Behaviour only: no figure
// is asserted but the ones the run must add up to.
func TestBench(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	// No rate limits: the bench measures the server, not its limits.
	addr, _, _ := startServerHTTP(t, bin, t.TempDir(), "--rate-limit", "0", "--tenant-rate-limit", "0")
	if _, code := run(t, bin, addr, "cards", "apply", "-f", "../../examples/"); code != 0 {
		t.Fatal("apply")
	}
	bench := func(wantCode int, args ...string) benchOut {
		t.Helper()
		stdout, stderr, code := runErr(t, bin, addr, append([]string{"bench", "-o", "json"}, args...)...)
		var out benchOut
		if code != wantCode || json.Unmarshal([]byte(stdout), &out) != nil {
			t.Fatalf("bench %v: exit %d, want %d\nstdout %s\nstderr %s", args, code, wantCode, stdout, stderr)
		}
		if !strings.Contains(stderr, "cardex bench: DiscoverTools on "+addr) {
			t.Errorf("bench %v: no progress on stderr: %s", args, stderr)
		}
		return out
	}
	ordered := func(name string, out benchOut) {
		t.Helper()
		for _, r := range out.Results {
			l := r.LatencyMS
			if !(0 < l.P50 && l.P50 <= l.P90 && l.P90 <= l.P99 && l.P99 <= l.Max) || r.QPS <= 0 {
				t.Errorf("%s: %s: latencies out of order or no throughput: %+v", name, r.RPC, r)
			}
		}
	}

	out := bench(0, "--tenant", "acme", "--scopes", "*", "--count", "120", "-c", "4")
	if len(out.Results) != 2 || out.Results[0].RPC != "DiscoverTools" || out.Results[1].RPC != "grpc.health.v1.Health/Check" ||
		out.Results[0].Requests != 120 || out.Results[1].Requests != 120 || len(out.Results[0].Errors) != 0 || out.Count != 120 || out.Queries != len(benchQueries) {
		t.Fatalf("count run: %+v", out)
	}
	ordered("count run", out)

	// Every discovery refused: counted by code, exit 1, health unaffected.
	out = bench(1, "--tenant", "acme", "--scopes", "*", "--count", "30", "-c", "3", "--top-k", "51")
	if r := out.Results[0]; r.Requests != 30 || r.Errors["InvalidArgument"] != 30 || len(out.Results[1].Errors) != 0 {
		t.Fatalf("refused discoveries: %+v", out)
	}

	// Mixed: writes beside the discoveries, in the bench tenant, deleted
	// at the end; a queries file.
	qf := filepath.Join(t.TempDir(), "queries.txt")
	if err := os.WriteFile(qf, []byte("# support questions\nrefund an order\n\nwhere is my parcel\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out = bench(0, "--tenant", "acme", "--scopes", "support:read,orders:read", "--duration", "1s", "-c", "2", "--connections", "2",
		"--write-rate", "20", "--write-cards", "2", "--queries", qf, "--health=false")
	if len(out.Results) != 2 || out.Results[1].RPC != "CatalogService/PutCards (beside DiscoverTools)" || out.Results[1].Requests < 1 ||
		len(out.Results[1].Errors) != 0 || out.Queries != 2 || out.Results[0].Requests < 1 {
		t.Fatalf("mixed run: %+v", out)
	}
	ordered("mixed run", out)
	if list, _ := run(t, bin, addr, "cards", "list", "--tenant", "cardex-bench", "-o", "json"); !strings.Contains(list, `"cards": []`) {
		t.Errorf("the bench cards were not deleted:\n%s", list)
	}
	if list, _ := run(t, bin, addr, "cards", "list", "--tenant", "acme", "--server", "bench", "-o", "json"); !strings.Contains(list, `"cards": []`) {
		t.Errorf("bench cards in the discoveries' tenant:\n%s", list)
	}
	out = bench(0, "--tenant", "acme", "--count", "5", "-c", "1", "--write-rate", "50", "--keep-writes", "--health=false")
	if list, _ := run(t, bin, addr, "cards", "list", "--tenant", "cardex-bench"); !strings.Contains(list, "bench_tool_2") {
		t.Errorf("--keep-writes: the bench cards are gone:\n%s", list)
	}

	// A synthetic catalogue in the bench tenant, deleted at the end.
	out = bench(0, "--synthetic", "300", "--scopes", "billing:*,crm:read", "--count", "20", "-c", "2", "--health=false")
	if r := out.Results[0]; out.Tenant != "cardex-bench" || r.Requests != 20 || len(r.Errors) != 0 || out.Queries != 50 {
		t.Fatalf("synthetic run: %+v", out)
	}
	if list, _ := run(t, bin, addr, "cards", "list", "--tenant", "cardex-bench", "--server", "billing-core", "-o", "json"); !strings.Contains(list, `"cards": []`) {
		t.Errorf("the synthetic cards were not deleted:\n%s", list)
	}

	// The table.
	stdout, _, code := runErr(t, bin, addr, "bench", "--tenant", "acme", "--count", "10", "-c", "2")
	if code != 0 || !strings.HasPrefix(stdout, "RPC ") || !strings.Contains(stdout, "\nDiscoverTools ") || !strings.Contains(stdout, "\ngrpc.health.v1.Health/Check ") {
		t.Errorf("table: exit %d\n%s", code, stdout)
	}

	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "--tenant", "acme", "--addr", "10.11.12.13:50051"}, "--addr 10.11.12.13:50051 is not a loopback address"},
		{[]string{"bench", "--tenant", "acme", "-c", "5000"}, "--concurrency is 5000; it must be between 1 and 1024"},
		{[]string{"bench", "--tenant", "acme", "--count", "5", "--duration", "1s"}, "give --duration or --count, not both"},
		{[]string{"bench", "--tenant", "acme", "--count", "0"}, "--count 0: it must be between 1 and 10000000"},
		{[]string{"bench", "--tenant", "acme", "--duration", "2h"}, "--duration is 2h0m0s; it must be more than 0 and at most 1h0m0s"},
		{[]string{"bench", "--tenant", "acme", "--connections", "65"}, "--connections 65: it must be between 1 and 64"},
		{[]string{"bench", "--tenant", "acme", "--write-rate", "5", "--write-tenant", "acme"}, "is the tenant of the discoveries"},
		{[]string{"bench", "--tenant", "acme", "--write-rate", "5000"}, "--write-rate 5000: it must be between 0 (no writes) and 1000"},
		{[]string{"bench", "--scopes", "*"}, "--tenant is required"},
		{[]string{"bench", "--synthetic", "10", "--tenant", "acme"}, "--synthetic cards go to --write-tenant \"cardex-bench\", and so do the discoveries"},
		{[]string{"bench", "--synthetic", "100001"}, "--synthetic 100001: it must be between 0 (none) and 100000"},
	} {
		_, stderr, code := runErr(t, bin, addr, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 and %q", tc.args, code, stderr, tc.want)
		}
	}
	long := filepath.Join(t.TempDir(), "long.txt")
	if err := os.WriteFile(long, []byte("ok\n"+strings.Repeat("x", 1001)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, stderr, code := runErr(t, bin, addr, "bench", "--tenant", "acme", "--queries", long); code != 1 || !strings.Contains(stderr, "long.txt:2: the query is 1001 characters; the limit is 1000") {
		t.Errorf("a long query: exit %d, %s", code, stderr)
	}
}

// TestBenchAgainstDefaultLimits: the documented bench command against a
// server started with its default limits works: the refusals of the
// per-caller limit are waited out and counted apart (exit 0), and the
// bench names the limit and the flags that lift it; with
// --wait-limits=false they are errors (exit 1), with the same advice.
func TestBenchAgainstDefaultLimits(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	addr, _ := startServer(t, bin, t.TempDir())
	if _, code := run(t, bin, addr, "cards", "apply", "-f", "../../examples/"); code != 0 {
		t.Fatal("apply")
	}
	const advice = "start it with `cardex serve --rate-limit 0 --tenant-rate-limit 0`"
	stdout, stderr, code := runErr(t, bin, addr, "bench", "--tenant", "acme", "--scopes", "*", "-c", "32", "--duration", "2s")
	if code != 0 || !strings.HasPrefix(stdout, "RPC ") || !strings.Contains(stdout, "calls refused by the server's rate limits were waited out") ||
		!strings.Contains(stdout, "per-caller rate limit (100 discovery calls a second, --rate-limit)") || !strings.Contains(stdout, advice) {
		t.Errorf("table: exit %d\n%s\n%s", code, stdout, stderr)
	}
	if !strings.Contains(stderr, "the server's per-caller rate limit (100 discovery calls a second, --rate-limit) refused a call: waiting its refusals out") {
		t.Errorf("stderr does not say the limit as it meets it:\n%s", stderr)
	}
	stdout, _, code = runErr(t, bin, addr, "bench", "--tenant", "acme", "--scopes", "*", "-c", "32", "--count", "600", "-o", "json")
	var out benchOut
	if code != 0 || json.Unmarshal([]byte(stdout), &out) != nil {
		t.Fatalf("-o json: exit %d\n%s", code, stdout)
	}
	d := out.Results[0]
	if d.Requests != 600 || len(d.Errors) != 0 || d.Throttled == 0 || out.RateLimited == nil || !strings.Contains(out.RateLimited.Advice, advice) ||
		out.Results[1].Throttled != 0 || out.Results[1].Requests != 600 {
		t.Errorf("-o json: %+v", out)
	}
	// 600 calls at 100 a second (after a burst of 100) take seconds: the
	// limit was waited for, not lifted.
	if d.QPS > 400 {
		t.Errorf("%.0f discoveries a second under a limit of 100", d.QPS)
	}
	stdout, stderr, code = runErr(t, bin, addr, "bench", "--tenant", "acme", "--scopes", "*", "-c", "32", "--count", "300", "--wait-limits=false", "--health=false")
	if code != 1 || !strings.Contains(stdout, "ResourceExhausted") || !strings.Contains(stdout, advice) || !strings.Contains(stderr, "its refusals count as errors") {
		t.Errorf("--wait-limits=false: exit %d\n%s\n%s", code, stdout, stderr)
	}
}
