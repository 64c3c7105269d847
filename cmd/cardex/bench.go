package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/synth"
	"github.com/seed0cff8200/cardex/internal/access/ratelimit"
	"github.com/seed0cff8200/cardex/internal/codec/apiconv"
	"github.com/seed0cff8200/cardex/internal/ops/loadgen"
	"github.com/seed0cff8200/cardex/internal/ops/ratewait"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
	"github.com/seed0cff8200/cardex/retriever"
)

// Limits of `cardex bench` beyond loadgen's.
const (
	maxBenchQueries     = 10_000
	maxBenchConnections = 64
	maxBenchWriteCards  = 100
	maxBenchWriteRate   = 1000
	maxBenchSynthetic   = 100_000
	benchWriteServer    = "bench"
)

// benchQueries are the built-in queries: requests an agent might make of
// the example catalogue (examples/), and of most others.
var benchQueries = []string{
	"customer wants their money back for order 1234",
	"where is my package",
	"restart a service",
	"create a support ticket",
	"look up a customer by email",
	"cancel an order",
	"list open incidents",
	"deploy the latest release",
	"show the invoice for last month",
	"reset a user's password",
	"search the docs for rate limits",
	"open a pull request",
	"print a shipping label for a return",
	"who is on call",
	"export the sales report",
	"approve a refund",
	"check server health",
	"update the customer's address",
	"find failed payments",
	"roll back a deployment",
}

func benchCmd() *cobra.Command {
	var cf clientFlags
	var who callerFlags
	var (
		concurrency, count, topK, connections, writeCards, synthetic int
		duration                                                     time.Duration
		queriesFile, writeTenant                                     string
		health, allowRemote, keepWrites, waitLimits                  bool
		writeRate                                                    float64
	)
	cmd := &cobra.Command{
		Use:   "bench [--addr HOST:PORT] --tenant T [--scopes S] [-c N] [--duration D | --count N]",
		Short: "Load a running server with DiscoverTools (and health checks, and optionally card writes) and report throughput and latency",
		Long: `Runs DiscoverTools calls against the server at --addr from --concurrency callers at once, each
calling again as soon as it has its answer, for --duration or --count calls, with queries from
--queries (one a line; # comments) or a built-in set, in turn. Then, with --health (the default),
the same for grpc.health.v1.Health/Check: the cost of the gRPC stack alone, the floor under
DiscoverTools. With --write-rate, PutCards of --write-cards cards in the tenant --write-tenant
(server "bench", a bench-only namespace) run beside the discoveries, and those cards are deleted
at the end unless --keep-writes.

With --synthetic N, the tenant --write-tenant is first filled with N cards of the synthetic
catalogue of the retriever's benchmarks (cards/synth; docs/BENCHMARKS.md) and the discoveries,
with that catalogue's queries, go to that tenant; the cards are deleted at the end unless
--keep-writes.

Reports, per RPC: requests, errors by gRPC code, requests per second, and p50/p90/p99/max latency
(within 1%). Progress goes to stderr. Exit status 1 when any request failed.

The server's rate limits apply to the bench like to any caller. When they refuse a call
(ResourceExhausted with a retry delay), bench says which limit refused and which 'cardex serve'
flag lifts it (--rate-limit, --tenant-rate-limit, --max-in-flight), and by default waits the
refusal out and calls again: refusals are counted apart, not as requests or errors, and the QPS is
then the limit's, not the server's capacity (the report says so). --wait-limits=false counts
them as errors instead.

A load generator can take a server down: --addr must be a loopback address unless --allow-remote.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("count") && cmd.Flags().Changed("duration") {
				return usageError("give --duration or --count, not both")
			}
			if cmd.Flags().Changed("count") && count < 1 {
				return usageError("--count %d: it must be between 1 and %d", count, loadgen.MaxCount)
			}
			lc := loadgen.Config{Concurrency: concurrency, Count: count, Duration: duration}
			if err := lc.Check(); err != nil {
				return usageError("--%s", benchFlagOf(err))
			}
			switch {
			case connections < 1 || connections > maxBenchConnections:
				return usageError("--connections %d: it must be between 1 and %d", connections, maxBenchConnections)
			case writeRate < 0 || writeRate > maxBenchWriteRate:
				return usageError("--write-rate %g: it must be between 0 (no writes) and %d a second", writeRate, maxBenchWriteRate)
			case writeCards < 1 || writeCards > maxBenchWriteCards:
				return usageError("--write-cards %d: it must be between 1 and %d", writeCards, maxBenchWriteCards)
			case synthetic < 0 || synthetic > maxBenchSynthetic:
				return usageError("--synthetic %d: it must be between 0 (none) and %d", synthetic, maxBenchSynthetic)
			case synthetic > 0 && who.tenant != writeTenant:
				return usageError("--synthetic cards go to --write-tenant %q, and so do the discoveries: leave out --tenant %q", writeTenant, who.tenant)
			case synthetic == 0 && writeRate > 0 && writeTenant == who.tenant:
				return usageError("--write-tenant %q is the tenant of the discoveries: bench writes go to a bench-only tenant", writeTenant)
			}
			if writeRate > 0 || synthetic > 0 {
				if err := requireTenant(writeTenant); err != nil {
					return usageError("--write-tenant %q must match [A-Za-z0-9_.-]{1,128}", writeTenant)
				}
			}
			if !allowRemote {
				if err := checkLoopback(cf.addr); err != nil {
					return err
				}
			}
			queries := benchQueries
			if synthetic > 0 {
				queries = synth.Queries(50, 7)
			}
			if queriesFile != "" {
				qs, err := readBenchQueries(queriesFile)
				if err != nil {
					return err
				}
				queries = qs
			}

			creds, err := cf.tls.creds()
			if err != nil {
				return err
			}
			conns := make([]*grpc.ClientConn, connections)
			for i := range conns {
				c, err := dial(cf.addr, "--token (CARDEX_TOKEN) or --catalog-token (CARDEX_CATALOG_TOKEN)", creds, false)
				if err != nil {
					return err
				}
				defer c.Close()
				conns[i] = c
			}
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt)
			defer stop()
			// Fail fast, with the CLI's words, when nothing answers.
			hctx, cancel := context.WithTimeout(ctx, cf.timeout)
			_, err = healthpb.NewHealthClient(conns[0]).Check(hctx, &healthpb.HealthCheckRequest{})
			cancel()
			if err != nil {
				return err
			}
			// Each call gets its own timeout and is never cut short by
			// the end of the run (loadgen waits for calls in flight).
			callCtx := func() (context.Context, context.CancelFunc) {
				c, cancel := context.WithTimeout(context.WithoutCancel(ctx), cf.timeout)
				if cf.token != "" {
					c = metadata.AppendToOutgoingContext(c, "authorization", "Bearer "+cf.token)
				}
				return c, cancel
			}
			progress := func(rpc string) func(loadgen.Snapshot) {
				return func(s loadgen.Snapshot) {
					done := fmt.Sprintf("%d requests", s.Requests)
					if count > 0 {
						done = fmt.Sprintf("%d/%d requests", s.Requests, count)
					}
					limited := ""
					if s.Throttled > 0 {
						limited = fmt.Sprintf(", %d refused by rate limits (waited out)", s.Throttled)
					}
					fmt.Fprintf(os.Stderr, "cardex bench: %s: %.0fs, %s, %d errors%s\n", rpc, s.Elapsed.Seconds(), done, s.Errors, limited)
				}
			}
			report := benchReport{Addr: cf.addr, Tenant: who.tenant, Queries: len(queries), TopK: topK, Connections: connections, SyntheticCards: synthetic}
			if synthetic > 0 {
				cat := pb.NewCatalogServiceClient(conns[0])
				keys, err := putSynthetic(ctx, cat, callCtx, writeTenant, synthetic)
				if !keepWrites && len(keys) > 0 {
					defer func() {
						if err := deleteCards(ctx, cat, callCtx, keys); err != nil {
							fmt.Fprintf(os.Stderr, "cardex bench: deleting the synthetic cards of tenant %s: %v\n", writeTenant, err)
						}
					}()
				}
				if err != nil {
					return err
				}
			}
			if count > 0 {
				report.Count = count
			} else {
				report.Duration = duration.String()
			}

			// DiscoverTools, with the writes beside it.
			clients := make([]pb.DiscoveryServiceClient, connections)
			for i, c := range conns {
				clients[i] = pb.NewDiscoveryServiceClient(c)
			}
			caller := who.caller()
			limits := &benchLimits{wait: waitLimits, streak: make([]atomic.Int64, concurrency+1)}
			discover := func(_ context.Context, w, i int) error {
				c, cancel := callCtx()
				defer cancel()
				q := queries[(w+i*concurrency)%len(queries)]
				_, err := clients[w%connections].DiscoverTools(c, &pb.DiscoverToolsRequest{Caller: caller, Query: q, TopK: int32(topK)})
				return limits.handle(w, err)
			}
			var writes *loadgen.Result
			var written bool
			writesDone := make(chan struct{})
			stopWrites := func() {}
			if writeRate > 0 {
				wctx, cancel := context.WithCancel(ctx)
				stopWrites = cancel
				cat := pb.NewCatalogServiceClient(conns[0])
				go func() {
					defer close(writesDone)
					res, _ := loadgen.Run(wctx, loadgen.Config{Concurrency: 1, Duration: loadgen.MaxDuration, Rate: writeRate}, func(_ context.Context, _, i int) error {
						c, cancel := callCtx()
						defer cancel()
						batch := make([]*pb.Card, writeCards)
						for j := range batch {
							batch[j] = &pb.Card{Tenant: writeTenant, Server: benchWriteServer, Name: fmt.Sprintf("bench_tool_%d", j),
								Summary: fmt.Sprintf("A bench-only tool that cardex bench writes and deletes (write %d).", i)}
						}
						_, err := cat.PutCards(c, &pb.PutCardsRequest{Cards: batch})
						if err == nil {
							written = true
						}
						return limits.handle(concurrency, err)
					})
					writes = &res
				}()
			} else {
				close(writesDone)
			}
			fmt.Fprintf(os.Stderr, "cardex bench: DiscoverTools on %s, %d callers, %s\n", cf.addr, concurrency, benchLength(count, duration))
			res, runErr := loadgen.Run(ctx, loadgen.Config{Concurrency: concurrency, Count: count, Duration: duration, Progress: progress("DiscoverTools")}, discover)
			stopWrites()
			<-writesDone
			report.add("DiscoverTools", concurrency, res)
			if writes != nil {
				report.add("CatalogService/PutCards (beside DiscoverTools)", 1, *writes)
				if written && !keepWrites {
					keys := make([]cards.Key, writeCards)
					for j := range keys {
						keys[j] = cards.Key{Tenant: writeTenant, Server: benchWriteServer, Name: fmt.Sprintf("bench_tool_%d", j)}
					}
					if err := deleteCards(ctx, pb.NewCatalogServiceClient(conns[0]), callCtx, keys); err != nil {
						fmt.Fprintf(os.Stderr, "cardex bench: deleting the bench cards of tenant %s: %v\n", writeTenant, err)
					}
				}
			}

			// The floor: the standard health check on the same server.
			if health && runErr == nil {
				hc := make([]healthpb.HealthClient, connections)
				for i, c := range conns {
					hc[i] = healthpb.NewHealthClient(c)
				}
				fmt.Fprintf(os.Stderr, "cardex bench: grpc.health.v1.Health/Check, %d callers, %s\n", concurrency, benchLength(count, duration))
				res, runErr = loadgen.Run(ctx, loadgen.Config{Concurrency: concurrency, Count: count, Duration: duration, Progress: progress("Health/Check")},
					func(_ context.Context, w, _ int) error {
						c, cancel := callCtx()
						defer cancel()
						_, err := hc[w%connections].Check(c, &healthpb.HealthCheckRequest{})
						return err
					})
				report.add("grpc.health.v1.Health/Check", concurrency, res)
			}
			if runErr != nil && !errors.Is(runErr, context.Canceled) {
				return runErr
			}
			report.RateLimited = limits.report()
			if err := report.print(cf.output); err != nil {
				return err
			}
			if failed, total := report.failed(); failed > 0 {
				return exitError{code: 1, msg: fmt.Sprintf("%d of %d requests failed", failed, total)}
			}
			return nil
		},
	}
	cf.register(cmd)
	// With --synthetic the discoveries go to the write tenant: set it
	// before the caller's check that --tenant is given.
	addCheck(cmd, func() error {
		if synthetic > 0 && who.tenant == "" {
			who.tenant = writeTenant
		}
		return nil
	})
	who.register(cmd)
	f := cmd.Flags()
	f.IntVarP(&concurrency, "concurrency", "c", 16, fmt.Sprintf("callers at once, each calling again when answered (at most %d)", loadgen.MaxConcurrency))
	f.DurationVarP(&duration, "duration", "d", 10*time.Second, fmt.Sprintf("how long to call each RPC (at most %s)", loadgen.MaxDuration))
	f.IntVarP(&count, "count", "n", 0, fmt.Sprintf("call each RPC this many times instead of for --duration (at most %d)", loadgen.MaxCount))
	f.IntVar(&topK, "top-k", 5, "top_k of the discoveries")
	f.StringVar(&queriesFile, "queries", "", fmt.Sprintf("file of queries, one a line, # comments (at most %d, each at most %d characters); default: a built-in set of %d", maxBenchQueries, retriever.MaxQueryLen, len(benchQueries)))
	f.IntVar(&connections, "connections", 1, fmt.Sprintf("gRPC connections the callers share, round robin (at most %d)", maxBenchConnections))
	f.BoolVar(&health, "health", true, "also measure grpc.health.v1.Health/Check the same way, after the discoveries")
	f.Float64Var(&writeRate, "write-rate", 0, fmt.Sprintf("PutCards a second beside the discoveries, in --write-tenant (0: none; at most %d); needs a --token that may write, if the server asks for one", maxBenchWriteRate))
	f.IntVar(&writeCards, "write-cards", 3, fmt.Sprintf("cards per PutCards (at most %d)", maxBenchWriteCards))
	f.StringVar(&writeTenant, "write-tenant", "cardex-bench", "bench-only tenant of the writes (server \"bench\"; never the tenant of the discoveries)")
	f.BoolVar(&keepWrites, "keep-writes", false, "keep the bench cards written with --write-rate (they are deleted at the end by default)")
	f.IntVar(&synthetic, "synthetic", 0, fmt.Sprintf("first fill --write-tenant with this many cards of the benchmarks' synthetic catalogue and discover there (at most %d)", maxBenchSynthetic))
	f.BoolVar(&allowRemote, "allow-remote", false, "allow an --addr that is not a loopback address")
	f.BoolVar(&waitLimits, "wait-limits", true, "wait out the server's rate-limit refusals and call again (counted apart); false: count them as errors")
	return cmd
}

// benchFlagOf turns a loadgen limit error into the flag's words.
func benchFlagOf(err error) string {
	msg := err.Error()
	for _, f := range []string{"concurrency", "count", "duration"} {
		if strings.HasPrefix(msg, f+" ") {
			return f + strings.TrimPrefix(msg, f)
		}
	}
	return msg
}

func benchLength(count int, d time.Duration) string {
	if count > 0 {
		return fmt.Sprintf("%d calls", count)
	}
	return d.String()
}

// checkLoopback refuses an address whose host is not loopback (a name
// must resolve to loopback addresses only).
func checkLoopback(addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usageError("--addr %q: %v", addr, err)
	}
	refuse := usageError("--addr %s is not a loopback address: a load generator can overload a server in use; pass --allow-remote to bench it anyway", addr)
	if ip := net.ParseIP(host); ip != nil {
		if !ip.IsLoopback() {
			return refuse
		}
		return nil
	}
	if host == "localhost" {
		return nil
	}
	ips, err := net.LookupIP(host)
	if err != nil || len(ips) == 0 {
		return usageError("--addr %s: %v", addr, err)
	}
	for _, ip := range ips {
		if !ip.IsLoopback() {
			return refuse
		}
	}
	return nil
}

// readBenchQueries reads a queries file: one query a line, blank lines and
// lines starting with # skipped.
func readBenchQueries(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--queries: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for line := 1; sc.Scan(); line++ {
		q := strings.TrimSpace(sc.Text())
		if q == "" || strings.HasPrefix(q, "#") {
			continue
		}
		if n := utf8.RuneCountInString(q); n > retriever.MaxQueryLen {
			return nil, fmt.Errorf("--queries %s:%d: the query is %d characters; the limit is %d", path, line, n, retriever.MaxQueryLen)
		}
		if len(out) == maxBenchQueries {
			return nil, fmt.Errorf("--queries %s: more than %d queries", path, maxBenchQueries)
		}
		out = append(out, q)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--queries %s: %w", path, err)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("--queries %s: no queries (one a line; lines starting with # are comments)", path)
	}
	return out, nil
}

// putSynthetic writes n cards of the synthetic catalogue into tenant, in
// batches of 1,000, and returns the keys written so far.
func putSynthetic(ctx context.Context, cat pb.CatalogServiceClient, callCtx func() (context.Context, context.CancelFunc), tenant string, n int) ([]cards.Key, error) {
	cs := synth.Catalogue(n, 1, tenant)
	var keys []cards.Key
	for start := 0; start < len(cs); start += 1000 {
		batch := cs[start:min(start+1000, len(cs))]
		req := &pb.PutCardsRequest{}
		for i := range batch {
			req.Cards = append(req.Cards, apiconv.CardToProto(&batch[i], true))
		}
		err := ratewait.Call(ctx, nil, func() error {
			c, cancel := callCtx()
			defer cancel()
			_, err := cat.PutCards(c, req)
			return err
		})
		if err != nil {
			return keys, fmt.Errorf("writing the synthetic cards %d–%d: %w", start+1, start+len(batch), err)
		}
		for i := range batch {
			keys = append(keys, batch[i].Key())
		}
		fmt.Fprintf(os.Stderr, "cardex bench: %d of %d synthetic cards written to tenant %s\n", start+len(batch), n, tenant)
		if ctx.Err() != nil {
			return keys, ctx.Err()
		}
	}
	return keys, nil
}

// deleteCards deletes cards, eight at a time.
func deleteCards(ctx context.Context, cat pb.CatalogServiceClient, callCtx func() (context.Context, context.CancelFunc), keys []cards.Key) error {
	if len(keys) > 100 {
		fmt.Fprintf(os.Stderr, "cardex bench: deleting %d cards\n", len(keys))
	}
	var next atomic.Int64
	res, err := loadgen.Run(context.WithoutCancel(ctx), loadgen.Config{Concurrency: min(8, len(keys)), Count: len(keys)}, func(context.Context, int, int) error {
		k := keys[next.Add(1)-1]
		return ratewait.Call(ctx, nil, func() error {
			c, cancel := callCtx()
			defer cancel()
			_, err := cat.DeleteCard(c, &pb.DeleteCardRequest{Tenant: k.Tenant, Server: k.Server, Name: k.Name})
			return err
		})
	})
	if err != nil {
		return err
	}
	if n := res.ErrorCount(); n > 0 {
		return fmt.Errorf("%d of %d deletes failed (%v)", n, len(keys), res.Errors)
	}
	return nil
}

type benchLatency struct {
	P50 float64 `json:"p50"`
	P90 float64 `json:"p90"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

type benchRow struct {
	RPC         string           `json:"rpc"`
	Concurrency int              `json:"concurrency"`
	Requests    int64            `json:"requests"`
	Errors      map[string]int64 `json:"errors"`
	// Throttled are the calls the server's rate limits refused and the
	// bench waited out (not in Requests).
	Throttled int64        `json:"throttled,omitempty"`
	ElapsedS  float64      `json:"elapsed_s"`
	QPS       float64      `json:"qps"`
	LatencyMS benchLatency `json:"latency_ms"`
}

type benchReport struct {
	Addr        string `json:"addr"`
	Tenant      string `json:"tenant"`
	Queries     int    `json:"queries"`
	TopK        int    `json:"top_k"`
	Connections int    `json:"connections"`
	Duration    string `json:"duration,omitempty"`
	Count       int    `json:"count,omitempty"`
	// SyntheticCards is --synthetic.
	SyntheticCards int        `json:"synthetic_cards,omitempty"`
	Results        []benchRow `json:"results"`
	// RateLimited, when the server's rate limits refused calls, says
	// which and what lifts them.
	RateLimited *benchLimited `json:"rate_limited,omitempty"`
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

func (r *benchReport) add(rpc string, concurrency int, res loadgen.Result) {
	r.Results = append(r.Results, benchRow{RPC: rpc, Concurrency: concurrency, Requests: res.Requests, Errors: res.Errors, Throttled: res.Throttled,
		ElapsedS: res.Elapsed.Seconds(), QPS: res.QPS,
		LatencyMS: benchLatency{P50: ms(res.P50), P90: ms(res.P90), P99: ms(res.P99), Max: ms(res.Max)}})
}

func (r *benchReport) failed() (failed, total int64) {
	for _, row := range r.Results {
		total += row.Requests
		for _, n := range row.Errors {
			failed += n
		}
	}
	return failed, total
}

func (r *benchReport) print(output string) error {
	if output == "json" {
		return printPlainJSON(r)
	}
	var rows [][]string
	var errLines []string
	for _, row := range r.Results {
		var failed int64
		var byCode []string
		for code, n := range row.Errors {
			failed += n
			byCode = append(byCode, fmt.Sprintf("%d %s", n, code))
		}
		if len(byCode) > 0 {
			slices.Sort(byCode)
			errLines = append(errLines, fmt.Sprintf("errors of %s: %s", row.RPC, strings.Join(byCode, ", ")))
		}
		l := row.LatencyMS
		rows = append(rows, []string{row.RPC, fmt.Sprint(row.Concurrency), fmt.Sprint(row.Requests), fmt.Sprint(failed),
			fmt.Sprintf("%.0f", row.QPS), fmt.Sprintf("%.2fms", l.P50), fmt.Sprintf("%.2fms", l.P90), fmt.Sprintf("%.2fms", l.P99), fmt.Sprintf("%.2fms", l.Max)})
	}
	if err := table([]string{"RPC", "CONCURRENCY", "REQUESTS", "ERRORS", "QPS", "P50", "P90", "P99", "MAX"}, rows); err != nil {
		return err
	}
	for _, l := range errLines {
		fmt.Println(l)
	}
	if rl := r.RateLimited; rl != nil {
		fmt.Println()
		for _, row := range r.Results {
			if row.Throttled > 0 {
				fmt.Printf("%s: %d calls refused by the server's rate limits were waited out (not counted above): its QPS is the limits', not the server's capacity\n", row.RPC, row.Throttled)
			}
		}
		fmt.Printf("rate limited by %s; %s\n", strings.Join(rl.Limits, " and "), rl.Advice)
	}
	return nil
}

// serveLimitFlags are the flags of 'cardex serve' that set each of its
// limits, by the scope a refusal names.
var serveLimitFlags = map[string]string{"caller": "--rate-limit", "tenant": "--tenant-rate-limit", "in_flight": "--max-in-flight"}

// benchLimits notes the rate-limit refusals of a run and turns them into
// waits (loadgen.Throttled) when the bench waits limits out.
type benchLimits struct {
	wait bool
	// streak counts each worker's refusals in a row (the discoveries'
	// workers, then the writes'), for the backoff.
	streak []atomic.Int64

	mu      sync.Mutex
	byScope map[string]ratelimit.Denial
}

// handle is the error of worker w's call as the load generator takes it:
// a rate-limit refusal is noted (and said on stderr the first time its
// limit refuses), and waited out when the bench does so, longer while the
// worker's refusals go on.
func (l *benchLimits) handle(w int, err error) error {
	d, ok := ratelimit.FromError(err)
	if !ok {
		l.streak[w].Store(0)
		return err
	}
	l.mu.Lock()
	if l.byScope == nil {
		l.byScope = map[string]ratelimit.Denial{}
	}
	if _, seen := l.byScope[d.Scope]; !seen {
		l.byScope[d.Scope] = d
		then := "waiting its refusals out (--wait-limits=false counts them as errors)"
		if !l.wait {
			then = "its refusals count as errors"
		}
		fmt.Fprintf(os.Stderr, "cardex bench: the server's %s refused a call: %s; %s\n", limitName(d), then, liftAdvice([]string{d.Scope}))
	}
	l.mu.Unlock()
	if l.wait {
		return &loadgen.Throttled{Wait: ratewait.Backoff(d.RetryAfter, int(l.streak[w].Add(1)-1)), Err: err}
	}
	return err
}

// benchLimited is the report's word on the limits met.
type benchLimited struct {
	Limits []string `json:"limits"`
	Advice string   `json:"advice"`
}

func (l *benchLimits) report() *benchLimited {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.byScope) == 0 {
		return nil
	}
	scopes := slices.Sorted(maps.Keys(l.byScope))
	out := &benchLimited{Advice: liftAdvice(scopes)}
	for _, s := range scopes {
		out.Limits = append(out.Limits, limitName(l.byScope[s]))
	}
	return out
}

// limitName says which limit a refusal names, with its value.
func limitName(d ratelimit.Denial) string {
	switch d.Scope {
	case "caller", "tenant":
		return fmt.Sprintf("per-%s rate limit (%g %s calls a second, %s)", d.Scope, d.Limit, d.Class, serveLimitFlags[d.Scope])
	case "in_flight":
		return fmt.Sprintf("limit of calls in flight per caller (%g, %s)", d.Limit, serveLimitFlags[d.Scope])
	}
	return "rate limits"
}

// liftAdvice names the flags of 'cardex serve' that lift the limits of the
// scopes (all of them when a scope is unknown: a server that does not name
// its limits).
func liftAdvice(scopes []string) string {
	var flags []string
	for _, s := range scopes {
		switch s {
		case "caller", "tenant":
			flags = append(flags, "--rate-limit 0", "--tenant-rate-limit 0")
		case "in_flight":
			flags = append(flags, "--max-in-flight 0")
		default:
			flags = append(flags, "--rate-limit 0", "--tenant-rate-limit 0", "--max-in-flight 0")
		}
	}
	slices.Sort(flags)
	return "to measure the server's capacity rather than its limits, start it with `cardex serve " + strings.Join(slices.Compact(flags), " ") + "`"
}
