package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/postgres"
	"github.com/seed0cff8200/cardex/cards/synth"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/codec/apiconv"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
	"github.com/seed0cff8200/cardex/retriever"
)

// BenchmarkPlatform measures tenant residency at platform scale
// (docs/SCALING.md): a synthetic catalogue of CARDEX_SCALE_CARDS cards
// (default 1,000,000) over CARDEX_SCALE_TENANTS tenants (default 5,000,
// skewed sizes: synth.Platform) in the PostgreSQL with pgvector named by
// CARDEX_SCALE_DATABASE_URL, schema cardex_scale_CARDS_TENANTS (loaded
// once, kept for later runs). It measures one replica holding everything (restart to
// serving, live heap, peak RSS, p50/p99 of direct calls), then three
// replicas with residency behind the documented nginx configuration (each
// one's live heap and peak RSS, the first-request latency of cold tenants
// of about 1,000 cards, p50/p99 through the proxy). It is a measurement,
// not a test: it runs only with -bench and the variable set.
//
//	CARDEX_SCALE_DATABASE_URL=postgres://... go test -run '^$' -bench Platform -benchtime 1x -timeout 4h ./cmd/cardex/
func BenchmarkPlatform(b *testing.B) {
	url := os.Getenv("CARDEX_SCALE_DATABASE_URL")
	if url == "" {
		b.Skip("CARDEX_SCALE_DATABASE_URL is not set (PostgreSQL with pgvector)")
	}
	total, nTenants := envInt(b, "CARDEX_SCALE_CARDS", 1_000_000), envInt(b, "CARDEX_SCALE_TENANTS", 5_000)
	budget := envOr("CARDEX_SCALE_BUDGET", "4GiB")
	schema := fmt.Sprintf("cardex_scale_%d_%d", total, nTenants)
	tenants := synth.Platform(total, nTenants, 10_000, 1)
	bin := buildBinary(b)
	db := []string{"--database-url", url, "--database-schema", schema}
	if out, err := exec.Command(bin, append([]string{"migrate", "up"}, db...)...).CombinedOutput(); err != nil {
		b.Fatalf("migrate up: %v\n%s", err, out)
	}
	loadPlatform(b, url, schema, tenants)
	if os.Getenv("CARDEX_SCALE_LOAD_ONLY") != "" {
		return // CARDEX_SCALE_LOAD_ONLY: load the catalogue for a later run
	}

	// The requests: tenants drawn by size (a big tenant gets more
	// traffic), queries of the synthetic vocabulary, every tool visible.
	rng := rand.New(rand.NewSource(7))
	queries := synth.Queries(64, 11)
	var reqs []*pb.DiscoverToolsRequest
	for range 2000 {
		tn := tenants[rng.Intn(len(tenants))]
		reqs = append(reqs, &pb.DiscoverToolsRequest{Caller: &pb.Caller{Tenant: tn.ID, Subject: "bench", Scopes: []string{"*"}},
			Query: queries[rng.Intn(len(queries))]})
	}
	common := append([]string{"--store", "postgres", "--data-dir", "", "--rate-limit", "0", "--console=false", "--query-log", "off", "--sync-interval", "5s"}, db...)

	// One replica holding everything.
	var whole *platformReplica
	for run := range 2 { // the first run embeds and stores every vector; the second is the restart
		if whole != nil {
			whole.stop(b)
		}
		whole = startPlatformReplica(b, bin, common)
		b.Logf("one replica, run %d: serving after %v", run+1, whole.ready.Round(time.Millisecond))
	}
	direct := latencies(b, whole.grpc, reqs)
	wholeHeap, wholeRSS := whole.memory(b)
	b.Logf("one replica holding %d cards: live heap %s (%s a card), peak RSS %s; direct p50 %v p99 %v",
		total, mib(wholeHeap), kib(wholeHeap/int64(total)), mib(wholeRSS), direct.p50, direct.p99)
	whole.stop(b)

	// Three resident replicas behind nginx.
	nginx := os.Getenv("CARDEX_NGINX")
	if nginx == "" {
		nginx = "/usr/sbin/nginx"
	}
	var reps []*platformReplica
	var grpcs, https []string
	for range 3 {
		r := startPlatformReplica(b, bin, append(slices.Clone(common), "--memory-budget", budget))
		reps = append(reps, r)
		grpcs, https = append(grpcs, r.grpc), append(https, r.http)
	}
	dir := b.TempDir()
	proxy, proxyHTTP := freePort(b), freePort(b)
	conf := nginxConfig(b, dir, proxy, proxyHTTP, grpcs, https)
	ng := startNginx(b, nginx, conf)
	defer stopNginx(ng)
	time.Sleep(500 * time.Millisecond)

	// Cold tenants of about 1,000 cards: the first request waits for the load.
	var cold []time.Duration
	for _, tn := range tenants {
		if tn.Cards >= 900 && tn.Cards <= 1100 && len(cold) < 15 {
			req := &pb.DiscoverToolsRequest{Caller: &pb.Caller{Tenant: tn.ID, Subject: "bench", Scopes: []string{"*"}}, Query: queries[0]}
			cold = append(cold, latencies(b, proxy, []*pb.DiscoverToolsRequest{req}).p50)
		}
	}
	slices.Sort(cold)
	// Warm every tenant once, then the same requests as the direct run.
	var warm []*pb.DiscoverToolsRequest
	for _, tn := range tenants {
		warm = append(warm, &pb.DiscoverToolsRequest{Caller: &pb.Caller{Tenant: tn.ID, Subject: "bench", Scopes: []string{"*"}}, Query: queries[1]})
	}
	warmed := latencies(b, proxy, warm)
	proxied := latencies(b, proxy, reqs)
	b.Logf("cold tenants of ~1,000 cards, first request: median %v, max %v (%d tenants)", cold[len(cold)/2], cold[len(cold)-1], len(cold))
	b.Logf("first request of every tenant through nginx: p50 %v p99 %v", warmed.p50, warmed.p99)
	b.Logf("through nginx: p50 %v p99 %v (%.2f× / %.2f× direct to the whole replica)", proxied.p50, proxied.p99,
		float64(proxied.p50)/float64(direct.p50), float64(proxied.p99)/float64(direct.p99))
	for i, r := range reps {
		heap, rss := r.memory(b)
		fams := scrapeMetrics(b, "http://"+r.http+"/metrics")
		b.Logf("replica %d: %v tenants, %v cards (estimated %s), %v evictions; live heap %s (%.0f %% of the whole replica's), peak RSS %s",
			i, metricValue(fams, "cardex_resident_tenants"), metricValue(fams, "cardex_resident_cards"),
			mib(int64(metricValue(fams, "cardex_resident_bytes"))), metricValue(fams, "cardex_tenant_evictions_total"),
			mib(heap), 100*float64(heap)/float64(wholeHeap), mib(rss))
		b.ReportMetric(float64(heap)/float64(wholeHeap), fmt.Sprintf("heap-ratio-replica%d", i))
		r.stop(b)
	}
	b.ReportMetric(float64(proxied.p50)/float64(direct.p50), "p50-proxy/direct")
	b.ReportMetric(float64(cold[len(cold)/2].Milliseconds()), "cold-1k-ms")
}

func envInt(b *testing.B, name string, def int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("%s=%q: want a positive number", name, v)
		}
		return n
	}
	return def
}

func mib(n int64) string { return fmt.Sprintf("%.0f MiB", float64(n)/(1<<20)) }
func kib(n int64) string { return fmt.Sprintf("%.2f KiB", float64(n)/(1<<10)) }

// loadPlatform writes the platform's cards into the schema unless they are
// there already, four tenants at a time.
func loadPlatform(b *testing.B, url, schema string, tenants []synth.Tenant) {
	st, err := postgres.Open(postgres.Config{URL: url, Schema: schema, MaxConns: 8})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	total := 0
	for _, tn := range tenants {
		total += tn.Cards
	}
	emb, err := embed.Builtin()
	if err != nil {
		b.Fatal(err)
	}
	// Loaded already: the cards, and the vectors unless the text a card's
	// vector is computed from has changed since (then only the vectors are
	// written again, without the vector index, which the replica's start
	// builds again: updating a million indexed vectors one by one would
	// take hours).
	stale := false
	last := tenants[len(tenants)-1]
	if page, err := st.List(ctx, cards.ListQuery{Tenant: last.ID, Limit: cards.MaxPageSize}); err == nil && len(page.Cards) == min(last.Cards, cards.MaxPageSize) {
		if !staleVectors(b, st, emb, tenants) {
			b.Logf("the platform's %d cards are loaded already (schema %s)", total, schema)
			return
		}
		b.Logf("the platform's %d cards are loaded, but their vectors are of an older embedding text: writing them again", total)
		if err := st.DropVectorIndex(ctx, emb.Model(), emb.Dim()); err != nil {
			b.Fatal(err)
		}
		stale = true
	}
	start := time.Now()
	var mu sync.Mutex
	done := 0
	work := make(chan int)
	var wg sync.WaitGroup
	var firstErr error
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				cs := synth.Catalogue(tenants[i].Cards, synth.TenantSeed(i), tenants[i].ID)
				put := putWithVectors
				if stale {
					// The vectors of the cards as stored (a catalogue
					// generated by an older synth may differ).
					var err error
					if cs, err = storedCards(ctx, st, tenants[i].ID); err != nil {
						b.Error(err)
						return
					}
					put = putVectors
				}
				for s := 0; s < len(cs); s += 500 {
					part := cs[s:min(s+500, len(cs))]
					err := put(ctx, st, emb, part)
					if err != nil {
						mu.Lock()
						firstErr = err
						mu.Unlock()
					}
				}
				mu.Lock()
				done += len(cs)
				if done/50_000 != (done-len(cs))/50_000 {
					fmt.Fprintf(os.Stderr, "loaded %d of %d cards in %v\n", done, total, time.Since(start).Round(time.Second))
				}
				mu.Unlock()
			}
		}()
	}
	for i := range tenants {
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		b.Fatalf("load: %v", firstErr)
	}
	b.Logf("loaded %d cards over %d tenants in %v", total, len(tenants), time.Since(start).Round(time.Second))
}

// staleVectors says whether the vectors of a sample of the tenants' cards
// (every card of every 100th tenant) are of another text than the card's
// today (a replica that started on them has rewritten some already).
func staleVectors(b *testing.B, st *postgres.Store, emb embed.Embedder, tenants []synth.Tenant) bool {
	ctx := context.Background()
	for i := 0; i < len(tenants); i += 100 {
		cs, err := storedCards(ctx, st, tenants[i].ID)
		if err != nil {
			b.Fatal(err)
		}
		keys := make([]cards.Key, len(cs))
		for j := range cs {
			keys[j] = cs[j].Key()
		}
		stored, err := st.Embeddings(ctx, emb.Model(), keys)
		if err != nil {
			b.Fatal(err)
		}
		for j := range cs {
			if stored[keys[j]].TextHash != retriever.EmbeddingHash(retriever.LearnedEmbeddingText(&cs[j], nil)) {
				return true
			}
		}
	}
	return false
}

// storedCards reads every card of a tenant.
func storedCards(ctx context.Context, st *postgres.Store, tenant string) ([]cards.Card, error) {
	var out []cards.Card
	for cursor := ""; ; {
		page, err := st.List(ctx, cards.ListQuery{Tenant: tenant, Limit: cards.MaxPageSize, Cursor: cursor})
		if err != nil {
			return nil, err
		}
		out = append(out, page.Cards...)
		if cursor = page.NextCursor; cursor == "" {
			return out, nil
		}
	}
}

// putWithVectors writes cards and the vectors a replica would compute for
// them (so that the replicas' first start does not embed a million cards).
func putWithVectors(ctx context.Context, st *postgres.Store, emb embed.Embedder, cs []cards.Card) error {
	if _, err := st.Put(ctx, cs); err != nil {
		return err
	}
	return putVectors(ctx, st, emb, cs)
}

// putVectors writes the vectors of stored cards.
func putVectors(ctx context.Context, st *postgres.Store, emb embed.Embedder, cs []cards.Card) error {
	texts := make([]string, len(cs))
	for i := range cs {
		texts[i] = retriever.LearnedEmbeddingText(&cs[i], nil)
	}
	vs, err := emb.Embed(ctx, texts)
	if err != nil {
		return err
	}
	es := make([]cards.Embedding, len(cs))
	for i := range cs {
		es[i] = cards.Embedding{Key: cs[i].Key(), Model: emb.Model(), TextHash: retriever.EmbeddingHash(texts[i]), Vector: vs[i]}
	}
	return st.PutEmbeddings(ctx, es)
}

// platformReplica is a `cardex serve` run with GODEBUG=gctrace=1, so that
// its live heap after each collection can be read from its log.
type platformReplica struct {
	cmd        *exec.Cmd
	grpc, http string
	ready      time.Duration
	mu         sync.Mutex
	live       int64 // the live heap after the last collection
	exited     chan struct{}
}

var gcTraceRE = regexp.MustCompile(`^gc \d+ .* (\d+)->(\d+)->(\d+) MB`)

func startPlatformReplica(b *testing.B, bin string, args []string) *platformReplica {
	r := &platformReplica{grpc: freePort(b), http: freePort(b), exited: make(chan struct{})}
	args = slices.Clone(args)
	for i, a := range args {
		if a == "--data-dir" {
			args[i+1] = b.TempDir()
		}
	}
	r.cmd = exec.Command(bin, append([]string{"serve", "--listen", r.grpc, "--http-listen", r.http}, args...)...)
	r.cmd.Env = append(os.Environ(), "GODEBUG=gctrace=1", "CARDEX_SERVICE_TOKENS=", "CARDEX_AGENT_TOKENS=")
	stderr, err := r.cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	if err := r.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	serving := make(chan struct{})
	go func() {
		defer close(r.exited)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		once := sync.Once{}
		for sc.Scan() {
			line := sc.Text()
			if m := gcTraceRE.FindStringSubmatch(line); m != nil {
				v, _ := strconv.ParseInt(m[3], 10, 64)
				r.mu.Lock()
				r.live = v << 20
				r.mu.Unlock()
			}
			if strings.Contains(line, `msg="cardex serving"`) {
				once.Do(func() { close(serving) })
			}
		}
		r.cmd.Wait()
	}()
	select {
	case <-serving:
	case <-r.exited:
		b.Fatalf("serve exited before serving")
	case <-time.After(2 * time.Hour):
		b.Fatalf("serve did not start within 2 h")
	}
	// Ready once /readyz says so (the schema is current and the catalogue loaded).
	for {
		res, err := http.Get("http://" + r.http + "/readyz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				break
			}
		}
		select {
		case <-r.exited:
			b.Fatalf("serve exited before it was ready")
		case <-time.After(50 * time.Millisecond):
		}
	}
	r.ready = time.Since(start)
	return r
}

// memory is the live heap after the next collection (the collector runs
// at least every two minutes, so it waits for one) and the peak RSS.
func (r *platformReplica) memory(b *testing.B) (live, peakRSS int64) {
	r.mu.Lock()
	before := r.live
	r.mu.Unlock()
	deadline := time.Now().Add(150 * time.Second)
	for time.Now().Before(deadline) {
		time.Sleep(2 * time.Second)
		r.mu.Lock()
		live = r.live
		r.mu.Unlock()
		if live != before && live != 0 {
			break
		}
	}
	status, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(r.cmd.Process.Pid), "status"))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kbs, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			peakRSS = kbs << 10
		}
	}
	return live, peakRSS
}

func (r *platformReplica) stop(b *testing.B) {
	r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(30 * time.Second):
		r.cmd.Process.Kill()
		<-r.exited
	}
}

type latencySummary struct{ p50, p99 time.Duration }

// latencies sends the requests one after another (each routed by its
// tenant) and summarises their latencies.
func latencies(b *testing.B, addr string, reqs []*pb.DiscoverToolsRequest) latencySummary {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	c := pb.NewDiscoveryServiceClient(conn)
	var ds []time.Duration
	for _, req := range reqs {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		ctx = metadata.AppendToOutgoingContext(ctx, apiconv.TenantHeader, req.GetCaller().GetTenant())
		start := time.Now()
		_, err := c.DiscoverTools(ctx, req)
		ds = append(ds, time.Since(start))
		cancel()
		if err != nil {
			b.Fatalf("DiscoverTools %s: %v", req.GetCaller().GetTenant(), err)
		}
	}
	slices.Sort(ds)
	return latencySummary{p50: ds[len(ds)/2], p99: ds[len(ds)*99/100]}
}
