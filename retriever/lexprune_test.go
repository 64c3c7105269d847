package retriever

import (
	"fmt"
	"math"
	"math/rand"
	"slices"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/cards/synth"
)

// synthLexDocs is the synthetic catalogue of the benchmarks (cards/synth)
// as lexical docs: n cards of tenant, with k search examples each.
func synthLexDocs(n int, seed int64, tenant string, k int) []LexicalDoc {
	cs := synth.WithExamples(synth.Catalogue(n, seed, tenant), k, seed)
	docs := make([]LexicalDoc, len(cs))
	for i, c := range cs {
		docs[i] = LexicalDoc{
			ID: DocID(c.Key()), Tenant: c.Tenant, Server: c.Server, Name: c.Name,
			Summary: c.Summary, Description: c.Description, Aliases: c.Aliases, Tags: c.Tags,
			Examples: c.SearchExamples, Params: schemaParams(c.InputSchema),
		}
	}
	return docs
}

// widen gives every k-th doc a description repeating a word more often
// than a packed posting holds (lexTFMax), so terms' bounds reach it.
func widen(docs []LexicalDoc, k int, rng *rand.Rand) []LexicalDoc {
	for i := range docs {
		if i%k == 0 {
			w := strings.Fields(docs[i].Summary)
			docs[i].Description += strings.Repeat(" "+w[rng.Intn(len(w))], lexTFMax+1+rng.Intn(5))
		}
	}
	return docs
}

// pruneQueries are n weighted queries over the words of docs: the
// benchmarks' synthetic queries, random words (some repeated, some no doc
// holds, stop words), and multi-part queries as the pipeline sends them
// (an intent with the query as context at a lower weight; several parts).
func pruneQueries(n int, docs []LexicalDoc, rng *rand.Rand) [][]WeightedText {
	var vocab []string
	for _, d := range docs[:min(len(docs), 200)] {
		vocab = append(vocab, strings.Fields(d.Summary+" "+strings.Join(d.Aliases, " "))...)
		vocab = append(vocab, d.Name)
	}
	vocab = append(vocab, "the", "of", "zyxwvut", "quuxification")
	phrase := func(k int) string {
		ws := make([]string, k)
		for i := range ws {
			ws[i] = vocab[rng.Intn(len(vocab))]
		}
		return strings.Join(ws, " ")
	}
	synthQ := synth.Queries(n, rng.Int63())
	out := make([][]WeightedText, n)
	for i := range out {
		switch i % 5 {
		case 0:
			out[i] = []WeightedText{{Text: synthQ[i], Weight: 1}}
		case 1:
			out[i] = []WeightedText{{Text: phrase(1 + rng.Intn(8)), Weight: 1}}
		case 2:
			out[i] = []WeightedText{{Text: synthQ[i], Weight: 1}, {Text: synthQ[(i+1)%n], Weight: 0.3}}
		case 3:
			out[i] = []WeightedText{{Text: phrase(3), Weight: 1}, {Text: phrase(10), Weight: 0.25}, {Text: phrase(2), Weight: 0.6}}
		case 4:
			w := vocab[rng.Intn(len(vocab))]
			out[i] = []WeightedText{{Text: w + " " + w + " " + phrase(2), Weight: 1.5}}
		}
	}
	return out
}

// sameHits fails unless got and want are the same hits, bit for bit.
func sameHits(t *testing.T, what string, got, want []Hit) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d hits, exhaustive %d", what, len(got), len(want))
	}
	bits := math.Float64bits
	for i := range want {
		g, w := got[i], want[i]
		if g.ID != w.ID || g.key != w.key || bits(g.Score) != bits(w.Score) || g.mask != w.mask ||
			bits(g.Coverage) != bits(w.Coverage) || bits(g.Evidence) != bits(w.Evidence) || !slices.Equal(g.Fields, w.Fields) {
			t.Fatalf("%s, hit %d:\n  pruned %+v\nexhaustive %+v", what, i, g, w)
		}
	}
}

// TestLexicalPrunedMatchesExhaustive: the pruned search (scorePruned)
// answers as the exhaustive one (scoreAll) — the same hits, scores,
// coverage, evidence, fields and order — on synthetic catalogues of several
// sizes, for the whole tenant (the only one, or one of two) and restricted
// sets, at depths 1 to 200, for single and weighted multi-part queries, and
// after updates, deletions and a snapshot's round trip.
func TestLexicalPrunedMatchesExhaustive(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	cases := []struct {
		name    string
		docs    func() []LexicalDoc
		queries int
	}{
		{"synth 300", func() []LexicalDoc { return synthLexDocs(300, 1, "acme", 0) }, 120},
		{"synth 3000 with examples, wide", func() []LexicalDoc {
			return widen(synthLexDocs(3000, 2, "acme", 3), 7, rng)
		}, 120},
		{"synth 12000, two tenants", func() []LexicalDoc {
			return append(synthLexDocs(9000, 3, "acme", 0), synthLexDocs(3000, 4, "globex", 2)...)
		}, 80},
		{"random words 4000, two tenants, wide", func() []LexicalDoc {
			return widen(lexBenchDocs(4000), 11, rng)
		}, 120},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			docs := tc.docs()
			x := newTestLexical(t, docs...)
			compare := func(stage string) {
				t.Helper()
				var ids, few []string
				for _, d := range docs {
					if d.Tenant != "acme" {
						continue
					}
					if rng.Intn(3) == 0 {
						ids = append(ids, d.ID)
					}
					if rng.Intn(len(docs)/20+1) == 0 {
						few = append(few, d.ID)
					}
				}
				filters := []Filter{{Tenant: "acme"}, {Tenant: "acme", IDs: ids}, {Tenant: "acme", IDs: few}, {Tenant: "globex"}}
				for qi, parts := range pruneQueries(tc.queries, docs, rng) {
					terms := x.queryTerms(nil, parts)
					for fi, f := range filters {
						set := x.Prepare(f)
						for _, depth := range []int{1, 5, 50, 200} {
							want, err := x.searchTermsBy(nil, terms, set, f, depth, true, lexExhaustive)
							if err != nil {
								t.Fatal(err)
							}
							for _, mode := range []lexMode{lexAdaptive, lexSmallSegments, lexSegmentsOnly} {
								got, err := x.searchTermsBy(nil, terms, set, f, depth, true, mode)
								if err != nil {
									t.Fatal(err)
								}
								sameHits(t, fmt.Sprintf("%s: query %d %v, filter %d (%d IDs), depth %d, mode %d", stage, qi, parts, fi, len(f.IDs), depth, mode), got, want)
							}
						}
					}
				}
			}
			compare("built")
			// Updates (bounds are only raised) and deletions (bounds stay).
			var changed []LexicalDoc
			var gone []string
			var kept []LexicalDoc
			for i, d := range docs {
				switch i % 7 {
				case 0:
					d.Summary, d.Aliases = docs[(i+3)%len(docs)].Summary, nil
					changed = append(changed, d)
					kept = append(kept, d)
				case 1:
					gone = append(gone, d.ID)
				default:
					kept = append(kept, d)
				}
			}
			if err := x.Upsert(changed); err != nil {
				t.Fatal(err)
			}
			if err := x.Delete(gone); err != nil {
				t.Fatal(err)
			}
			docs = kept
			compare("after updates and deletions")
			x = lexRoundTrip(t, x)
			compare("read back from a snapshot")
		})
	}
}

// TestLexicalPruningSkips: pruning is not vacuous — on the benchmarks'
// catalogue at the pipeline's depths, the pruned search scores a fraction
// of the docs that hold a query term (by docs wherever it can; adaptively,
// fewer than all), and no posting adds more than its term's bound.
func TestLexicalPruningSkips(t *testing.T) {
	docs := synthLexDocs(20000, 1, "acme", 0)
	x := newTestLexical(t, docs...)
	set := x.Prepare(Filter{Tenant: "acme"})
	for _, depth := range []int{LegDepth, IntentDepth} {
		for _, mode := range []lexMode{lexSmallSegments, lexAdaptive} {
			scored, matching := 0, 0
			for _, q := range synth.Queries(50, 7) {
				terms := x.queryTerms(nil, []WeightedText{{Text: q, Weight: 1}})
				s, m := pruneWork(t, x, terms, set, depth, mode)
				scored += s
				matching += m
			}
			t.Logf("depth %d, mode %d: the pruned search scored %d docs, %d match", depth, mode, scored, matching)
			if want := map[lexMode]int{lexSmallSegments: matching / 2, lexAdaptive: matching * 9 / 10}[mode]; scored > want {
				t.Errorf("depth %d, mode %d: the pruned search scored %d of the %d matching docs; want at most %d", depth, mode, scored, matching, want)
			}
		}
	}
}

// pruneWork is the number of docs scorePruned scores and of the docs that
// hold a query term, after checking that no posting's contribution exceeds
// its term's bound.
func pruneWork(t *testing.T, x *LexicalIndex, terms []queryTerm, set *LexSet, limit int, mode lexMode) (scored, matching int) {
	t.Helper()
	x.mu.RLock()
	defer x.mu.RUnlock()
	acc := getLexAcc(len(x.docs))
	defer putLexAcc(acc)
	top := lexTop{limit: limit}
	_, _, scored = x.scorePruned(acc, &top, terms, set, mode)
	seen := map[uint32]bool{}
	for j, r := range acc.prune.runs {
		for _, p := range r.ps {
			seen[p.doc] = true
			tf, _ := x.postingTF(p.tf, &x.docs[p.doc], &set.avg)
			if v := acc.prune.idf[j] * tf / (bm25K1 + tf); v > r.ub {
				t.Fatalf("term %q: a posting adds %v, over its bound %v", terms[j].term, v, r.ub)
			}
		}
	}
	return scored, len(seen)
}

// BenchmarkLexicalPruned compares the exhaustive and the pruned search
// (mode=0, mode=1: lexExhaustive, lexAdaptive) on the benchmarks'
// synthetic catalogue and queries, whole tenant and a third of it, at the
// pipeline's depths, and on BenchmarkLexicalSearch's catalogue of random
// words (two tenants), for one of them and 5,000 of its docs, top 20.
func BenchmarkLexicalPruned(b *testing.B) {
	type search struct {
		name  string
		f     Filter
		depth int
	}
	cases := []struct {
		name     string
		docs     func() []LexicalDoc
		queries  []string
		searches func(docs []LexicalDoc) []search
	}{}
	for _, n := range []int{1000, 10_000, 100_000} {
		cases = append(cases, struct {
			name     string
			docs     func() []LexicalDoc
			queries  []string
			searches func(docs []LexicalDoc) []search
		}{fmt.Sprintf("synth/cards=%d", n), func() []LexicalDoc { return synthLexDocs(n, 1, "acme", 0) }, synth.Queries(50, 7),
			func(docs []LexicalDoc) []search {
				var ids []string
				for i, d := range docs {
					if i%3 == 0 {
						ids = append(ids, d.ID)
					}
				}
				var out []search
				for _, depth := range []int{LegDepth, IntentDepth} {
					out = append(out, search{fmt.Sprintf("depth=%d/admin", depth), Filter{Tenant: "acme"}, depth},
						search{fmt.Sprintf("depth=%d/restricted", depth), Filter{Tenant: "acme", IDs: ids}, depth})
				}
				return out
			}})
	}
	cases = append(cases, struct {
		name     string
		docs     func() []LexicalDoc
		queries  []string
		searches func(docs []LexicalDoc) []search
	}{"words/cards=10000", func() []LexicalDoc { return lexBenchDocs(10_000) }, []string{"refund the customer's invoice payment"},
		func(docs []LexicalDoc) []search {
			var ids []string
			for _, d := range docs {
				if d.Tenant == "acme" && len(ids) < 5_000 {
					ids = append(ids, d.ID)
				}
			}
			return []search{{"tenant", Filter{Tenant: "acme"}, 20}, {"ids5000", Filter{Tenant: "acme", IDs: ids}, 20}}
		}})
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			docs := c.docs()
			x := newTestLexical(b, docs...)
			var qs [][]queryTerm
			for _, q := range c.queries {
				qs = append(qs, x.queryTerms(nil, []WeightedText{{Text: q, Weight: 1}}))
			}
			for _, s := range c.searches(docs) {
				set := x.Prepare(s.f)
				for _, mode := range []lexMode{lexExhaustive, lexAdaptive} {
					b.Run(fmt.Sprintf("%s/mode=%d", s.name, mode), func(b *testing.B) {
						var dst []Hit
						i := 0
						TimedLoop(b, func() {
							var err error
							if dst, err = x.searchTermsBy(dst, qs[i%len(qs)], set, s.f, s.depth, false, mode); err != nil {
								b.Fatal(err)
							}
							i++
						})
					})
				}
			}
		})
	}
}
