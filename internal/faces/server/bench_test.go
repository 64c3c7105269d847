package server_test

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/seed0cff8200/cardex/cards/synth"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/telemetry/discoverylog"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// benchCallers is the number of concurrent callers of BenchmarkGRPC, as in
// docs/BENCHMARKS.md's cardex bench runs.
const benchCallers = 32

// BenchmarkGRPC measures the server over loopback gRPC, in process: the
// synthetic catalogue (cards/synth) with the built-in embedder and the
// discovery log on (raw queries), no rate limits, benchCallers callers on
// one connection each calling again when answered. rpc=discover is
// DiscoverTools for an admin (top_k 5), rpc=health grpc.health.v1's Check on
// the same server: its floor. It reports rpc/s, the p50 and p99 latency
// (p50-ns, p99-ns), the allocations and the CPU time per call (allocs/rpc,
// cpu-ns/rpc; the client's are in the same process and counted too).
func BenchmarkGRPC(b *testing.B) {
	for _, n := range []int{1000} {
		b.Run(fmt.Sprintf("cards=%d", n), func(b *testing.B) {
			e := newEnv(b, envOptions{cards: synth.Catalogue(n, 1, "acme"), emb: embed.MustBuiltin(), logMode: discoverylog.QueryRaw})
			queries := synth.Queries(50, 7)
			caller := &pb.Caller{Tenant: "acme", Subject: "admin", Scopes: []string{"*"}}
			b.Run("rpc=discover", func(b *testing.B) {
				loadRPC(b, func(ctx context.Context, i int) error {
					_, err := e.disc.DiscoverTools(ctx, &pb.DiscoverToolsRequest{Caller: caller, Query: queries[i%len(queries)], TopK: 5})
					return err
				})
			})
			health := healthpb.NewHealthClient(e.conn)
			b.Run("rpc=health", func(b *testing.B) {
				loadRPC(b, func(ctx context.Context, _ int) error {
					_, err := health.Check(ctx, &healthpb.HealthCheckRequest{})
					return err
				})
			})
		})
	}
}

// loadRPC makes b.N calls from benchCallers goroutines and reports their
// rate, latency and allocations.
func loadRPC(b *testing.B, call func(ctx context.Context, i int) error) {
	ctx := context.Background()
	var next atomic.Int64
	took := make([][]time.Duration, benchCallers)
	var failed atomic.Value
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	var ru0, ru1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for w := range benchCallers {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N {
					return
				}
				t0 := time.Now()
				if err := call(ctx, i); err != nil {
					failed.Store(err)
					return
				}
				took[w] = append(took[w], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	runtime.ReadMemStats(&ms1)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	all := slices.Sorted(slices.Values(slices.Concat(took...)))
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "rpc/s")
	b.ReportMetric(float64(all[len(all)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(all[len(all)*99/100].Nanoseconds()), "p99-ns")
	b.ReportMetric(float64(ms1.Mallocs-ms0.Mallocs)/float64(b.N), "allocs/rpc")
	cpu := ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano()
	b.ReportMetric(float64(cpu)/float64(b.N), "cpu-ns/rpc") // server and client
}
