// Package loadgen runs a call concurrently for a duration or a count, paced
// or as fast as it answers, and measures it: requests, errors by gRPC code,
// throughput and latency quantiles (a log-linear histogram, within 1%).
// `cardex bench` drives it with gRPC calls.
package loadgen

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Limits of a Config.
const (
	MaxConcurrency = 1024
	MaxDuration    = time.Hour
	MaxCount       = 10_000_000
	MaxRate        = 100_000 // calls per second
)

// Config says how to run a call.
type Config struct {
	// Concurrency is the number of workers, each making one call at a
	// time (1..MaxConcurrency).
	Concurrency int
	// Count, when > 0, is the number of calls to make (at most MaxCount);
	// otherwise the workers call until Duration has passed (at most
	// MaxDuration). Calls in flight at the end are waited for and counted.
	Count    int
	Duration time.Duration
	// Rate, when > 0, paces the calls of all workers together to at most
	// Rate a second (at most MaxRate), the first one at once.
	Rate float64
	// Progress, when set, is called every ProgressEvery (default 1 s)
	// while the run lasts, from one goroutine.
	Progress      func(Snapshot)
	ProgressEvery time.Duration
}

// Check returns an error naming the field and the limit when cfg is out of
// bounds.
func (cfg Config) Check() error {
	switch {
	case cfg.Concurrency < 1 || cfg.Concurrency > MaxConcurrency:
		return fmt.Errorf("concurrency is %d; it must be between 1 and %d", cfg.Concurrency, MaxConcurrency)
	case cfg.Count < 0 || cfg.Count > MaxCount:
		return fmt.Errorf("count is %d; it must be between 1 and %d", cfg.Count, MaxCount)
	case cfg.Count == 0 && (cfg.Duration <= 0 || cfg.Duration > MaxDuration):
		return fmt.Errorf("duration is %s; it must be more than 0 and at most %s", cfg.Duration, MaxDuration)
	case cfg.Rate < 0 || cfg.Rate > MaxRate:
		return fmt.Errorf("rate is %g a second; it must be between 0 (unpaced) and %d", cfg.Rate, MaxRate)
	}
	return nil
}

// Call is one request of worker; i counts the worker's calls from 0. Its
// error's gRPC code (status.Code) is recorded, unless it is a *Throttled.
type Call func(ctx context.Context, worker, i int) error

// Throttled is what a Call returns when the server refused it for a rate
// limit and the run is to wait it out: the attempt is counted apart
// (Result.Throttled), not as a request, its latency is not recorded, and the
// worker waits Wait before its next call (in count mode the attempt does not
// use up one of Count's calls).
type Throttled struct {
	Wait time.Duration
	Err  error // the refusal
}

func (t *Throttled) Error() string { return "throttled: " + t.Err.Error() }

func (t *Throttled) Unwrap() error { return t.Err }

// Snapshot is the progress of a run.
type Snapshot struct {
	Elapsed   time.Duration
	Requests  int64
	Errors    int64
	Throttled int64
}

// Result is what a run measured.
type Result struct {
	Requests int64
	// Errors counts the failed calls by gRPC code name ("Unavailable").
	Errors map[string]int64
	// Throttled counts the attempts refused for a rate limit and waited
	// out (see Throttled); they are not in Requests.
	Throttled int64
	Elapsed   time.Duration
	// QPS is Requests / Elapsed.
	QPS                float64
	P50, P90, P99, Max time.Duration
}

// ErrorCount is the number of failed calls.
func (r Result) ErrorCount() int64 {
	var n int64
	for _, c := range r.Errors {
		n += c
	}
	return n
}

// Run runs call as cfg says and measures it. It returns early when ctx ends,
// with what was measured until then.
func Run(ctx context.Context, cfg Config, call Call) (Result, error) {
	if err := cfg.Check(); err != nil {
		return Result{}, err
	}
	var (
		h         Histogram
		tickets   atomic.Int64 // calls started, in count mode
		requests  atomic.Int64
		failed    atomic.Int64
		throttled atomic.Int64
		byCode    [17]atomic.Int64 // codes.OK .. codes.Unauthenticated
	)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	if cfg.Count == 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(runCtx, cfg.Duration)
		defer cancel()
	}
	var pace <-chan time.Time
	if cfg.Rate > 0 {
		pace = newPacer(runCtx, cfg.Rate)
	}

	start := time.Now()
	var wg sync.WaitGroup
	for w := range cfg.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				if cfg.Count > 0 && !take(&tickets, int64(cfg.Count)) {
					return
				}
				if pace != nil {
					select {
					case <-runCtx.Done():
						return
					case <-pace:
					}
				}
				if runCtx.Err() != nil {
					return
				}
				// The call runs under ctx, not runCtx: a call in flight
				// at the end of the duration finishes and is counted.
				t0 := time.Now()
				err := call(ctx, w, i)
				var th *Throttled
				if errors.As(err, &th) {
					throttled.Add(1)
					if cfg.Count > 0 {
						tickets.Add(-1)
					}
					t := time.NewTimer(th.Wait)
					select {
					case <-runCtx.Done():
						t.Stop()
						return
					case <-t.C:
					}
					continue
				}
				h.Record(time.Since(t0))
				requests.Add(1)
				if err != nil {
					c := status.Code(err)
					if int(c) >= len(byCode) {
						c = codes.Unknown
					}
					byCode[c].Add(1)
					failed.Add(1)
				}
			}
		}()
	}
	done := make(chan struct{})
	if cfg.Progress != nil {
		every := cfg.ProgressEvery
		if every <= 0 {
			every = time.Second
		}
		go func() {
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-done:
					return
				case <-t.C:
					cfg.Progress(Snapshot{Elapsed: time.Since(start), Requests: requests.Load(), Errors: failed.Load(), Throttled: throttled.Load()})
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	elapsed := time.Since(start)

	res := Result{Requests: requests.Load(), Errors: map[string]int64{}, Elapsed: elapsed, Throttled: throttled.Load(),
		P50: h.Quantile(0.50), P90: h.Quantile(0.90), P99: h.Quantile(0.99), Max: h.Max()}
	if elapsed > 0 {
		res.QPS = float64(res.Requests) / elapsed.Seconds()
	}
	for c := range byCode {
		if n := byCode[c].Load(); n > 0 {
			res.Errors[codes.Code(c).String()] = n
		}
	}
	return res, ctx.Err()
}

// take takes one of n tickets, or says there is none left. It never counts
// past n, so a ticket given back (a throttled attempt's) is there for the
// workers still running.
func take(tickets *atomic.Int64, n int64) bool {
	for {
		t := tickets.Load()
		if t >= n {
			return false
		}
		if tickets.CompareAndSwap(t, t+1) {
			return true
		}
	}
}

// newPacer sends a tick at once and then rate times a second until ctx
// ends; ticks not taken are not saved up beyond one.
func newPacer(ctx context.Context, rate float64) <-chan time.Time {
	out := make(chan time.Time, 1)
	out <- time.Now()
	t := time.NewTicker(time.Duration(float64(time.Second) / rate))
	go func() {
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				select {
				case out <- now:
				default:
				}
			}
		}
	}()
	return out
}

// Histogram counts durations in log-linear buckets: exact below 128 ns,
// then 128 buckets per power of two, so a quantile is within 1% of the
// true value. The zero value is empty; it is safe for concurrent use.
type Histogram struct {
	counts [(64 - subBits + 1) << subBits]atomic.Int64
	total  atomic.Int64
	max    atomic.Int64
}

const subBits = 7

func bucketOf(v uint64) int {
	if v < 1<<subBits {
		return int(v)
	}
	e := bits.Len64(v) - 1 // 2^e <= v < 2^(e+1), e >= subBits
	return (e-subBits+1)<<subBits | int((v>>(e-subBits))&(1<<subBits-1))
}

// bucketMid is the middle of bucket i's range.
func bucketMid(i int) uint64 {
	if i < 1<<subBits {
		return uint64(i)
	}
	e := i>>subBits + subBits - 1
	lo := uint64(1)<<e | uint64(i&(1<<subBits-1))<<(e-subBits)
	width := uint64(1) << (e - subBits)
	return lo + width/2
}

// Record counts one duration (negative ones as 0).
func (h *Histogram) Record(d time.Duration) {
	v := max(int64(d), 0)
	h.counts[bucketOf(uint64(v))].Add(1)
	h.total.Add(1)
	for {
		m := h.max.Load()
		if v <= m || h.max.CompareAndSwap(m, v) {
			return
		}
	}
}

// Count is the number of durations recorded.
func (h *Histogram) Count() int64 { return h.total.Load() }

// Max is the largest duration recorded, exactly.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max.Load()) }

// Quantile returns the q-quantile (0 < q <= 1) of the recorded durations:
// the middle of the bucket holding the value of rank ceil(q·n), never more
// than Max; 0 when nothing was recorded.
func (h *Histogram) Quantile(q float64) time.Duration {
	n := h.total.Load()
	if n == 0 {
		return 0
	}
	rank := int64(q * float64(n))
	if float64(rank) < q*float64(n) {
		rank++
	}
	rank = min(max(rank, 1), n)
	var seen int64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen >= rank {
			return min(time.Duration(bucketMid(i)), h.Max())
		}
	}
	return h.Max()
}
