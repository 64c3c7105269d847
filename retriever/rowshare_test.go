package retriever

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// shareFixture is a tenant of a little over four chunks of rows (ties
// among them) and the candidate sets a shared scan is tried in.
func shareFixture(t *testing.T) (*MemoryVectors, [][]float32, []Filter) {
	t.Helper()
	rng := rand.New(rand.NewPCG(31, 7))
	const dim = 48
	m := NewMemoryVectors(dim)
	twin := mvRandUnit(rng, dim)
	var subset []string
	for i := range 4*shareChunk + 77 {
		id := fmt.Sprintf("t\x1fs\x1f%05d", i)
		v := mvShaped(rng, dim, i%3)
		if i%97 == 0 {
			v = twin // equal scores, ordered by ID
		}
		mvMustUpsert(t, m, id, "t", v)
		if i%5 != 0 {
			subset = append(subset, id)
		}
	}
	queries := [][]float32{twin, mvRandUnit(rng, dim), mvShaped(rng, dim, 1), mvRandUnit(rng, dim)}
	return m, queries, []Filter{{Tenant: "t"}, {Tenant: "t", IDs: subset}}
}

// TestSharedScanMerges: a quantised pass whose chunks are split between
// two participants in any way (all to one, alternately, halves, at random)
// and merged before the re-rank answers as one scan does, hit for hit and
// bit for bit, for one to four queries, all rows or a subset, every k; the
// merged τ is the one scan's (so the re-rank scores no more rows).
func TestSharedScanMerges(t *testing.T) {
	m, pool, filters := shareFixture(t)
	rng := rand.New(rand.NewPCG(8, 8))
	splits := map[string]func(c, chunks int) bool{ // true: the scan's own chunk
		"owner only":  func(int, int) bool { return true },
		"helper only": func(int, int) bool { return false },
		"alternate":   func(c, _ int) bool { return c%2 == 0 },
		"halves":      func(c, chunks int) bool { return c < chunks/2 },
		"random":      func(int, int) bool { return rng.IntN(2) == 0 },
	}
	for nq := 1; nq <= len(pool); nq++ {
		queries := pool[:nq]
		for _, f := range filters {
			set := m.Prepare(f)
			for _, k := range []int{1, 5, LegDepth} {
				want, err := m.searchSetMulti(make([][]Hit, nq), queries, set, f, k, nil)
				if err != nil {
					t.Fatal(err)
				}
				for name, own := range splits {
					got := sharedByHand(t, m, queries, set, k, own)
					for j := range queries {
						if i := firstDiff(got[j], want[j]); i >= 0 {
							t.Fatalf("%s, %d queries, %d IDs, k=%d, query %d: first difference at %d", name, nq, len(f.IDs), k, j, i)
						}
					}
				}
			}
		}
	}
}

// sharedByHand runs a shared pass with the chunks split as own says, the
// helper's part merged into the scan's, and the re-rank.
func sharedByHand(t *testing.T, m *MemoryVectors, queries [][]float32, set *VecSet, k int, own func(c, chunks int) bool) [][]Hit {
	t.Helper()
	scans, parts := make([]*quantScratch, len(queries)), make([]*quantScratch, len(queries))
	for x, q := range queries {
		scans[x], parts[x] = &quantScratch{}, &quantScratch{}
		if !scans[x].qq.quantize(q) {
			t.Fatal("query not quantised")
		}
		scans[x].lows.reset(k)
		parts[x].lows.reset(k)
	}
	qp := newQuantPass(set.tenant, set, scans)
	n := set.rowCount()
	chunks := (n + shareChunk - 1) / shareChunk
	for c := range chunks {
		who := parts
		if own(c, chunks) {
			who = scans
		}
		qp.scan(who, c*shareChunk, min((c+1)*shareChunk, n))
	}
	// τ of one participant scanning every row.
	alone := make([]*quantScratch, len(queries))
	for x := range queries {
		alone[x] = &quantScratch{qq: scans[x].qq}
		alone[x].lows.reset(k)
	}
	qp.scan(alone, 0, n)
	out := make([][]Hit, len(queries))
	for x, sc := range scans {
		sc.merge(parts[x])
		if got, want := sc.lows.final(), alone[x].lows.final(); got != want {
			t.Fatalf("query %d, k=%d: merged τ %v, one scan's %v", x, k, got, want)
		}
		out[x] = m.rerank(nil, sc, queries[x], set.tenant, k)
	}
	return out
}

// TestRowShareHelps: scans with a helper calling help while they run (as
// a request's other goroutine does) answer as scans alone do; run under
// -race, it also holds the hand-over (open, claim, close, merge) to the
// memory model.
func TestRowShareHelps(t *testing.T) {
	m, pool, filters := shareFixture(t)
	joined := 0
	for round := range 40 {
		f := filters[round%2]
		queries := pool[:1+round%len(pool)]
		want, err := m.searchSetMulti(make([][]Hit, len(queries)), queries, nil, f, LegDepth, nil)
		if err != nil {
			t.Fatal(err)
		}
		share := &rowShare{}
		var got [][]Hit
		var wg sync.WaitGroup
		done := make(chan struct{})
		wg.Go(func() {
			defer close(done)
			got, err = m.searchSetMulti(make([][]Hit, len(queries)), queries, nil, f, LegDepth, share)
		})
		for helped := false; ; {
			select {
			case <-done:
			default:
				share.mu.Lock()
				open := share.pass != nil
				share.mu.Unlock()
				if open && !helped {
					share.help()
					helped, joined = true, joined+1
				}
				continue
			}
			break
		}
		wg.Wait()
		if err != nil {
			t.Fatal(err)
		}
		for j := range queries {
			if i := firstDiff(got[j], want[j]); i >= 0 {
				t.Fatalf("round %d, query %d: first difference at %d", round, j, i)
			}
		}
	}
	t.Logf("the helper found the scan open in %d of 40 rounds", joined)
}
