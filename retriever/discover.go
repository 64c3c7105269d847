package retriever

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/seed0cff8200/cardex/cards"
)

// Request limits and defaults.
const (
	DefaultTopK    = 5
	MaxTopK        = 50
	MaxQueryLen    = 1000 // code points
	MaxAlwaysLoad  = 5
	DefaultAlpha   = 0.5
	FusionRRF      = "rrf"
	FusionRelative = "relative"
	// DefaultFusion is relative-score fusion: with the built-in embedder it
	// beat reciprocal rank fusion on every dataset of ../shared/eval
	// (docs/EVAL.md), because RRF gives a weak leg's rank the same weight
	// as a strong one's.
	DefaultFusion = FusionRelative
	// LegDepth is how many hits each leg contributes to fusion, whatever
	// top_k is: fused ranks depend on the depth, so a fixed depth makes every
	// shortlist a prefix of one ranking (top_k 3 is the head of top_k 50).
	LegDepth = 4 * MaxTopK
	// IntentDepth is the same for an intent's list: an intent is one step
	// of a request whose answer is merged in turns (MergeFair), so only its
	// head reaches the answer, and MaxTopK hits a leg still let one intent
	// fill the largest top_k alone. A request of three intents costs 1.2–1.3×
	// a query instead of 2.7× at 1,000 cards, with recall unchanged within
	// ±0.012 on every dataset (docs/EVAL.md, "Intent depth").
	IntentDepth = MaxTopK
)

// Request is one DiscoverTools call.
type Request struct {
	Caller Caller
	// Query is the request as one text. It may be empty when Intents are
	// given; when both are given, the query is one more ranked list.
	Query string
	// Intents are the parts of a multi-step request, as the orchestrator's
	// model states them (at most MaxIntents, each at most MaxQueryLen
	// characters). Each is ranked inside the same candidate set and the
	// lists are merged fairly (MergeFair).
	Intents []string
	TopK    int     // 0 → DefaultTopK
	Fusion  string  // "" → DefaultFusion; "relative" → relative score with Alpha; "rrf" → RRF (k = 60)
	Alpha   float64 // semantic weight for relative fusion, 0..1
	// AlphaSet says Alpha was given (otherwise DefaultAlpha).
	AlphaSet   bool
	AlwaysLoad []cards.Key
	// HotPins are pins of the caller's most used tools, loaded after
	// AlwaysLoad when the operator turns automatic pins on (at most
	// MaxAlwaysLoad; authorized like every pin).
	HotPins []cards.Key
	Mode    Mode // "" → hybrid; lexical or semantic ranks by one leg alone (mode.go)
	// NoReformulate keeps a low-confidence query as it is (evaluation).
	NoReformulate bool
	// ops are the operators of the query and the intents (operators.go),
	// read by Discover and Search.
	ops requestOps
	// NoCompanions turns the companion step off for this request
	// (companions.go).
	NoCompanions bool
	// MinConfidence (0..1) is the confidence the best tool of a ranked
	// list (the query's, or an intent's) must reach for that list to be
	// answered; a list under it contributes nothing, and when no list
	// clears it the answer holds no ranked tool (Result.Abstained). nil
	// means the retriever's default (WithMinConfidence).
	MinConfidence *float64
}

// Scored is one tool of a shortlist.
type Scored struct {
	Card   cards.Card // a copy, schemas included
	Scores Fused
	Pinned bool
	Reason string
	Tokens int
	// ForQuery: the query's ranked list reached this tool (always true for
	// a ranked tool of a request without intents).
	ForQuery bool
	// Alternatives are near-duplicates of this tool on other servers that
	// its ranked lists placed below it (names only; each is in the caller's
	// candidate set), in rank order.
	Alternatives []cards.Key
	// Intents are the indices (into Request.Intents) of the intents whose
	// ranked lists reached this tool, ascending.
	Intents []int
	// CompanionOf is set when the tool was brought as a companion: the
	// shortlisted tool it is used with (companions.go).
	CompanionOf *cards.Key
}

// Result is a shortlist with its accounting. Every number in it is computed
// over the caller's authorized candidate set only.
type Result struct {
	Tools           []Scored
	CandidateCount  int
	ShortlistTokens int64
	CatalogTokens   int64
	// Degraded: part of the pipeline (the semantic leg) was unavailable.
	Degraded bool
	// LowConfidence: the best match of the query, or of an intent, was
	// weak (see Confidence); that text was reformulated once (Reformulated,
	// ReformulatedIntents, when the reformulation was used).
	LowConfidence bool
	Reformulated  string
	// ReformulatedIntents is nil, or holds for each intent the reformulated
	// text that was ranked instead of it ("" where the intent was kept).
	ReformulatedIntents []string
	// Abstained: candidates were ranked but no list's best tool reached
	// the minimum confidence (a list that ranked nothing reached none), so
	// no ranked tool is returned (pins still
	// are). AbstainedIntents says which intents' lists did not reach it.
	Abstained        bool
	AbstainedIntents []int
	// MinConfidence is the threshold that was applied.
	MinConfidence float64
	// Timings is where the request's time went, leg by leg (summed over
	// its ranked lists), for metrics.
	Timings Timings
}

// Cards are the shortlist's cards, in order.
func (r Result) Cards() []cards.Card {
	cs := make([]cards.Card, len(r.Tools))
	for i, t := range r.Tools {
		cs[i] = t.Card
	}
	return cs
}

// Timings are the durations of a discovery's legs.
type Timings struct {
	Embed     time.Duration // the query texts' embeddings
	Authorize time.Duration // the candidate set
	Lexical   time.Duration // BM25F inside the candidate set
	Semantic  time.Duration // the vector search inside the candidate set
	Fuse      time.Duration // fusion, confidence, server lift, collapsing, the merge
	Hydrate   time.Duration // pins, copies of the winners, token accounting
}

// MaxIntents is the most intents one request may carry.
const MaxIntents = 8

// validateCaller checks the caller part of every request.
func validateCaller(c Caller) error {
	if c.Tenant == "" {
		return cards.Invalid("caller.tenant", "is required")
	}
	if !cards.ValidName(c.Tenant) {
		return cards.Invalid("caller.tenant", "must match [A-Za-z0-9_.-]{1,%d}", cards.MaxNameLen)
	}
	if len(c.Scopes) > 256 {
		return cards.Invalid("caller.scopes", "has %d entries; the limit is 256", len(c.Scopes))
	}
	return checkCallerFields(c)
}

func validateQuery(field, q string, required bool) error {
	if required && strings.TrimSpace(q) == "" {
		return cards.Invalid(field, "is required")
	}
	if n := utf8.RuneCountInString(q); n > MaxQueryLen {
		return cards.Invalid(field, "is %d characters; the limit is %d", n, MaxQueryLen)
	}
	return nil
}

// validateIntents checks the intents of a request: at most MaxIntents, each
// non-blank and at most MaxQueryLen characters.
func validateIntents(intents []string) error {
	if len(intents) > MaxIntents {
		return cards.Invalid("intents", "has %d entries; the limit is %d", len(intents), MaxIntents)
	}
	for i, in := range intents {
		if err := validateQuery(fmt.Sprintf("intents[%d]", i), in, true); err != nil {
			return err
		}
	}
	return nil
}

// Discover runs the pipeline: validate, authorize, lexical and semantic
// search inside the candidate set for the query and every intent, fuse,
// merge, pin, hydrate, count tokens.
func (r *Retriever) Discover(ctx context.Context, req Request) (Result, error) {
	// 1. Validate.
	if err := validateCaller(req.Caller); err != nil {
		return Result{}, err
	}
	if err := validateIntents(req.Intents); err != nil {
		return Result{}, err
	}
	if len(req.Intents) == 0 {
		if err := validateQuery("query", req.Query, true); err != nil {
			if strings.TrimSpace(req.Query) == "" {
				return Result{}, cards.Invalid("query", "is required unless intents are given")
			}
			return Result{}, err
		}
	} else if err := validateQuery("query", req.Query, false); err != nil {
		return Result{}, err
	}
	topK := req.TopK
	switch {
	case topK == 0:
		topK = DefaultTopK
	case topK < 0 || topK > MaxTopK:
		return Result{}, cards.Invalid("top_k", "is %d; it must be between 1 and %d (default %d)", topK, MaxTopK, DefaultTopK)
	}
	alpha := DefaultAlpha
	if req.AlphaSet {
		alpha = req.Alpha
	}
	switch req.Fusion {
	case "", FusionRRF, FusionRelative:
	default:
		return Result{}, cards.Invalid("fusion", "%q is not one of rrf, relative", req.Fusion)
	}
	if !(alpha >= 0 && alpha <= 1) { // NaN included
		return Result{}, cards.Invalid("alpha", "is %g; it must be between 0 and 1", alpha)
	}
	if err := req.Mode.validate(); err != nil {
		return Result{}, err
	}
	if len(req.AlwaysLoad) > MaxAlwaysLoad {
		return Result{}, cards.Invalid("always_load", "has %d entries; the limit is %d", len(req.AlwaysLoad), MaxAlwaysLoad)
	}
	for i, k := range req.AlwaysLoad {
		if err := ValidatePin(fmt.Sprintf("always_load[%d]", i), k); err != nil {
			return Result{}, err
		}
	}
	if len(req.HotPins) > MaxAlwaysLoad {
		return Result{}, cards.Invalid("hot_pins", "has %d entries; the limit is %d", len(req.HotPins), MaxAlwaysLoad)
	}
	if m := req.MinConfidence; m != nil && !(*m >= 0 && *m <= 1) {
		return Result{}, cards.Invalid("min_confidence", "is %g; it must be between 0 and 1", *m)
	}
	ops, err := parseRequestOps(&req)
	if err != nil {
		return Result{}, err
	}
	req.ops = ops
	release, err := r.reside(ctx, req.Caller.Tenant)
	if err != nil {
		return Result{}, err
	}
	defer release()
	return r.run(ctx, req, topK, alpha)
}

// textList is one ranked list of a request: the query's, an intent's, or a
// part of the query (Decompose).
type textList struct {
	// intent is the index in Request.Intents, or -1 for the query and its
	// parts.
	intent int
	// context says the list is ranked with the query as its context.
	context bool
	text    string
	// need are the words every tool of the list must hold (+word).
	need []string
	vec  []float32 // nil: not embedded (the embedder failed)
	// alt is the reformulation of text, ranked instead when text ranks
	// low-confidence and alt does not ("" → none).
	alt    string
	altVec []float32
}

// depth is how many hits each leg of the list contributes to its fusion:
// LegDepth for the query (and its parts), IntentDepth for an intent.
func (l textList) depth() int {
	if l.intent >= 0 {
		return IntentDepth
	}
	return LegDepth
}

// lists returns the request's texts to rank: the query (when given) first,
// then the intents in order, or, for a query alone that decomposes into
// parts (when the retriever decomposes), the parts.
func (r *Retriever) lists(req *Request) []textList {
	var out []textList
	q := req.ops.query
	query := q.ranked()
	if query {
		out = append(out, textList{intent: -1, text: q.Text, need: q.Required})
	}
	for i, in := range req.ops.intents {
		if in.ranked() {
			out = append(out, textList{intent: i, text: in.Text, need: in.Required, context: query})
		}
	}
	if query && len(req.Intents) == 0 && r.decompose && !req.Mode.single() && len(q.Required) == 0 {
		for _, p := range Decompose(req.Query) {
			out = append(out, textList{intent: -1, text: p, context: true})
		}
	}
	return out
}

// run is the pipeline after validation: rank every list, and when a list is
// low-confidence, reformulate its text once and rank again.
func (r *Retriever) run(ctx context.Context, req Request, topK int, alpha float64) (Result, error) {
	lists := r.lists(&req)
	texts := make([]string, len(lists))
	for i, l := range lists {
		texts[i] = l.text
	}
	t0 := time.Now()
	vecs, err := r.embedQueries(ctx, texts)
	if err != nil {
		return Result{}, err
	}
	embedTime := time.Since(t0)
	for i := range lists {
		lists[i].vec = vecs[i]
	}
	// The query, when ranked, is the first list and the context of the
	// others.
	var qctx *textList
	if req.ops.query.ranked() {
		qctx = &textList{intent: -1, text: lists[0].text, vec: lists[0].vec}
	}
	res, low, err := r.answer(ctx, req, lists, qctx, topK, alpha)
	res.Timings.Embed = embedTime
	if err != nil || req.NoReformulate {
		return res, err
	}
	var retry []int
	for i, l := range lists {
		if low[i] {
			if alt := Reformulate(l.text); alt != l.text {
				lists[i].alt = alt
				retry = append(retry, i)
			}
		}
	}
	if len(retry) == 0 {
		return res, nil
	}
	alts := make([]string, len(retry))
	for j, i := range retry {
		alts[j] = lists[i].alt
	}
	t0 = time.Now()
	altVecs, err := r.embedQueries(ctx, alts)
	if err != nil {
		return Result{}, err
	}
	embedTime += time.Since(t0)
	for j, i := range retry {
		lists[i].altVec = altVecs[j]
	}
	res, _, err = r.answer(ctx, req, lists, qctx, topK, alpha)
	res.Timings.Embed = embedTime
	return res, err
}

// embedQueries embeds request texts before the view is locked, so a slow
// embedding server never holds up writers. When the embedder fails, the
// vectors are nil and the lexical leg still answers, flagged degraded.
func (r *Retriever) embedQueries(ctx context.Context, texts []string) ([][]float32, error) {
	out := make([][]float32, len(texts))
	if len(texts) == 0 {
		return out, nil // a selection ranks nothing
	}
	vecs, err := r.emb.Embed(ctx, texts)
	switch {
	case err == nil && len(vecs) == len(texts):
		copy(out, vecs)
	case ctx.Err() != nil:
		return nil, ctx.Err()
	default:
		r.log.Warn("query embedding failed; answering from the lexical index", "err", err)
	}
	return out, nil
}

// answer runs steps 2–8 for the request's lists under one read lock, so the
// candidate set, the rankings and the hydrated cards come from one view of
// the catalogue. It also reports which lists ranked low-confidence.
func (r *Retriever) answer(ctx context.Context, req Request, lists []textList, qctx *textList, topK int, alpha float64) (Result, []bool, error) {
	r.mu.RLock()
	defer r.mu.RUnlock()

	// 2. Authorize first: the candidate set.
	t0 := time.Now()
	cs := r.candidates(req.Caller)
	candidates := cs.entries
	res := Result{CandidateCount: len(candidates), CatalogTokens: cs.tokens}
	res.Timings.Authorize = time.Since(t0)
	low := make([]bool, len(lists))
	if len(candidates) == 0 {
		res.LowConfidence = len(lists) > 0
		for i := range low {
			low[i] = true
		}
		return res, low, nil
	}

	// 3–5. Both legs inside the candidate set, then fusion, per list;
	// every ranked tool gets its confidence, and a list whose best tool is
	// under the minimum confidence is not answered.
	// The confidence model is the hybrid ranking's: a list ranked without
	// the semantic leg (a single-leg mode, an embedder or vector store that
	// failed) is held to no default minimum, only to the request's.
	minConf, explicit := r.minConfidence, req.MinConfidence != nil
	if req.Mode.single() {
		minConf = 0
	}
	if explicit {
		minConf = *req.MinConfidence
	}
	res.MinConfidence = minConf
	// The ranked lists live in fusion buffers lent for this answer, whose
	// tools are copies: the buffers go back when it returns.
	var lent []*fuseBuf
	lend := func() *fuseBuf {
		b, _ := r.fuseBufs.Get().(*fuseBuf)
		if b == nil {
			b = &fuseBuf{}
		}
		lent = append(lent, b)
		return b
	}
	defer func() {
		for _, b := range lent {
			b.reset()
			r.fuseBufs.Put(b)
		}
	}()
	ranked := make([][]Fused, len(lists))
	// The answer's scratch: near-duplicates kept per group (per list), the
	// alternatives by kept tool's entry number, the server sums.
	sc, _ := r.answerBufs.Get().(*answerScratch)
	if sc == nil {
		sc = &answerScratch{}
	}
	defer func() {
		sc.alts.reset()
		r.answerBufs.Put(sc)
	}()
	// Every list's vector and texts (an intent ranked with the query as
	// its context has the query's words at a lower weight and its vector
	// blended in), candidate set (+word narrows it) and fusion buffer; the
	// semantic legs of the lists ranked in the candidate set itself are
	// scanned together.
	vecs := make([][]float32, len(lists))
	parts := make([][]WeightedText, len(lists))
	sets := make([]*candSet, len(lists))
	bufs := make([]*fuseBuf, len(lists))
	for i, l := range lists {
		vecs[i], parts[i], sets[i], bufs[i] = l.vec, []WeightedText{{Text: l.text, Weight: 1}}, cs, lend()
		if l.context && qctx != nil && r.queryContext > 0 {
			vecs[i] = blend(l.vec, qctx.vec, r.queryContext)
			parts[i] = append(parts[i], WeightedText{Text: qctx.text, Weight: r.queryContext})
		}
		if len(l.need) > 0 {
			sets[i] = narrow(cs, l.need, len(r.entries))
		}
	}
	// The legs may run on two goroutines: the other one is waited for
	// before the buffers go back and r.mu is released (deferred after both).
	wait := r.startLegs(ctx, cs, lists, vecs, sets, bufs, &res.Timings, func(i int) error {
		return r.searchLexical(bufs[i], parts[i], sets[i], lists[i].depth())
	})
	defer wait()
	for i, l := range lists {
		lcs, vec := sets[i], vecs[i]
		fused, degraded, err := r.rankText(ctx, req, lcs, parts[i], vec, alpha, &res.Timings, bufs[i], l.depth())
		if err != nil {
			return Result{}, nil, err
		}
		res.Degraded = res.Degraded || degraded
		low[i] = r.lowConfidence(fused)
		if low[i] && l.alt != "" {
			alt, altDegraded, err := r.rankText(ctx, req, lcs, []WeightedText{{Text: l.alt, Weight: 1}}, l.altVec, alpha, &res.Timings, lend(), l.depth())
			if err != nil {
				return Result{}, nil, err
			}
			// The reformulation is used only when it is no longer
			// low-confidence (measured: answering with a still-weak
			// reformulation lowers recall).
			if !r.lowConfidence(alt) {
				fused, res.Degraded = alt, res.Degraded || altDegraded
				switch {
				case i == 0 && l.intent < 0:
					res.Reformulated = l.alt
				case l.intent >= 0:
					if res.ReformulatedIntents == nil {
						res.ReformulatedIntents = make([]string, len(req.Intents))
					}
					res.ReformulatedIntents[l.intent] = l.alt
				}
			}
		}
		res.LowConfidence = res.LowConfidence || low[i]
		// Confidence is a tool's own evidence, set before the server lift
		// re-ranks the list (the lift never changes the list's best).
		t1 := time.Now()
		if fused = r.confident(fused); cs.deprecated {
			fused = demoteDeprecated(fused)
		}
		if !req.Mode.single() {
			// The list's text, as rankText analysed it (parts[i]).
			fused = liftServers(fused, r.serverLift(lcs, bufs[i].terms, fused, &sc.sums))
		}
		if r.collapse {
			fused = collapseList(fused, &sc.kept, &sc.alts)
		}
		ranked[i] = fused
		res.Timings.Fuse += time.Since(t1)
		listMin := minConf
		if (degraded || len(l.need) > 0) && !explicit {
			// A list narrowed by +word is held to no default minimum:
			// the caller said which tools it wants ranked.
			listMin = 0
		}
		// A list that ranked nothing reached no minimum either.
		if len(fused) == 0 || fused[0].Confidence < listMin {
			ranked[i] = nil
			if l.intent >= 0 {
				res.AbstainedIntents = append(res.AbstainedIntents, l.intent)
			}
		}
	}
	t1 := time.Now()
	merged := MergeFair(ranked, topK)
	res.Abstained = len(merged) == 0 && len(lists) > 0
	var anchors []*entry
	if !req.NoCompanions && !req.Mode.single() {
		merged, anchors = addCompanions(r.companionOpts, cs, ranked, merged, topK)
	}
	res.Timings.Fuse += time.Since(t1)
	t1 = time.Now()

	// 6. Pins first, authorized like everything else; then the merged list.
	// shown are the entries of res.Tools, position for position.
	shown := sc.shown[:0]
	defer func() { clear(shown); sc.shown = shown[:0] }()
	// The answer's tools: the pins, the tools selected by name and the
	// merged list, in one allocation unless selections add more.
	res.Tools = make([]Scored, 0, len(req.AlwaysLoad)+len(req.HotPins)+len(merged))
	for i, k := range slices.Concat(req.AlwaysLoad, req.HotPins) {
		k.Tenant = req.Caller.Tenant
		id := DocID(k)
		e := candidates[id]
		if e == nil || slices.Contains(shown, e) {
			continue
		}
		why := "pinned (always_load)"
		if i >= len(req.AlwaysLoad) {
			why = "pinned (hot: used often)"
		}
		shown = append(shown, e)
		res.Tools = append(res.Tools, Scored{Card: e.card, Pinned: true, Reason: why, Tokens: e.tokens,
			Scores: Fused{ID: id}})
	}
	r.placeSelected(req, cs, &res, &shown)
	placed := func(e *entry) bool {
		return slices.ContainsFunc(merged, func(m Merged) bool { return m.e == e })
	}
	for i, m := range merged {
		e := m.e
		m.e, m.key = nil, 0 // the view's own; not shown
		if m.Fields == nil && m.mask != 0 {
			m.Fields = r.lex.fieldNames(m.mask)
		}
		m.mask = 0
		s := Scored{Card: e.card, Scores: m.Fused, Reason: reason(m.Fused), Tokens: e.tokens}
		if i < len(anchors) && anchors[i] != nil {
			k := anchors[i].card.Key()
			s.CompanionOf, s.Reason = &k, companionReason(k, m.Fused)
		}
		sc.alts.each(e.no, func(a *entry) bool {
			if !slices.Contains(shown, a) && !placed(a) && cs.has(a) {
				s.Alternatives = append(s.Alternatives, a.card.Key())
			}
			return true
		})
		for _, li := range m.Lists {
			if in := lists[li].intent; in >= 0 {
				s.Intents = append(s.Intents, in)
			} else {
				s.ForQuery = true
			}
		}
		if i := slices.Index(shown, e); i >= 0 {
			// Pinned (or selected) and also ranked: keep it where it
			// is, record its scores.
			p := &res.Tools[i]
			p.Scores, p.Reason = s.Scores, p.Reason+"; "+s.Reason
			p.ForQuery = p.ForQuery || s.ForQuery
			p.Intents = mergeIntents(p.Intents, s.Intents)
			continue
		}
		shown = append(shown, e)
		res.Tools = append(res.Tools, s)
	}

	if len(res.Tools) == 0 {
		res.Tools = nil // as an answer without tools always was
	}
	// 8. Hydrate: copies, so callers cannot reach into the view.
	copyCards(res.Tools)
	for i := range res.Tools {
		res.ShortlistTokens += int64(res.Tools[i].Tokens)
	}
	res.Timings.Hydrate = time.Since(t1)
	return res, low, nil
}

// answerScratch is the scratch of one answer, reused across requests
// (Retriever.answerBufs): what collapsing keeps per dup group (one list at
// a time) and the alternatives it records per kept tool's entry number
// (the whole answer), the server lift's sums, and the entries shown.
type answerScratch struct {
	kept, alts entryLists
	sums       slotSums
	shown      []*entry
}

// blend returns the unit vector of a + w·b, or nil when either is nil.
func blend(a, b []float32, w float64) []float32 {
	if a == nil || b == nil || len(a) != len(b) {
		return nil
	}
	out := make([]float32, len(a))
	var norm float64
	for i := range a {
		v := float64(a[i]) + w*float64(b[i])
		out[i] = float32(v)
		norm += v * v
	}
	if norm == 0 {
		return out
	}
	inv := 1 / math.Sqrt(norm)
	for i := range out {
		out[i] = float32(float64(out[i]) * inv)
	}
	return out
}

// confident sets every tool's confidence (in place: fused is the
// pipeline's own) and returns the list.
func (r *Retriever) confident(fused []Fused) []Fused {
	for i := range fused {
		fused[i].Confidence = r.confidence.Confidence(fused[i], i+1)
	}
	return fused
}

// searchLexical runs one list's lexical leg inside cs: its text analysed
// into buf.terms, its hits into buf.lex. Call with r.mu held.
func (r *Retriever) searchLexical(buf *fuseBuf, text []WeightedText, cs *candSet, depth int) error {
	buf.terms = r.lex.queryTerms(buf.terms, text)
	lex, err := r.lex.searchTerms(buf.lex, buf.terms, cs.lexSet(r.lex), cs.filter, depth, false)
	if err != nil {
		return fmt.Errorf("lexical search: %w", err)
	}
	if lex != nil {
		buf.lex = lex
	}
	return nil
}

// rankText ranks one text inside the candidate set: the lexical and the
// semantic leg, fused. Call with r.mu held.
func (r *Retriever) rankText(ctx context.Context, req Request, cs *candSet, text []WeightedText, qvec []float32, alpha float64, tm *Timings, buf *fuseBuf, depth int) ([]Fused, bool, error) {
	t0 := time.Now()
	if j := buf.lexJob; j != nil {
		// Shared with the request's other goroutine (startLegs), which
		// may have searched it already, or be searching it.
		if err := j.do(func() error { return r.searchLexical(buf, text, cs, depth) }); err != nil {
			return nil, false, err
		}
		tm.Lexical += j.took
	} else {
		if err := r.searchLexical(buf, text, cs, depth); err != nil {
			return nil, false, err
		}
		tm.Lexical += time.Since(t0)
	}
	lex := buf.lex
	if buf.semWait != nil {
		// The scan running beside this lexical leg: its time is the
		// semantic leg's (semWait adds it), not the wait for it.
		buf.semWait()
	}
	t1 := time.Now()
	var sem []Hit
	var err error
	degraded := qvec == nil
	switch {
	case buf.semDone:
		// Scanned with the request's other lists, at the deepest one's
		// depth: the exact top k is the head of a deeper exact top k.
		sem, err = buf.sem, buf.semErr
		if len(sem) > depth {
			sem = sem[:depth]
		}
	case !degraded:
		if mi, ok := r.vec.(memoryIndex); ok {
			sem, err = mi.m.searchSetInto(buf.sem, qvec, cs.vecSet(mi.m), cs.filter, depth, nil)
			buf.sem = sem
		} else {
			sem, err = r.vec.Search(ctx, qvec, cs.filter, depth)
		}
	}
	t2 := time.Now()
	tm.Semantic += t2.Sub(t1)
	defer func() { tm.Fuse += time.Since(t2) }()
	switch {
	case errors.Is(err, cards.ErrUnavailable):
		// The semantic leg's backend is down: answer from the lexical
		// leg alone and say so.
		r.log.Warn("semantic leg unavailable; answering from the lexical index", "err", err)
		sem, degraded = nil, true
	case err != nil:
		return nil, false, fmt.Errorf("vector search: %w", err)
	}
	// Vectors with no positive similarity are no evidence of a match.
	sem = slices.DeleteFunc(sem, func(h Hit) bool { return h.Score <= 0 })
	r.keyHits(lex, sem)
	lex, sem, single := req.Mode.singleLeg(lex, sem)
	var fused []Fused
	if cmp.Or(req.Fusion, DefaultFusion) == FusionRelative && !single {
		fused = fuseRelative(lex, sem, alpha, buf)
	} else {
		fused = fuseRRF(lex, sem, DefaultRRFK, buf)
	}
	// Attach each card's entry: the later steps need it, and both legs
	// search inside the set, so every card has one.
	kept := fused[:0]
	for _, f := range fused {
		if int(f.key) < len(r.entries) {
			if f.e = r.entries[f.key]; f.e != nil && cs.has(f.e) {
				kept = append(kept, f)
			}
		}
	}
	return kept, degraded, nil
}

// BesideMin is the candidate set from which a request's semantic legs run
// on a goroutine of their own, beside its lexical legs, when the process
// has more than one core (GOMAXPROCS). Under it the two legs together take
// well under a millisecond and the answer waits for the goroutine's start
// and its wake-up as long as it would for the scan (docs/BENCHMARKS.md,
// "Legs side by side").
const BesideMin = 8192

// startLegs starts a request's legs. The semantic legs of the lists that
// rank inside cs itself (no +word narrows them) and have a vector are
// scanned together, in one scan of the in-memory vectors
// (MemoryVectors.searchSetMulti), leaving each list's hits in its buffer
// (fuseBuf.semDone); with fewer than two such lists, or when the scan
// fails, they are left to rankText, which searches (and reports any error)
// list by list. Call with r.mu held.
//
// From BesideMin candidates on, on more than one core, the request takes a
// second goroutine: it scans (a single list's vector too), then searches
// lexical legs from the last list back, while the caller searches them
// from the first on (lexical(i) searches list i's, inside sets[i]) — each
// leg once, by whichever goroutine claims it (fuseBuf.lexJob) — and then
// scans the in-memory vectors' rows still unclaimed beside it (rowShare:
// the answers are the ones one goroutine's scan gives). Another
// vector index (PostgreSQL's) answers over the network: its searches, one
// per list with a vector, always go to the second goroutine, whatever the
// set and the cores, and their errors to each buffer (fuseBuf.semErr). Each
// buffer's semWait waits for its semantic leg, and the function returned
// waits for the goroutine: the caller must call it before r.mu is released
// or the buffers reused. The semantic legs' time is added to tm on the
// caller's goroutine, by the first wait.
func (r *Retriever) startLegs(ctx context.Context, cs *candSet, lists []textList, vecs [][]float32, sets []*candSet, bufs []*fuseBuf, tm *Timings, lexical func(i int) error) (wait func()) {
	mi, ok := r.vec.(memoryIndex)
	var which []int
	depth := 0
	for i, l := range lists {
		if vecs[i] != nil && (!ok || len(l.need) == 0) {
			which = append(which, i)
			depth = max(depth, l.depth())
		}
	}
	var share *rowShare // set when the scan runs beside this goroutine
	scan := func() time.Duration {
		t0 := time.Now()
		if !ok {
			for _, i := range which {
				bufs[i].sem, bufs[i].semErr = r.vec.Search(ctx, vecs[i], sets[i].filter, lists[i].depth())
				bufs[i].semDone = true
			}
			return time.Since(t0)
		}
		vs := cs.vecSet(mi.m)
		if len(which) == 1 {
			i := which[0]
			hits, err := mi.m.searchSetInto(bufs[i].sem, vecs[i], vs, cs.filter, lists[i].depth(), share)
			if err == nil {
				bufs[i].sem, bufs[i].semDone = hits, true
			}
			return time.Since(t0)
		}
		dsts, qs := make([][]Hit, len(which)), make([][]float32, len(which))
		for x, i := range which {
			dsts[x], qs[x] = bufs[i].sem, vecs[i]
		}
		hits, err := mi.m.searchSetMulti(dsts, qs, vs, cs.filter, depth, share)
		if err == nil {
			for x, i := range which {
				bufs[i].sem, bufs[i].semDone = hits[x], true
			}
		}
		return time.Since(t0)
	}
	beside := len(cs.entries) >= BesideMin && runtime.GOMAXPROCS(0) > 1 && (len(which) > 0 || len(lists) > 1)
	if !beside && (ok || len(which) == 0) {
		if ok && len(which) >= 2 {
			tm.Semantic += scan()
		}
		return func() {}
	}
	for i := range lists {
		bufs[i].lexJob = &lexJob{done: make(chan struct{})}
	}
	if ok {
		share = &rowShare{}
	}
	scanned, finished := make(chan time.Duration, 1), make(chan struct{})
	go func() {
		defer close(finished)
		var took time.Duration
		if len(which) > 0 {
			took = scan()
		}
		scanned <- took
		for i := len(lists) - 1; i >= 0; i-- {
			bufs[i].lexJob.try(func() error { return lexical(i) })
		}
	}()
	semWait := sync.OnceFunc(func() { tm.Semantic += <-scanned })
	for _, i := range which {
		bufs[i].semWait = semWait
	}
	// This goroutine's share: the lexical legs from the first list on,
	// while the other one scans, then the rows of the scan still unclaimed.
	for i := range lists {
		bufs[i].lexJob.try(func() error { return lexical(i) })
	}
	if share != nil {
		share.help()
	}
	return func() {
		semWait()
		<-finished
	}
}

// lexJob is one list's lexical leg when a request's two goroutines share
// them (Retriever.startLegs): the first to claim it searches, the other
// does not search it again.
type lexJob struct {
	claimed atomic.Bool
	done    chan struct{} // closed when the search ended
	err     error         // the search's, once done is closed
	took    time.Duration // the search's time, once done is closed
}

// try searches with search unless the leg was claimed already, and reports
// whether it did.
func (j *lexJob) try(search func() error) bool {
	if !j.claimed.CompareAndSwap(false, true) {
		return false
	}
	t0 := time.Now()
	j.err = search()
	j.took = time.Since(t0)
	close(j.done)
	return true
}

// do searches with search unless the leg was claimed already, then waits
// for whichever search claimed it, and returns its error.
func (j *lexJob) do(search func() error) error {
	j.try(search)
	<-j.done
	return j.err
}

// keyHits keys the legs' hits that come without a key (another vector
// index's): by the view's entry of their ID, or, for an ID the view does
// not hold, by a number past every entry's (one per ID), so that fusion
// joins them as before and the pipeline drops them after it. Call with r.mu
// held.
func (r *Retriever) keyHits(lex, sem []Hit) {
	next := uint32(len(r.entries))
	var unknown map[string]uint32 // only ever made for IDs outside the view
	for _, hits := range [][]Hit{lex, sem} {
		for i := range hits {
			h := &hits[i]
			if h.key != 0 {
				continue
			}
			if e := r.byID[h.ID]; e != nil {
				h.key = e.no
				continue
			}
			if unknown == nil {
				unknown = map[string]uint32{}
			}
			k, ok := unknown[h.ID]
			if !ok {
				k, next = next, next+1
				unknown[h.ID] = k
			}
			h.key = k
		}
	}
}

func reason(f Fused) string {
	b := make([]byte, 0, 80)
	if f.LexicalRank > 0 {
		b = strconv.AppendInt(append(b, "lexical #"...), int64(f.LexicalRank), 10)
		for i, field := range f.Fields {
			if i == 0 {
				b = append(b, " on "...)
			} else {
				b = append(b, ", "...)
			}
			b = append(b, field...)
		}
	}
	if f.SemanticRank > 0 {
		if len(b) > 0 {
			b = append(b, "; "...)
		}
		b = strconv.AppendInt(append(b, "semantic #"...), int64(f.SemanticRank), 10)
		b = append(strconv.AppendFloat(append(b, " (cosine "...), f.Semantic, 'f', 2, 64), ')')
	}
	if len(b) == 0 {
		return "no match"
	}
	return string(b)
}
