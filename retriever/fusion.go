package retriever

import (
	"cmp"
	"math"
	"slices"
	"strings"
)

// Fused is one card after fusing the lexical and semantic legs.
type Fused struct {
	ID    string
	Score float64 // fused score
	// Lexical and Semantic are the raw scores of the legs, 0 if absent.
	Lexical, Semantic float64
	// LexicalRank and SemanticRank are 1-based positions in the legs, 0 if
	// absent from that leg.
	LexicalRank, SemanticRank int
	// Fields are the matched fields from the lexical hit (a copy).
	Fields []string
	// Coverage is the lexical hit's query-term coverage (0 if absent).
	Coverage float64
	// Evidence is the lexical hit's IDF-weighted coverage (0 if absent).
	Evidence float64
	// Confidence is the calibrated probability that the card fits the
	// ranked text (ConfidenceModel), set by the pipeline after fusion; the
	// fusion functions leave it 0.
	Confidence float64

	// e is the card's entry in the view, which the pipeline attaches after
	// fusion so that its later steps look it up once; nil outside it.
	e *entry
	// mask is the lexical hit's mask (Hit.mask), from which the pipeline
	// names the fields of its winners.
	mask uint16
	// key is the card's key (Hit.key) inside the pipeline; 0 in the lists
	// the exported functions return.
	key uint32
}

// sameCard says two tools of ranked lists are one card: the same entry in
// the pipeline, the same ID elsewhere.
func sameCard(a, b *Fused) bool {
	if a.e != nil && b.e != nil {
		return a.e == b.e
	}
	return a.ID == b.ID
}

// DefaultRRFK is the k of reciprocal rank fusion used unless configured
// otherwise (the value from Cormack et al., also the common default).
const DefaultRRFK = 60

// FuseRRF fuses two legs with reciprocal rank fusion: a card's score is the
// sum over the legs that hold it of 1/(k+rank), rank 1-based by position
// (legs are sorted best first). A k <= 0 (or NaN) means DefaultRRFK. If an ID
// occurs more than once in a leg, its first (best) position counts.
//
// The result holds every ID of either leg, sorted by Score descending, then ID
// ascending, so equal inputs always give the same order. Inputs are not
// modified.
func FuseRRF(lexical, semantic []Hit, k float64) []Fused {
	lexical, semantic = keyByID(lexical, semantic)
	return unkeyed(fuseRRF(lexical, semantic, k, &fuseBuf{}))
}

// fuseRRF is FuseRRF of keyed hits (Hit.key, every one set), filling buf's
// list.
func fuseRRF(lexical, semantic []Hit, k float64, buf *fuseBuf) []Fused {
	if !(k > 0) || math.IsInf(k, 1) {
		k = DefaultRRFK
	}
	out := joinLegs(lexical, semantic, buf)
	for i := range out {
		f := &out[i]
		if f.LexicalRank > 0 {
			f.Score += 1 / (k + float64(f.LexicalRank))
		}
		if f.SemanticRank > 0 {
			f.Score += 1 / (k + float64(f.SemanticRank))
		}
	}
	sortFused(out)
	return out
}

// FuseRelative fuses two legs by relative score, as Weaviate's
// relativeScoreFusion: each leg's scores are min-max normalised to [0,1]
// (in a leg with one hit, or whose hits all score the same, every hit gets
// 1), and a card's score is (1-alpha)*lexical + alpha*semantic, a leg that
// does not hold the card contributing 0. alpha = 1 is pure semantic, 0 pure
// lexical; it is clamped to [0,1], and NaN means 0.5. If an ID occurs more
// than once in a leg, its first (best) position counts.
//
// A strong match is kept: unless alpha is 1, the lexical leg's first hit
// scores 1, as if both legs ranked it first, when its evidence is clear
// (Hit.Evidence, the IDF-weighted share of the query's terms it matched, at
// least ClearEvidence), so a weak semantic leg cannot pull it down.
//
// The result holds every ID of either leg (with alpha 0, semantic-only cards
// score 0 and come last, and vice versa), sorted by Score descending, then ID
// ascending. Inputs are not modified.
func FuseRelative(lexical, semantic []Hit, alpha float64) []Fused {
	lexical, semantic = keyByID(lexical, semantic)
	return unkeyed(fuseRelative(lexical, semantic, alpha, &fuseBuf{}))
}

// keyByID returns copies of the legs whose hits are keyed by their IDs
// (the first ID met is 1, the next new one 2, …), for the exported fusion
// functions, whose hits may come without keys.
func keyByID(lexical, semantic []Hit) ([]Hit, []Hit) {
	keys := make(map[string]uint32, len(lexical)+len(semantic))
	key := func(hs []Hit) []Hit {
		out := slices.Clone(hs)
		for i := range out {
			k, ok := keys[out[i].ID]
			if !ok {
				k = uint32(len(keys) + 1)
				keys[out[i].ID] = k
			}
			out[i].key = k
		}
		return out
	}
	return key(lexical), key(semantic)
}

// unkeyed clears the keys of a fused list that leaves the package.
func unkeyed(out []Fused) []Fused {
	for i := range out {
		out[i].key = 0
	}
	return out
}

// fuseRelative is FuseRelative of keyed hits (Hit.key, every one set),
// filling buf's list.
func fuseRelative(lexical, semantic []Hit, alpha float64, buf *fuseBuf) []Fused {
	switch {
	case math.IsNaN(alpha):
		alpha = 0.5
	case alpha < 0:
		alpha = 0
	case alpha > 1:
		alpha = 1
	}
	out := joinLegs(lexical, semantic, buf)
	lexNorm, semNorm := minMaxNormalisers(out)
	for i := range out {
		f := &out[i]
		var lex, sem float64
		if f.LexicalRank > 0 {
			lex = lexNorm.of(f.Lexical)
		}
		if f.SemanticRank > 0 {
			sem = semNorm.of(f.Semantic)
		}
		f.Score = (1-alpha)*lex + alpha*sem
		if alpha < 1 && f.LexicalRank == 1 && f.Evidence >= ClearEvidence {
			f.Score = 1
		}
	}
	sortFused(out)
	return out
}

// ClearEvidence is the lexical evidence (Hit.Evidence) from which the
// lexical leg's first hit is a clear match that fusion keeps first
// (FuseRelative). Measured on every labelled dataset with and without
// search examples (docs/EVAL.md): it changes nothing without examples and
// keeps the direct matches examples bring to short requests.
const ClearEvidence = 0.7

// fuseBuf is the scratch of one fusion that the pipeline reuses across
// requests (Retriever.fuseBufs): the fused list, the positions by key and
// the semantic leg's hits.
// The list lent out is the caller's until it gives the buffer back.
type fuseBuf struct {
	out []Fused
	// at holds, during a join, 1 + the position in out of each key's card
	// (0: not met); it is empty between joins.
	at    keyTable
	terms []queryTerm // the list's analysed text (LexicalIndex.queryTerms)
	lex   []Hit       // the lexical leg's hits
	sem   []Hit       // the semantic leg's hits
	// semDone: sem holds the list's semantic leg, scanned with the
	// request's other lists (Retriever.startLegs).
	semDone bool
	semErr  error // the semantic leg's error, when another goroutine searched it
	// semWait, when set, waits for the scan that fills sem and semDone
	// on another goroutine; it is safe to call more than once.
	semWait func()
	// lexJob, when set, is the list's lexical leg shared with the
	// request's other goroutine (Retriever.startLegs).
	lexJob *lexJob
}

// reset empties the buffer for its next use, dropping what the list held.
func (b *fuseBuf) reset() {
	clear(b.out[:cap(b.out)])
	b.out = b.out[:0]
	clear(b.terms[:cap(b.terms)])
	b.terms = b.terms[:0]
	clear(b.lex[:cap(b.lex)])
	b.lex = b.lex[:0]
	clear(b.sem[:cap(b.sem)])
	b.sem, b.semDone, b.semErr, b.semWait, b.lexJob = b.sem[:0], false, nil, nil, nil
}

// joinLegs merges the legs by key (every hit's key set), recording raw
// scores, ranks and fields; Score is left 0. The order of the result is
// unspecified until sortFused. The result is buf's list.
func joinLegs(lexical, semantic []Hit, buf *fuseBuf) []Fused {
	out := slices.Grow(buf.out[:0], len(lexical)+len(semantic))
	at := &buf.at
	at.reset(len(lexical) + len(semantic))
	for i, h := range lexical {
		p := at.slot(h.key)
		if *p != 0 {
			continue
		}
		*p = int32(len(out) + 1)
		out = append(out, Fused{
			ID:          h.ID,
			key:         h.key,
			Lexical:     h.Score,
			LexicalRank: i + 1,
			Fields:      slices.Clone(h.Fields),
			mask:        h.mask,
			Coverage:    h.Coverage,
			Evidence:    h.Evidence,
		})
	}
	for i, h := range semantic {
		p := at.slot(h.key)
		if *p == 0 {
			*p = int32(len(out) + 1)
			out = append(out, Fused{ID: h.ID, key: h.key, Semantic: h.Score, SemanticRank: i + 1})
			continue
		}
		if f := &out[*p-1]; f.SemanticRank == 0 {
			f.Semantic = h.Score
			f.SemanticRank = i + 1
		}
	}
	buf.out = out
	return out
}

// keyTable maps keys (≥ 1) to int32 values by open addressing in arrays of
// a power-of-two length at least twice its keys (it grows as keys come),
// so that a request's tables are as large as the request, not as the
// view's numbers.
type keyTable struct {
	keys []uint32 // 0: a free slot
	vals []int32
	n    int // keys held
}

// reset empties the table, sized for n keys (never smaller than it was:
// the scratch keeps the size of the largest request).
func (t *keyTable) reset(n int) {
	size := max(16, len(t.keys))
	for size < 2*n {
		size *= 2
	}
	if cap(t.keys) < size {
		t.keys, t.vals = make([]uint32, size), make([]int32, size)
	}
	t.keys, t.vals, t.n = t.keys[:size], t.vals[:size], 0
	clear(t.keys)
	clear(t.vals)
}

// slot is key's value, a new one 0.
func (t *keyTable) slot(key uint32) *int32 {
	if 2*(t.n+1) > len(t.keys) {
		old, vals := t.keys, t.vals
		t.keys, t.vals, t.n = make([]uint32, max(16, 2*len(old))), make([]int32, max(16, 2*len(old))), 0
		for i, k := range old {
			if k != 0 {
				*t.slot(k) = vals[i]
			}
		}
	}
	mask := uint32(len(t.keys) - 1)
	for i := (key * 0x9e3779b1) & mask; ; i = (i + 1) & mask {
		switch t.keys[i] {
		case key:
			return &t.vals[i]
		case 0:
			t.keys[i] = key
			t.n++
			return &t.vals[i]
		}
	}
}

// get is key's value, 0 when it has none.
func (t *keyTable) get(key uint32) int32 {
	if len(t.keys) == 0 {
		return 0
	}
	mask := uint32(len(t.keys) - 1)
	for i := (key * 0x9e3779b1) & mask; ; i = (i + 1) & mask {
		switch t.keys[i] {
		case key:
			return t.vals[i]
		case 0:
			return 0
		}
	}
}

// reach returns s long enough to index i: s itself, or s grown (at least
// doubled) with zeros past its old length. The pipeline's tables indexed
// by entry, group and slot numbers grow with it.
func reach[T any](s []T, i uint32) []T {
	n := len(s)
	if int(i) < n {
		return s
	}
	grown := max(int(i)+1, 2*n)
	s = slices.Grow(s, grown-n)[:grown]
	clear(s[n:])
	return s
}

// minMaxNormalisers return the min-max maps of the two legs' scores onto
// [0,1], over the joined legs (each ID's first occurrence in a leg, as
// joinLegs keeps it). A leg with one distinct score maps everything to 1.
func minMaxNormalisers(joined []Fused) (lexical, semantic minMaxMap) {
	lexLo, lexHi := math.Inf(1), math.Inf(-1)
	semLo, semHi := math.Inf(1), math.Inf(-1)
	for i := range joined {
		f := &joined[i]
		if f.LexicalRank > 0 {
			lexLo, lexHi = min(lexLo, f.Lexical), max(lexHi, f.Lexical)
		}
		if f.SemanticRank > 0 {
			semLo, semHi = min(semLo, f.Semantic), max(semHi, f.Semantic)
		}
	}
	return minMax(lexLo, lexHi), minMax(semLo, semHi)
}

func minMax(lo, hi float64) minMaxMap {
	span := hi - lo
	if !(span > 0) || math.IsInf(span, 0) {
		return minMaxMap{flat: true}
	}
	return minMaxMap{lo: lo, span: span}
}

// minMaxMap maps a leg's scores onto [0,1]: (s − lo) / span, or 1 for
// every score of a flat leg.
type minMaxMap struct {
	lo, span float64
	flat     bool
}

func (m minMaxMap) of(s float64) float64 {
	if m.flat {
		return 1
	}
	return (s - m.lo) / m.span
}

// sortFused orders by Score descending, then ID ascending. It sorts keys
// and then moves each element once, in place: a Fused is large, and a sort
// that swaps elements moves each many times. A key is a uint64 that orders
// as the score does, down to its last 16 bits, which hold the element's
// position: a sort of plain integers, with no comparison function and no
// ID read but for the rare runs of scores equal in their first 48 bits,
// which are then put in order by score and ID.
func sortFused(out []Fused) {
	if len(out) < 2 {
		return
	}
	var kbuf [2 * LegDepth]uint64
	keys := kbuf[:0]
	if len(out) > len(kbuf) {
		keys = make([]uint64, 0, len(out))
	}
	for i := range out {
		s := out[i].Score
		if s != s || len(out) > 1<<16 {
			sortFusedByScore(out) // a NaN, or too many positions for the keys
			return
		}
		keys = append(keys, scoreKey(s, i))
	}
	orderKeys(keys, func(i, j int) int {
		x, y := &out[i], &out[j]
		return cmp.Or(cmp.Compare(y.Score, x.Score), strings.Compare(x.ID, y.ID))
	})
	var buf [2 * LegDepth]int32
	idx := buf[:0]
	if len(out) > len(buf) {
		idx = make([]int32, 0, len(out))
	}
	for _, k := range keys {
		idx = append(idx, int32(k&0xffff))
	}
	permute(out, idx)
}

// scoreKey is the sort key of the score s (not NaN) of element i (under
// 1<<16) of a list: its order as descending gives it in the first 48 bits,
// i in the last 16.
func scoreKey(s float64, i int) uint64 { return descending(s)&^0xffff | uint64(i) }

// orderKeys sorts scoreKey keys, the best score first, and puts each run of
// keys equal in their first 48 bits (scores equal, or nearly) in the order
// of cmpAt of their elements' positions (the full score, then the ID).
func orderKeys(keys []uint64, cmpAt func(i, j int) int) {
	slices.Sort(keys)
	for i := 0; i < len(keys); {
		j := i + 1
		for j < len(keys) && keys[j]>>16 == keys[i]>>16 {
			j++
		}
		if j-i > 1 {
			slices.SortFunc(keys[i:j], func(a, b uint64) int { return cmpAt(int(a&0xffff), int(b&0xffff)) })
		}
		i = j
	}
}

// descending maps a score (not NaN) to a uint64 that orders the scores
// from the largest down: -0 as 0, a sign-and-magnitude float turned into
// an unsigned order, reversed.
func descending(s float64) uint64 {
	if s == 0 {
		s = 0 // -0 is 0
	}
	b := math.Float64bits(s)
	if b>>63 == 0 {
		b |= 1 << 63
	} else {
		b = ^b
	}
	return ^b
}

// sortFusedByScore is sortFused by comparisons of the scores (a NaN last),
// for the lists whose keys would not order them.
func sortFusedByScore(out []Fused) {
	idx := make([]int32, len(out))
	for i := range idx {
		idx[i] = int32(i)
	}
	slices.SortFunc(idx, func(a, b int32) int {
		x, y := &out[a], &out[b]
		switch {
		case x.Score > y.Score:
			return -1
		case x.Score < y.Score:
			return 1
		case x.Score == y.Score:
			return strings.Compare(x.ID, y.ID)
		}
		return cmp.Compare(y.Score, x.Score) // a NaN: last, as cmp orders it
	})
	permute(out, idx)
}

// permute applies a permutation in place: position k takes element idx[k],
// cycle by cycle (a done position is marked by a negative index).
func permute(out []Fused, idx []int32) {
	for start := range idx {
		if idx[start] < 0 || int(idx[start]) == start {
			continue
		}
		tmp := out[start]
		k := start
		for {
			from := int(idx[k])
			idx[k] = -1
			if from == start {
				out[k] = tmp
				break
			}
			out[k] = out[from]
			k = from
		}
	}
}
