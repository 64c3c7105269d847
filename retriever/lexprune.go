package retriever

import (
	"math"
	"slices"
)

// The pruned lexical search: scoreAll's answers, bit for bit, reading
// fewer docs. In the spirit of MaxScore (Turtle and Flood, "Query
// evaluation: strategies and optimizations", 1995), with bounds on what
// each term can add to a score, but term at a time like scoreAll, over
// segments of the doc numbers (lexSegment), so that a posting costs a
// sequential read and only the docs that may make the top are read:
//
//   - every term gets an upper bound ub on what it adds to the score of a
//     doc holding it (tfBound, below);
//   - the first segments are scored as scoreAll scores, until limit docs
//     were offered: the heap's worst score is then the bar θ, which only
//     rises;
//   - in each later segment, a first walk of the query's postings sums,
//     per doc, the bounds of the terms it holds; the second walk scores,
//     as scoreAll does, only the docs whose sum reaches θ (raised by a
//     slack for rounding, below) — the others are never read;
//   - once the bounds of all the terms together are under θ, no doc left
//     can reach it and the search ends.
//
// Exactness. A doc not scored has a score under θ, the score of the
// heap's worst: it is not better, and offer would have refused it; θ only
// rises, so neither would it have been kept later. A doc scored is scored
// as scoreAll scores it: the same contributions (the same expression of
// the same IDF and the same postingTF) added in term order from zero, and
// its coverage and evidence likewise. The heap keeps the best limit of a
// total order (score, then ID), whatever the order docs are offered in. So
// the hits are scoreAll's, with the same scores, ties and order
// (TestLexicalPrunedMatchesExhaustive).
//
// The bounds are compared with a slack for rounding: all quantities are
// positive normal floats (prunable keeps the weights within lexPruneRange),
// so a computed sum of k of them is within a relative k·2⁻⁵³ of the real
// one, a contribution within ~25·2⁻⁵³ of its real value and its bound
// within ~35·2⁻⁵³ of its own, which is at least the contribution's. For at
// most lexPruneMaxTerms terms the computed scores and bounds are thus
// within a relative 10⁻¹² of the real ones, far inside lexPruneSlack: a
// doc is left out only when its bound, raised by lexPruneSlack, is still
// under θ.

const (
	lexPruneSlack    = 1e-9
	lexPruneMaxTerms = 1024
	lexPruneRange    = 1e100 // weights in [1/lexPruneRange, lexPruneRange]
	// The service prunes in an index of more than lexPruneMinDocs docs, and
	// in a set whose frequencies are counted (not whole) of at least
	// lexPruneMinSet.
	lexPruneMinDocs = 4096
	lexPruneMinSet  = 16384
)

// raiseBound is bound raised to hold a posting's field frequencies tf.
func raiseBound(bound lexTF, tf *[maxLexFields]uint16) lexTF {
	for i, v := range tf {
		v := lexTF(min(v, lexTFMax))
		if v > bound>>(lexTFBits*i)&lexTFMax {
			bound = bound&^(lexTFMax<<(lexTFBits*i)) | v<<(lexTFBits*i)
		}
	}
	return bound
}

// tfBound is at least postingTF of every posting of a term whose field
// frequencies bound holds (LexicalIndex.bound), in a candidate set of
// average field lengths avg. A field's share f/(1-b+b·n/avg) is largest
// for the shortest field, and a field of f occurrences is at least f
// tokens long (n ≥ f), so it is at most F/(1-b+b·F/avg) for the field's
// highest frequency F, which grows with F towards avg/b: the bound of a
// field whose frequencies reach lexTFMax. Call with x.mu held.
func (x *LexicalIndex) tfBound(bound lexTF, avg *[maxLexFields]float64) float64 {
	tf := 0.0
	for i, fl := range x.fields {
		f := float64(bound >> (lexTFBits * i) & lexTFMax)
		if f == 0 || avg[i] == 0 {
			continue
		}
		share := avg[i] / bm25B
		if f < lexTFMax {
			share = f / (1 - bm25B + bm25B*f/avg[i])
		}
		tf += fl.boost * share
	}
	return tf
}

// lexMode is how a search scores: lexAdaptive is the service's; the
// others are for the tests, which compare them.
type lexMode int

const (
	lexExhaustive    lexMode = iota // scoreAll
	lexAdaptive                     // scorePruned where prunable says it pays
	lexSmallSegments                // scorePruned in small segments wherever it can answer
	lexSegmentsOnly                 // lexSmallSegments bounding no doc (the segments' walk alone)
)

// segment is the mode's segment size (scorePruned).
func (m lexMode) segment() int {
	if m == lexAdaptive {
		return lexSegment
	}
	return lexTestSegment
}

// lexTestSegment is the segment size of the tests' modes: small, for
// many segments in small catalogues.
const lexTestSegment = 256

// prunable says whether scorePruned answers the search in mode: some
// candidates may be left out (the limit is under the set's size), and the
// weights are such that every score and bound is a normal float (see
// above). In the service's mode, also that pruning can pay: the index is
// more than lexPruneMinDocs, and a set that is not whole (whose document
// frequencies must be counted before scoring, a walk of the postings of
// its own) holds at least lexPruneMinSet docs; smaller ones are searched
// by scoreAll, which costs less there (BenchmarkLexicalPruned).
func (x *LexicalIndex) prunable(terms []queryTerm, set *LexSet, limit int, mode lexMode) bool {
	switch {
	case mode == lexExhaustive || limit >= set.n || len(terms) > lexPruneMaxTerms:
		return false
	case mode == lexAdaptive && (len(x.docs) <= lexPruneMinDocs || !set.whole() && set.n < lexPruneMinSet):
		return false
	}
	in := func(w float64) bool { return w >= 1/lexPruneRange && w <= lexPruneRange }
	for _, f := range x.fields {
		if !in(f.boost) {
			return false
		}
	}
	for _, t := range terms {
		if !in(t.qtf) {
			return false
		}
	}
	return true
}

// lexRun is a query term's postings in scorePruned: where the segment at
// hand starts and ends in them, and the bound of what the term adds to a
// score.
type lexRun struct {
	ps       []posting
	pos, end int
	ub       float64
}

// find is the index of the first posting of doc d or after in ps, from i
// on (postings are in doc order): it gallops from i.
func find(ps []posting, i int, d uint32) int {
	if i >= len(ps) || ps[i].doc >= d {
		return i
	}
	lo, step := i, 1 // ps[lo].doc < d
	for i = lo + 1; i < len(ps) && ps[i].doc < d; i = lo + step {
		lo, step = i, step*2
	}
	hi := min(i, len(ps)) // the first at or after d is in (lo, hi]
	for lo+1 < hi {
		mid := int(uint(lo+hi) >> 1)
		if ps[mid].doc < d {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// lexSegment is how many doc numbers scorePruned takes at a time: the
// bar rises between segments.
const lexSegment = 2048

// lexPruneScratch is a pruned search's scratch, reused (lexAcc).
type lexPruneScratch struct {
	runs   []lexRun  // by query term
	idfOne []float64 // by query term
	idf    []float64 // by query term
	bounds []float64 // by doc number in the segment at hand
}

func (p *lexPruneScratch) reset() {
	clear(p.runs) // the postings they held
	p.runs, p.idfOne, p.idf = p.runs[:0], p.idfOne[:0], p.idf[:0]
}

// lexBar is what a doc's postings must reach to be scored: the bound of
// the doc at lo+i, summed over the terms it holds, is bounds[i]; with it
// raised by lexPruneSlack, it must reach theta. A zero lexBar lets every
// doc through.
type lexBar struct {
	bounds []float64
	lo     uint32
	theta  float64
}

// lets says whether doc num may reach the bar.
func (b *lexBar) lets(num uint32) bool {
	return b.bounds == nil || b.bounds[num-b.lo]*(1+lexPruneSlack) >= b.theta
}

// scorePruned is scoreAll offering only the docs that can still make the
// top (see above); scored is how many docs it scored. Call with x.mu
// held.
func (x *LexicalIndex) scorePruned(acc *lexAcc, top *lexTop, terms []queryTerm, set *LexSet, mode lexMode) (coverTotal, evidenceTotal float64, scored int) {
	n := float64(set.n)
	for _, t := range terms {
		coverTotal += t.cover
	}
	// Every IDF first: a term's document frequency in the set is the
	// length of its postings when the set is every doc of the index's only
	// tenant, and is counted otherwise.
	whole := set.whole()
	sc := &acc.prune
	total := 0.0 // the bounds' sum
	for _, t := range terms {
		var ps []posting
		no, ok := x.termNo[string(t.term)]
		if ok {
			ps = x.postings[no]
		}
		n1 := len(ps)
		if !whole {
			n1 = set.count(ps)
		}
		df := float64(n1)
		idfOne := math.Log(1 + (n-df+0.5)/(df+0.5))
		idf := t.qtf * idfOne
		evidenceTotal += t.cover * idfOne
		run := lexRun{}
		if n1 > 0 {
			tf := x.tfBound(x.bound[no], &set.avg)
			run = lexRun{ps: ps, ub: idf * tf / (bm25K1 + tf)}
			total += run.ub
		}
		sc.runs, sc.idfOne, sc.idf = append(sc.runs, run), append(sc.idfOne, idfOne), append(sc.idf, idf)
	}

	size := mode.segment()
	sc.bounds = slices.Grow(sc.bounds[:0], size)[:size]
	for lo := 0; lo < len(x.docs); lo += size {
		hi := uint32(min(lo+size, len(x.docs)))
		theta, full := top.bar()
		if full && total*(1+lexPruneSlack) < theta {
			break // no doc left can reach the bar
		}
		for j := range sc.runs {
			r := &sc.runs[j]
			r.pos = find(r.ps, r.pos, uint32(lo))
			r.end = find(r.ps, r.pos, hi)
		}
		bar := lexBar{lo: uint32(lo), theta: theta}
		if full && mode != lexSegmentsOnly {
			// The bound of each doc of the segment: the sum of the bounds
			// of the terms it holds.
			bar.bounds = sc.bounds[:int(hi)-lo]
			clear(bar.bounds)
			for j := range sc.runs {
				r := &sc.runs[j]
				for _, q := range r.ps[r.pos:r.end] {
					bar.bounds[q.doc-bar.lo] += r.ub
				}
			}
		}
		// The docs that may reach the bar, as scoreAll scores them: a term
		// at a time in term order, each sum from zero.
		from := len(acc.touched)
		for j := range sc.runs {
			r := &sc.runs[j]
			acc.held = x.holders(acc.held[:0], r.ps[r.pos:r.end], set, acc, &bar)
			acc.credit(sc.idf[j], terms[j].cover, sc.idfOne[j])
			r.pos = r.end
		}
		for _, num := range acc.touched[from:] {
			if s := acc.score[num]; s > 0 {
				top.offer(num, s)
			}
		}
		scored += len(acc.touched) - from
	}
	return coverTotal, evidenceTotal, scored
}

// count is the number of postings ps of docs in s. Call with the index's
// mu held.
func (s *LexSet) count(ps []posting) int {
	n := 0
	if s.all {
		of, t := s.x.tenantOf, s.tenant
		for _, p := range ps {
			if of[p.doc] == t {
				n++
			}
		}
		return n
	}
	bits := s.bits
	for _, p := range ps {
		if int(p.doc/64) < len(bits) && bits[p.doc/64]&(1<<(p.doc%64)) != 0 {
			n++
		}
	}
	return n
}

// whole says the set is every doc of the index's only tenant: a term's
// document frequency in it is the length of its postings. Call with the
// index's mu held.
func (s *LexSet) whole() bool { return s.all && len(s.x.tenants) == 1 }
