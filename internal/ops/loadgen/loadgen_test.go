package loadgen

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestQuantiles: the histogram's quantiles are within 1% of the exact ones
// of the same durations, and Max is exact.
func TestQuantiles(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, tc := range []struct {
		name string
		gen  func() time.Duration
	}{
		{"tiny", func() time.Duration { return time.Duration(rng.IntN(200)) }},
		{"uniform 0-10ms", func() time.Duration { return time.Duration(rng.Int64N(int64(10 * time.Millisecond))) }},
		{"log-normal around 2ms", func() time.Duration { return time.Duration(2e6 * math.Exp(rng.NormFloat64())) }},
		{"constant", func() time.Duration { return 1234567 * time.Nanosecond }},
	} {
		var h Histogram
		var all []time.Duration
		for range 20000 {
			d := tc.gen()
			all = append(all, d)
			h.Record(d)
		}
		slices.Sort(all)
		if h.Count() != int64(len(all)) || h.Max() != all[len(all)-1] {
			t.Errorf("%s: count %d, max %s; want %d, %s", tc.name, h.Count(), h.Max(), len(all), all[len(all)-1])
		}
		for _, q := range []float64{0.5, 0.9, 0.99, 1} {
			exact := all[int(math.Ceil(q*float64(len(all))))-1]
			got := h.Quantile(q)
			if diff := math.Abs(float64(got - exact)); diff > 0.01*float64(exact)+1 {
				t.Errorf("%s: q%.2f = %s, exact %s", tc.name, q, got, exact)
			}
		}
	}
	var empty Histogram
	if empty.Quantile(0.5) != 0 || empty.Max() != 0 {
		t.Error("an empty histogram has quantiles")
	}
}

// TestRunCount: a count run makes exactly Count calls over the workers and
// counts the failed ones by code.
func TestRunCount(t *testing.T) {
	var mu sync.Mutex
	workers := map[int]int{}
	res, err := Run(t.Context(), Config{Concurrency: 4, Count: 1000}, func(_ context.Context, w, i int) error {
		mu.Lock()
		workers[w]++
		n := 0
		for _, c := range workers {
			n += c
		}
		mu.Unlock()
		switch {
		case n%10 == 0:
			return status.Error(codes.Unavailable, "down")
		case n%25 == 1:
			return errors.New("not a status")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	for w, c := range workers {
		if w < 0 || w >= 4 {
			t.Errorf("worker %d", w)
		}
		calls += c
	}
	if res.Requests != 1000 || calls != 1000 {
		t.Fatalf("requests %d, calls %d; want 1000", res.Requests, calls)
	}
	if res.Errors["Unavailable"] != 100 || res.Errors["Unknown"] != 40 || res.ErrorCount() != 140 {
		t.Errorf("errors %v; want 100 Unavailable, 40 Unknown", res.Errors)
	}
	if !(res.P50 <= res.P90 && res.P90 <= res.P99 && res.P99 <= res.Max) || res.QPS <= 0 || res.Elapsed <= 0 {
		t.Errorf("latencies out of order or no throughput: %+v", res)
	}
}

// TestRunDurationAndRate: a duration run stops after its duration (calls
// in flight are finished and counted), a paced run makes about Rate calls
// a second, and progress is reported.
func TestRunDurationAndRate(t *testing.T) {
	var progress []Snapshot
	var mu sync.Mutex
	res, err := Run(t.Context(), Config{Concurrency: 3, Duration: 300 * time.Millisecond, Rate: 50, ProgressEvery: 50 * time.Millisecond,
		Progress: func(s Snapshot) { mu.Lock(); progress = append(progress, s); mu.Unlock() }},
		func(ctx context.Context, _, _ int) error {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	// 50 a second for 0.3 s is 16 calls, the first at once; the bound is
	// loose, for a loaded machine: pacing must hold the rate down, not
	// reach it exactly.
	if res.Requests < 1 || res.Requests > 17 || res.ErrorCount() != 0 {
		t.Errorf("paced run: %d requests, errors %v; want 1..17, none", res.Requests, res.Errors)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(progress) == 0 || progress[len(progress)-1].Requests > res.Requests {
		t.Errorf("progress %v", progress)
	}
}

// TestCheck: every limit is named.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{Concurrency: 0, Count: 1}, "concurrency is 0"},
		{Config{Concurrency: MaxConcurrency + 1, Count: 1}, "between 1 and 1024"},
		{Config{Concurrency: 1, Count: MaxCount + 1}, "count is 10000001"},
		{Config{Concurrency: 1}, "duration is 0s"},
		{Config{Concurrency: 1, Duration: 2 * time.Hour}, "at most 1h0m0s"},
		{Config{Concurrency: 1, Count: 1, Rate: -1}, "rate is -1"},
	} {
		err := tc.cfg.Check()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v, want %q", tc.cfg, err, tc.want)
		}
		if _, err := Run(t.Context(), tc.cfg, nil); err == nil {
			t.Errorf("%+v: Run accepted it", tc.cfg)
		}
	}
	if err := (Config{Concurrency: 1, Count: 1}).Check(); err != nil {
		t.Error(err)
	}
}

// TestRunThrottled: attempts a Call reports as throttled are counted
// apart, cost no call of Count, leave their wait out of the latencies, and
// make the worker wait.
func TestRunThrottled(t *testing.T) {
	var attempts atomic.Int64
	const wait = 30 * time.Millisecond
	start := time.Now()
	res, err := Run(t.Context(), Config{Concurrency: 2, Count: 40}, func(_ context.Context, w, i int) error {
		if attempts.Add(1)%4 == 0 {
			return &Throttled{Wait: wait, Err: status.Error(codes.ResourceExhausted, "slow down")}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Requests != 40 || res.ErrorCount() != 0 || res.Throttled != attempts.Load()-40 || res.Throttled < 10 {
		t.Fatalf("requests %d, errors %v, throttled %d of %d attempts", res.Requests, res.Errors, res.Throttled, attempts.Load())
	}
	if res.Max >= wait {
		t.Errorf("max latency %s includes the waits (%s)", res.Max, wait)
	}
	if took := time.Since(start); took < time.Duration(res.Throttled/2)*wait {
		t.Errorf("%d throttled attempts on 2 workers took %s: the workers did not wait", res.Throttled, took)
	}
}
