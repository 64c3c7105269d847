package retriever_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/cards/synth"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/retriever"
)

// The synthetic catalogue of the benchmarks and tests (cards/synth).
func synthCatalogue(n int, seed int64, tenant string) []cards.Card {
	return synth.Catalogue(n, seed, tenant)
}

func synthQueries(n int, seed int64) []string { return synth.Queries(n, seed) }

// putBatches writes cards in batches of 1000 (one bbolt transaction each).
func putBatches(tb testing.TB, st cards.Store, cs []cards.Card) {
	tb.Helper()
	for start := 0; start < len(cs); start += 1000 {
		if _, err := st.Put(context.Background(), cs[start:min(start+1000, len(cs))]); err != nil {
			tb.Fatalf("put cards %d..: %v", start, err)
		}
	}
}

// benchRestrictedScopes is held by the restricted caller: a little under a
// third of the scope set (reported as the candidates metric).
var benchRestrictedScopes = synth.RestrictedScopes

// benchSizes are the catalogue sizes of BenchmarkDiscover and
// BenchmarkRestart. Pick one with -bench 'Discover$/cards=1000$'; the
// -bench-sizes flag replaces them (-bench-sizes 1000000 for a million
// cards: docs/BENCHMARKS.md, "A million cards in the embedded store").
var benchSizes = []int{1000, 10_000, 100_000}

var benchSizesFlag = flag.String("bench-sizes", "", "comma-separated catalogue sizes of BenchmarkDiscover and BenchmarkRestart instead of 1000,10000,100000")

// sizes are the catalogue sizes to benchmark: -bench-sizes, else benchSizes.
func sizes(b *testing.B) []int {
	if *benchSizesFlag == "" {
		return benchSizes
	}
	var out []int
	for _, f := range strings.Split(*benchSizesFlag, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			b.Fatalf("-bench-sizes: %q is not a positive number of cards", f)
		}
		out = append(out, n)
	}
	return out
}

const benchTenant = "acme"

// benchExamples is the number of search examples on each card of
// BenchmarkDiscover's catalogue: CARDEX_BENCH_EXAMPLES (default 0), so that
// the cost of enriched cards is measured against the same run's plain ones.
var benchExamples, _ = strconv.Atoi(os.Getenv("CARDEX_BENCH_EXAMPLES"))

// benchCallers are the two callers of the benchmarks: an admin, whose
// candidate set is the whole tenant, and a restricted agent.
func benchCallers() []retriever.Caller {
	return []retriever.Caller{
		{Tenant: benchTenant, Subject: "admin", Scopes: []string{"*"}},
		{Tenant: benchTenant, Subject: "agent", Scopes: benchRestrictedScopes},
	}
}

func benchCallerName(c retriever.Caller) string {
	if c.Subject == "admin" {
		return "admin"
	}
	return "restricted"
}

// benchFixture is one catalogue size: the retriever over an embedded store,
// and beside it, for the legs and the baselines, a lexical index, a vector
// searcher and a bare bleve index holding the same cards and vectors.
type benchFixture struct {
	ret     *retriever.Retriever
	lex     *retriever.LexicalIndex
	vec     *retriever.MemoryVectors
	bare    *retriever.BareBleve
	queries []string
	qvecs   [][]float32
	callers []*benchCaller
}

// benchCaller is a caller with its candidate set as a search filter and,
// per query, the legs' answers (the inputs of fusion) and the fused list
// (the input of the merge).
type benchCaller struct {
	caller   retriever.Caller
	filter   retriever.Filter
	lex, sem [][]retriever.Hit
	fused    [][]retriever.Fused
}

// newBenchFixture builds a catalogue of n cards. At 100,000 cards this takes
// a minute or two; BenchmarkDiscover's body runs once per test binary (only
// the leaf benchmarks are repeated by -count), so it is built once.
func newBenchFixture(b *testing.B, n int) *benchFixture {
	ctx := context.Background()
	start := time.Now()
	emb := embed.MustBuiltin()
	st, err := embedded.Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = st.Close() })
	cs := synth.WithExamples(synthCatalogue(n, 1, benchTenant), benchExamples, 2)
	putBatches(b, st, cs)
	r, err := retriever.New(ctx, st, emb, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = r.Close() })
	if r.Len() != n {
		b.Fatalf("retriever holds %d cards, want %d", r.Len(), n)
	}
	fx := &benchFixture{ret: r, vec: retriever.NewMemoryVectors(emb.Dim()), queries: synthQueries(50, 7)}

	// The same vectors, as the retriever stored them.
	keys := make([]cards.Key, len(cs))
	for i := range cs {
		keys[i] = cs[i].Key()
	}
	for start := 0; start < len(keys); start += 10_000 {
		part := keys[start:min(start+10_000, len(keys))]
		stored, err := st.Embeddings(ctx, emb.Model(), part)
		if err != nil || len(stored) != len(part) {
			b.Fatalf("stored embeddings: %d of %d, %v", len(stored), len(part), err)
		}
		for _, k := range part {
			if err := fx.vec.Upsert(retriever.DocID(k), k.Tenant, stored[k].Vector); err != nil {
				b.Fatal(err)
			}
		}
	}
	// The same lexical documents.
	docs := make([]retriever.LexicalDoc, len(cs))
	for i := range cs {
		docs[i] = retriever.BenchLexicalDoc(cs[i])
	}
	if fx.lex, err = retriever.NewLexicalIndex(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = fx.lex.Close() })
	for start := 0; start < len(docs); start += 1000 {
		if err := fx.lex.Upsert(docs[start:min(start+1000, len(docs))]); err != nil {
			b.Fatal(err)
		}
	}
	if fx.bare, err = retriever.NewBareBleve(docs); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = fx.bare.Close() })
	if fx.qvecs, err = emb.Embed(ctx, fx.queries); err != nil {
		b.Fatal(err)
	}

	for _, c := range benchCallers() {
		bc := &benchCaller{caller: c, filter: retriever.Filter{Tenant: c.Tenant}}
		if c.Subject != "admin" {
			bc.filter.IDs = []string{}
			for i := range cs {
				if retriever.HoldsAll(c.Scopes, cs[i].RequiredScopes) {
					bc.filter.IDs = append(bc.filter.IDs, retriever.DocID(keys[i]))
				}
			}
			slices.Sort(bc.filter.IDs)
		}
		for qi, q := range fx.queries {
			lex, err := fx.lex.Search(q, bc.filter, retriever.LegDepth)
			if err != nil {
				b.Fatal(err)
			}
			sem, err := fx.vec.Search(fx.qvecs[qi], bc.filter, retriever.LegDepth)
			if err != nil {
				b.Fatal(err)
			}
			sem = slices.DeleteFunc(sem, func(h retriever.Hit) bool { return h.Score <= 0 })
			bc.lex, bc.sem = append(bc.lex, lex), append(bc.sem, sem)
			bc.fused = append(bc.fused, retriever.FuseRelative(lex, sem, retriever.DefaultAlpha))
		}
		fx.callers = append(fx.callers, bc)
	}
	b.Logf("setup of %d cards (store, retriever, lexical index, vectors, bare bleve): %s", n, time.Since(start).Round(time.Millisecond))
	return fx
}

// BenchmarkDiscover measures the whole pipeline (op=discover, in-process,
// top_k 5, the default built-in embedder and fusion), each leg of it, and
// the two baselines, at every size for an admin and a restricted caller, in
// one run so that the ratios come from one machine state:
//
//   - op=discover: Retriever.Discover; the Timings of every answer are
//     reported as embed-, authorize-, lexical-, semantic-, fuse- and
//     hydrate-ns/op (authorize is the candidate set; hydrate the pins,
//     copies and token accounting);
//   - op=lexical, op=semantic: LexicalIndex.Search and MemoryVectors.Search
//     inside the candidate set at the pipeline's depth (LegDepth);
//   - op=fuse, op=merge: FuseRelative of the two legs' answers, MergeFair
//     of the fused list into 5;
//   - op=intents3: Retriever.Discover of a request of three intents;
//   - op=bleve-top5: a bare bleve BM25 query on the same documents with the
//     same mapping, fields and boosts, top 5 (BareBleve);
//   - op=vectors-top5: a bare exact scan of the same vectors, top 5
//     (MemoryVectors.SearchExact: every vector scored in float32).
//
// The ratios of docs/BENCHMARKS.md are the medians (p50-ns) of op=discover
// over op=bleve-top5 and op=vectors-top5, and of op=intents3 over
// op=discover (scripts/bench-table computes them).
func BenchmarkDiscover(b *testing.B) {
	ctx := context.Background()
	for _, n := range sizes(b) {
		b.Run(fmt.Sprintf("cards=%d", n), func(b *testing.B) {
			fx := newBenchFixture(b, n)
			for _, bc := range fx.callers {
				b.Run("caller="+benchCallerName(bc.caller), func(b *testing.B) {
					benchOps(ctx, b, fx, bc)
				})
			}
		})
	}
}

func benchOps(ctx context.Context, b *testing.B, fx *benchFixture, bc *benchCaller) {
	nq := len(fx.queries)
	b.Run("op=discover", func(b *testing.B) {
		b.ReportAllocs()
		var candidates, tools int
		var tm retriever.Timings
		var took []time.Duration
		i := 0
		cpu0 := processCPU()
		for b.Loop() {
			t0 := time.Now()
			res, err := fx.ret.Discover(ctx, retriever.Request{Caller: bc.caller, Query: fx.queries[i%nq], TopK: 5})
			took = append(took, time.Since(t0))
			if err != nil {
				b.Fatal(err)
			}
			i++
			candidates += res.CandidateCount
			tools += len(res.Tools)
			tm.Embed += res.Timings.Embed
			tm.Authorize += res.Timings.Authorize
			tm.Lexical += res.Timings.Lexical
			tm.Semantic += res.Timings.Semantic
			tm.Fuse += res.Timings.Fuse
			tm.Hydrate += res.Timings.Hydrate
		}
		per := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / float64(i) }
		b.ReportMetric(per(processCPU()-cpu0), "cpu-ns/op")
		slices.Sort(took)
		b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(took[len(took)*99/100].Nanoseconds()), "p99-ns")
		b.ReportMetric(float64(candidates)/float64(i), "candidates")
		b.ReportMetric(float64(tools)/float64(i), "tools/op")
		b.ReportMetric(per(tm.Embed), "embed-ns/op")
		b.ReportMetric(per(tm.Authorize), "authorize-ns/op")
		b.ReportMetric(per(tm.Lexical), "lexical-ns/op")
		b.ReportMetric(per(tm.Semantic), "semantic-ns/op")
		b.ReportMetric(per(tm.Fuse), "fuse-ns/op")
		b.ReportMetric(per(tm.Hydrate), "hydrate-ns/op")
	})
	b.Run("op=lexical", func(b *testing.B) {
		i := 0
		timedLoop(b, func() {
			if _, err := fx.lex.Search(fx.queries[i%nq], bc.filter, retriever.LegDepth); err != nil {
				b.Fatal(err)
			}
			i++
		})
	})
	b.Run("op=semantic", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if _, err := fx.vec.Search(fx.qvecs[i%nq], bc.filter, retriever.LegDepth); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("op=fuse", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			_ = retriever.FuseRelative(bc.lex[i%nq], bc.sem[i%nq], retriever.DefaultAlpha)
			i++
		}
	})
	b.Run("op=merge", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			_ = retriever.MergeFair([][]retriever.Fused{bc.fused[i%nq]}, 5)
			i++
		}
	})
	b.Run("op=intents3", func(b *testing.B) {
		// One request of three intents (the next three queries), against
		// op=discover's one query: the cost of a multi-step request.
		i := 0
		timedLoop(b, func() {
			intents := []string{fx.queries[i%nq], fx.queries[(i+1)%nq], fx.queries[(i+2)%nq]}
			if _, err := fx.ret.Discover(ctx, retriever.Request{Caller: bc.caller, Intents: intents, TopK: 5}); err != nil {
				b.Fatal(err)
			}
			i++
		})
	})
	b.Run("op=bleve-top5", func(b *testing.B) {
		i := 0
		timedLoop(b, func() {
			if _, err := fx.bare.Search(fx.queries[i%nq], bc.filter, 5); err != nil {
				b.Fatal(err)
			}
			i++
		})
	})
	b.Run("op=vectors-top5", func(b *testing.B) {
		i := 0
		timedLoop(b, func() {
			if _, err := fx.vec.SearchExact(fx.qvecs[i%nq], bc.filter, 5); err != nil {
				b.Fatal(err)
			}
			i++
		})
	})
}

// timedLoop is retriever.TimedLoop (bench_export_test.go).
func timedLoop(b *testing.B, op func()) { retriever.TimedLoop(b, op) }

// BenchmarkRestart measures a restart: open the embedded store holding n
// cards (and their embeddings, stored by an earlier start), build the
// retriever from the store and the snapshot the earlier start wrote at its
// Close (WithSnapshot), answer the first discovery (ns/op). It also reports the live
// heap the open store and retriever hold per card (runtime.MemStats after a
// GC, against the heap before the open), the growth of the process's
// resident memory per card, and the cards' mean schema bytes. Run it alone
// (-bench 'Restart/cards=100000$' -benchtime 1x) for the resident figure:
// other benchmarks' memory in the same process blurs it. cards=0, an empty
// store, is the floor of the restart time. peak-rss-B/card is the growth of
// the process's peak resident set during the restart (the peak is reset
// before it, /proc/self/clear_refs). file-rss-B/card is the growth of
// the part of the resident set backed by files: the snapshot's pages the
// first answer mapped (its codes), clean pages the kernel may drop and read
// again. Then the restarted retriever answers BenchmarkDiscover's 50
// queries: later-cpu-ns/op is the CPU of one of those answers (the mean),
// later-p50-ns their median wall time,
// later-rss-B/card the growth of the resident set (against the same start)
// once they are answered.
func BenchmarkRestart(b *testing.B) {
	ctx := context.Background()
	emb := embed.MustBuiltin()
	for _, n := range append([]int{0}, sizes(b)...) {
		b.Run(fmt.Sprintf("cards=%d", n), func(b *testing.B) {
			dir := b.TempDir()
			cs := synthCatalogue(n, 1, benchTenant)
			schemaBytes := 0
			for i := range cs {
				schemaBytes += len(cs[i].InputSchema) + len(cs[i].OutputSchema)
			}
			st, err := embedded.Open(dir)
			if err != nil {
				b.Fatal(err)
			}
			putBatches(b, st, cs)
			cs = nil
			snap := retriever.WithSnapshot(filepath.Join(dir, "retriever.snap"))
			r, err := retriever.New(ctx, st, emb, nil, snap) // computes and stores the embeddings; Close writes the snapshot
			if err != nil {
				b.Fatal(err)
			}
			if err := errors.Join(r.Close(), st.Close()); err != nil {
				b.Fatal(err)
			}
			req := retriever.Request{Caller: benchCallers()[0], Query: synthQueries(1, 11)[0], TopK: 5}
			later := synthQueries(50, 7) // BenchmarkDiscover's
			var heap, rss, peak, file, laterRSS float64
			var took, laterTook []time.Duration
			var cpu, laterCPU time.Duration
			i := 0
			for b.Loop() {
				b.StopTimer()
				heap0, rss0, file0 := liveHeap(), residentBytes(), fileResidentBytes()
				resetPeakResident()
				b.StartTimer()
				t0, c0 := time.Now(), processCPU()
				st, err := embedded.Open(dir)
				if err != nil {
					b.Fatal(err)
				}
				r, err := retriever.New(ctx, st, emb, nil, snap)
				if err != nil {
					b.Fatal(err)
				}
				res, err := r.Discover(ctx, req)
				if err != nil || (n > 0 && len(res.Tools) == 0) {
					b.Fatalf("first discovery: %d tools, %v", len(res.Tools), err)
				}
				took = append(took, time.Since(t0))
				cpu += processCPU() - c0
				b.StopTimer()
				peak += float64(peakResident()) - float64(rss0)
				file += float64(fileResidentBytes()) - float64(file0)
				heap += float64(liveHeap()) - float64(heap0)
				rss += float64(residentBytes()) - float64(rss0)
				if r.Len() != n {
					b.Fatalf("%d cards after the restart, want %d", r.Len(), n)
				}
				c0 = processCPU()
				for _, q := range later {
					t0 := time.Now()
					if _, err := r.Discover(ctx, retriever.Request{Caller: req.Caller, Query: q, TopK: 5}); err != nil {
						b.Fatal(err)
					}
					laterTook = append(laterTook, time.Since(t0))
				}
				laterCPU += processCPU() - c0
				laterRSS += float64(residentBytes()) - float64(rss0)
				if err := errors.Join(r.Close(), st.Close()); err != nil {
					b.Fatal(err)
				}
				i++
				b.StartTimer()
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "p50-ns")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(len(took)), "cpu-ns/op")
			if n == 0 {
				return
			}
			b.ReportMetric(heap/float64(i)/float64(n), "heap-B/card")
			if rss0 := residentBytes(); rss0 > 0 {
				b.ReportMetric(rss/float64(i)/float64(n), "rss-B/card")
				b.ReportMetric(peak/float64(i)/float64(n), "peak-rss-B/card")
				b.ReportMetric(file/float64(i)/float64(n), "file-rss-B/card")
				b.ReportMetric(laterRSS/float64(i)/float64(n), "later-rss-B/card")
			}
			b.ReportMetric(float64(laterCPU.Nanoseconds())/float64(i*len(later)), "later-cpu-ns/op")
			slices.Sort(laterTook)
			b.ReportMetric(float64(laterTook[len(laterTook)/2].Nanoseconds()), "later-p50-ns")
			b.ReportMetric(float64(schemaBytes)/float64(n), "schema-B/card")
			b.ReportMetric(float64(4*emb.Dim()), "vector-B/card")
		})
	}
}

// liveHeap is the bytes of live heap objects after a full collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// processCPU is retriever.ProcessCPU (bench_export_test.go).
func processCPU() time.Duration { return retriever.ProcessCPU() }

// resetPeakResident resets the process's peak resident set to its current
// one (Linux; elsewhere nothing happens and peakResident reports 0).
func resetPeakResident() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakResident is the process's peak resident set size since the last
// reset (VmHWM), 0 where it is unknown.
func peakResident() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb uint64
			if _, err := fmt.Sscan(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), &kb); err == nil {
				return kb * 1024
			}
		}
	}
	return 0
}

// residentBytes is the process's resident set size (Linux), after the
// runtime returned what it could to the system; 0 where it is unknown.
func residentBytes() uint64 {
	debug.FreeOSMemory()
	return statm(1)
}

// fileResidentBytes is the process's resident set backed by files (its
// binary, the store's and a snapshot's mapped pages), 0 where unknown.
func fileResidentBytes() uint64 { return statm(2) }

// statm is field i of /proc/self/statm, in bytes.
func statm(i int) uint64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) <= i {
		return 0
	}
	var pages uint64
	if _, err := fmt.Sscan(f[i], &pages); err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}

// TestBenchBaselines: the bare bleve baseline answers like a search of the
// caller's candidate set: at most k hits, all of them candidates of the
// caller's tenant (another tenant's identical cards never), and a card's
// own words find it first.
func TestBenchBaselines(t *testing.T) {
	cs := synthCatalogue(300, 1, benchTenant)
	other := synthCatalogue(50, 1, "globex")
	var docs []retriever.LexicalDoc
	for _, c := range append(slices.Clone(cs), other...) {
		docs = append(docs, retriever.BenchLexicalDoc(c))
	}
	bare, err := retriever.NewBareBleve(docs)
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	restricted := retriever.Filter{Tenant: benchTenant, IDs: []string{}}
	for _, c := range cs {
		if retriever.HoldsAll(benchRestrictedScopes, c.RequiredScopes) {
			restricted.IDs = append(restricted.IDs, retriever.DocID(c.Key()))
		}
	}
	for _, tc := range []struct {
		name   string
		filter retriever.Filter
	}{
		{"admin", retriever.Filter{Tenant: benchTenant}},
		{"restricted", restricted},
	} {
		for _, q := range synthQueries(10, 7) {
			ids, err := bare.Search(q, tc.filter, 5)
			if err != nil || len(ids) == 0 || len(ids) > 5 {
				t.Fatalf("%s %q: %d hits, %v", tc.name, q, len(ids), err)
			}
			for _, id := range ids {
				k, _ := retriever.ParseDocID(id)
				if k.Tenant != benchTenant || (tc.filter.IDs != nil && !slices.Contains(tc.filter.IDs, id)) {
					t.Errorf("%s %q: %s is not a candidate", tc.name, q, id)
				}
			}
		}
	}
	want := retriever.DocID(cs[0].Key())
	if ids, err := bare.Search(cs[0].Name+" "+cs[0].Summary, retriever.Filter{Tenant: benchTenant}, 5); err != nil || len(ids) == 0 || ids[0] != want {
		t.Errorf("a card's own name and summary: %v, %v; want %s first", ids, err, want)
	}
}
