package retriever

import (
	"cmp"
	"math"
	"slices"
)

// The pruned lexical search: MaxScore (Turtle and Flood, "Query evaluation:
// strategies and optimizations", 1995), document at a time over the
// doc-ordered postings, with the exhaustive walk's answers bit for bit.
//
// Every term gets an upper bound ub on what it can add to a candidate's
// score (tfBound, below). Docs are taken in doc order; once the heap of the
// best limit is full, its worst score θ is a bar a doc must reach to be
// kept. With the terms sorted by ub ascending, the longest prefix whose ub
// sum is under θ is "non-essential": a doc holding none but those cannot
// reach θ, so only the other terms' postings are walked, and the
// non-essential ones are looked up (galloping) for the docs those yield,
// highest bound first, giving up on a doc as soon as what it has plus the
// bounds of the terms not yet looked up is under θ.
//
// Exactness. A doc given up on has a score under θ, the score of the
// heap's worst: it is not better, and offer would have refused it; θ only
// rises, so neither would it have been kept later. A doc not given up on
// has every term looked up, and its score is summed as scoreAll sums it:
// the same contributions (the same expression of the same IDF and the
// same postingTF), added in term order from zero; its coverage and
// evidence likewise. The heap keeps the best limit of a total order
// (score, then ID), whatever the order docs are offered in. So the hits
// are scoreAll's, with the same scores, ties and order
// (TestLexicalPrunedMatchesExhaustive).
//
// The bounds are compared with a slack for rounding: all quantities are
// positive normal floats (prunable keeps the weights within lexPruneRange),
// so a computed sum of k of them is within a relative k·2⁻⁵³ of the real
// one, a contribution within ~25·2⁻⁵³ of its real value and its bound
// within ~35·2⁻⁵³ of its own, which is at least the contribution's. For at
// most lexPruneMaxTerms terms the computed scores and bounds are thus
// within a relative 10⁻¹² of the real ones, far inside lexPruneSlack: a
// doc is given up on only when its bound, raised by lexPruneSlack, is
// still under θ.

const (
	lexPruneSlack    = 1e-9
	lexPruneMaxTerms = 1024
	lexPruneRange    = 1e100 // weights in [1/lexPruneRange, lexPruneRange]
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

// prunable says whether scorePruned can answer the search: some candidates
// may be left out (the limit is under the set's size), and the weights are
// such that every score and bound is a normal float (see above).
func (x *LexicalIndex) prunable(terms []queryTerm, set *LexSet, limit int) bool {
	if limit >= set.n || len(terms) > lexPruneMaxTerms {
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

// lexCursor is a query term's place in its postings (scorePruned).
type lexCursor struct {
	ps  []posting
	pos int
	doc uint32  // ps[pos].doc, or lexNoDoc past the end (essential terms)
	j   int     // the term's index in the query
	ub  float64 // at least what it adds to a doc's score
}

// lexNoDoc is past every doc number (a doc number indexes a slice).
const lexNoDoc = math.MaxUint32

// lexMembers says which postings' docs are in a candidate set, by the
// cheapest test that holds: every posting (the set is every doc of the
// index's only tenant), the set's bits, or the doc's tenant.
type lexMembers struct {
	whole bool
	set   *LexSet
	docs  []lexDoc
}

func (m *lexMembers) has(num uint32) bool {
	switch {
	case m.whole:
		return true
	case m.set.all:
		return m.set.has(num, &m.docs[num])
	}
	return int(num/64) < len(m.set.bits) && m.set.bits[num/64]&(1<<(num%64)) != 0
}

// next moves c to its next posting of a doc in the set, from pos on.
func (c *lexCursor) next(m *lexMembers) {
	for ; c.pos < len(c.ps); c.pos++ {
		if d := c.ps[c.pos].doc; m.has(d) {
			c.doc = d
			return
		}
	}
	c.doc = lexNoDoc
}

// seek moves c to its first posting of doc d or after, and says whether
// that one is d's. Postings are in doc order: it gallops from where c is.
func (c *lexCursor) seek(d uint32) bool {
	ps, i := c.ps, c.pos
	if i < len(ps) && ps[i].doc < d {
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
		i = hi
	}
	c.pos = i
	return i < len(ps) && ps[i].doc == d
}

// lexPruneScratch is a pruned search's scratch, reused (lexAcc).
type lexPruneScratch struct {
	cursors []lexCursor
	pre     []float64 // pre[k]: the sum of cursors[:k]'s bounds
	idfOne  []float64 // by query term
	idf     []float64 // by query term
	tf      []lexTF   // by query term: its posting of the doc at hand
	held    []int     // the query terms the doc at hand holds
}

func (p *lexPruneScratch) reset() {
	clear(p.cursors) // the postings they held
	p.cursors, p.pre, p.idfOne, p.idf, p.held = p.cursors[:0], p.pre[:0], p.idfOne[:0], p.idf[:0], p.held[:0]
}

// scorePruned is scoreAll offering only the docs that can still make the
// top (see above); scored is how many it scored fully. Call with x.mu
// held.
//
// A doc's terms are found in the postings before the doc is read: it is
// given up on by the bounds of the terms it holds, and read (its field
// lengths, for the scores) only if those reach θ.
func (x *LexicalIndex) scorePruned(acc *lexAcc, top *lexTop, terms []queryTerm, set *LexSet) (coverTotal, evidenceTotal float64, scored int) {
	n := float64(set.n)
	for _, t := range terms {
		coverTotal += t.cover
	}
	// Every IDF first: a term's document frequency in the set is the
	// length of its postings when the set is the only tenant's every doc,
	// and is counted otherwise.
	members := lexMembers{whole: set.all && len(x.tenants) == 1, set: set, docs: x.docs}
	sc := &acc.prune
	for j, t := range terms {
		var ps []posting
		no, ok := x.termNo[string(t.term)]
		if ok {
			ps = x.postings[no]
		}
		n1 := len(ps)
		if !members.whole {
			n1 = 0
			for _, p := range ps {
				if members.has(p.doc) {
					n1++
				}
			}
		}
		df := float64(n1)
		idfOne := math.Log(1 + (n-df+0.5)/(df+0.5))
		idf := t.qtf * idfOne
		evidenceTotal += t.cover * idfOne
		sc.idfOne, sc.idf = append(sc.idfOne, idfOne), append(sc.idf, idf)
		if n1 > 0 {
			tf := x.tfBound(x.bound[no], &set.avg)
			sc.cursors = append(sc.cursors, lexCursor{ps: ps, j: j, ub: idf * tf / (bm25K1 + tf)})
		}
	}
	cur := sc.cursors
	slices.SortFunc(cur, func(a, b lexCursor) int { return cmp.Or(cmp.Compare(a.ub, b.ub), a.j-b.j) })
	pre := append(sc.pre, 0)
	for _, c := range cur {
		pre = append(pre, pre[len(pre)-1]+c.ub)
	}
	sc.pre = pre
	tfs := slices.Grow(sc.tf[:0], len(terms))[:len(terms)]
	sc.tf = tfs
	held := sc.held
	for k := range cur {
		cur[k].next(&members)
	}

	ne := 0 // cur[:ne] are the non-essential terms
	theta := 0.0
	for {
		d := uint32(lexNoDoc)
		for k := ne; k < len(cur); k++ {
			d = min(d, cur[k].doc)
		}
		if d == lexNoDoc {
			break
		}
		// The terms d holds, and what they can add at most.
		held = held[:0]
		bound := 0.0
		for k := ne; k < len(cur); k++ {
			if c := &cur[k]; c.doc == d {
				tfs[c.j], held, bound = c.ps[c.pos].tf, append(held, c.j), bound+c.ub
				c.pos++
				c.next(&members)
			}
		}
		k := ne - 1
		for ; k >= 0; k-- {
			if (bound+pre[k+1])*(1+lexPruneSlack) < theta {
				break
			}
			if c := &cur[k]; c.seek(d) {
				tfs[c.j], held, bound = c.ps[c.pos].tf, append(held, c.j), bound+c.ub
			}
		}
		if k >= 0 || bound*(1+lexPruneSlack) < theta {
			continue // it cannot reach θ
		}
		// The score as scoreAll sums it: in term order, from zero.
		scored++
		slices.Sort(held)
		doc := &x.docs[d]
		score, matched, evidence := 0.0, 0.0, 0.0
		var mask uint16
		for _, j := range held {
			if tf, m := x.postingTF(tfs[j], doc, &set.avg); tf > 0 {
				score += sc.idf[j] * tf / (bm25K1 + tf)
				matched += terms[j].cover
				evidence += terms[j].cover * sc.idfOne[j]
				mask |= m
			}
		}
		if !(score > 0) || !top.offer(d, score) {
			continue
		}
		if !acc.seen[d] {
			acc.seen[d] = true
			acc.touched = append(acc.touched, d)
		}
		acc.fields[d], acc.matched[d], acc.evidence[d] = mask, matched, evidence
		if bar, full := top.bar(); full {
			theta = bar
			for ne < len(cur) && pre[ne+1]*(1+lexPruneSlack) < theta {
				ne++
			}
		}
	}
	sc.held = held
	return coverTotal, evidenceTotal, scored
}
