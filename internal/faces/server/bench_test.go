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

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	grpcproto "google.golang.org/grpc/encoding/proto"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"

	"github.com/seed0cff8200/cardex/cards/synth"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/codec/apiconv"
	"github.com/seed0cff8200/cardex/internal/codec/toolformat"
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
// DiscoverTools for an admin (top_k 5), rpc=discover-openai the same with
// the tools' definitions and answer in format openai_functions,
// rpc=health grpc.health.v1's Check on
// the same server: its floor. It reports rpc/s, the p50 and p99 latency
// (p50-ns, p99-ns), the allocations and the CPU time per call (allocs/rpc,
// cpu-ns/rpc; the client's are in the same process and counted too).
//
// The diag= runs split rpc=discover's cost into its parts; none of them is
// a path the server serves. diag=retriever is retriever.Discover alone for
// the same requests, in process; diag=handler the DiscoverTools handler
// called in process (the retriever, the conversion of its answer, the
// discovery log); diag=canned the same server answering each query with the
// handler's answer recorded before the run (the interceptors, the codec, the
// transport and the client's decoding of that answer, without the handler);
// diag=nodecode rpc=discover with a client that does not decode the answer.
func BenchmarkGRPC(b *testing.B) {
	for _, n := range []int{1000} {
		b.Run(fmt.Sprintf("cards=%d", n), func(b *testing.B) {
			diag := &diagDiscovery{}
			e := newEnv(b, envOptions{cards: synth.Catalogue(n, 1, "acme"), emb: embed.MustBuiltin(), logMode: discoverylog.QueryRaw,
				wrapDiscovery: func(s pb.DiscoveryServiceServer) pb.DiscoveryServiceServer {
					diag.DiscoveryServiceServer = s
					return diag
				}})
			caller := &pb.Caller{Tenant: "acme", Subject: "admin", Scopes: []string{"*"}}
			var reqs []*pb.DiscoverToolsRequest
			for _, q := range synth.Queries(50, 7) {
				reqs = append(reqs, &pb.DiscoverToolsRequest{Caller: caller, Query: q, TopK: 5})
			}
			b.Run("rpc=discover", func(b *testing.B) {
				loadRPC(b, func(ctx context.Context, i int) error {
					_, err := e.disc.DiscoverTools(ctx, reqs[i%len(reqs)])
					return err
				})
			})
			b.Run("rpc=discover-openai", func(b *testing.B) {
				loadRPC(b, func(ctx context.Context, i int) error {
					r := reqs[i%len(reqs)]
					_, err := e.disc.DiscoverTools(ctx, &pb.DiscoverToolsRequest{Caller: r.Caller, Query: r.Query, TopK: r.TopK, Format: string(toolformat.OpenAIFunctions)})
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
			b.Run("diag=retriever", func(b *testing.B) {
				loadRPC(b, func(ctx context.Context, i int) error {
					r := reqs[i%len(reqs)]
					_, err := e.ret.Discover(ctx, apiconv.DiscoverRequestFromProto(r, apiconv.CallerFromProto(r.Caller)))
					return err
				})
			})
			b.Run("diag=handler", func(b *testing.B) {
				loadRPC(b, func(ctx context.Context, i int) error {
					_, err := diag.DiscoveryServiceServer.DiscoverTools(ctx, reqs[i%len(reqs)])
					return err
				})
			})
			diag.record(b, reqs)
			b.Run("diag=canned", func(b *testing.B) {
				loadRPC(b, func(ctx context.Context, i int) error {
					_, err := e.disc.DiscoverTools(ctx, reqs[i%len(reqs)])
					return err
				})
			})
			diag.canned = nil
			skip := grpc.ForceCodecV2(undecoded{})
			b.Run("diag=nodecode", func(b *testing.B) {
				var bytes atomic.Int64
				loadRPC(b, func(ctx context.Context, i int) error {
					var size int
					err := e.conn.Invoke(ctx, pb.DiscoveryService_DiscoverTools_FullMethodName, reqs[i%len(reqs)], &size, skip)
					bytes.Add(int64(size))
					return err
				})
				b.ReportMetric(float64(bytes.Load())/float64(b.N), "answer-bytes")
			})
		})
	}
}

// diagDiscovery is the DiscoveryService of BenchmarkGRPC's server: the
// real one, or, once record has run, its recorded answers.
type diagDiscovery struct {
	pb.DiscoveryServiceServer
	canned map[string]*pb.DiscoverToolsResponse // by query; read-only while set
}

// record calls the real handler once per request and keeps its answers.
func (d *diagDiscovery) record(b *testing.B, reqs []*pb.DiscoverToolsRequest) {
	canned := map[string]*pb.DiscoverToolsResponse{}
	for _, r := range reqs {
		resp, err := d.DiscoveryServiceServer.DiscoverTools(b.Context(), r)
		if err != nil {
			b.Fatal(err)
		}
		canned[r.GetQuery()] = resp
	}
	d.canned = canned
}

func (d *diagDiscovery) DiscoverTools(ctx context.Context, req *pb.DiscoverToolsRequest) (*pb.DiscoverToolsResponse, error) {
	if resp, ok := d.canned[req.GetQuery()]; ok {
		return resp, nil
	}
	return d.DiscoveryServiceServer.DiscoverTools(ctx, req)
}

// undecoded is the client's protobuf codec for requests; an answer is
// only measured (its size into an *int), not decoded.
type undecoded struct{}

func (undecoded) Name() string { return grpcproto.Name }

func (undecoded) Marshal(v any) (mem.BufferSlice, error) {
	return encoding.GetCodecV2(grpcproto.Name).Marshal(v)
}

func (undecoded) Unmarshal(data mem.BufferSlice, v any) error {
	*v.(*int) = data.Len()
	return nil
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
