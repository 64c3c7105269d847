package retriever

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
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
	// DefaultServerPrior is the weight of the server prior (ServerPrior),
	// off: it lifted livemcpbench's multi-step tasks but pushed unrelated
	// siblings of a strong match into shortlists (docs/EVAL.md).
	DefaultServerPrior = 0.0
	// LegDepth is how many hits each leg contributes to fusion, whatever
	// top_k is: fused ranks depend on the depth, so a fixed depth makes every
	// shortlist a prefix of one ranking (top_k 3 is the head of top_k 50).
	LegDepth = 4 * MaxTopK
)

// Request is one DiscoverTools call.
type Request struct {
	Caller     Caller
	Query      string
	TopK       int     // 0 → DefaultTopK
	Fusion     string  // "" → DefaultFusion; "relative" → relative score with Alpha; "rrf" → RRF (k = 60)
	Alpha      float64 // semantic weight for relative fusion, 0..1
	AlphaSet   bool    // Alpha was given (otherwise DefaultAlpha)
	AlwaysLoad []cards.Key
	Mode       Mode // "" → hybrid; lexical or semantic ranks by one leg alone (mode.go)
	// NoReformulate keeps a low-confidence query as it is (evaluation).
	NoReformulate bool
}

// Scored is one tool of a shortlist.
type Scored struct {
	Card   cards.Card // a copy, schemas included
	Scores Fused
	Pinned bool
	Reason string
	Tokens int
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
	// LowConfidence: the best match was weak (see Confidence); the query
	// was reformulated once (Reformulated, when that changed it).
	LowConfidence bool
	Reformulated  string
}

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

// Discover runs the pipeline: validate, authorize, lexical and semantic
// search inside the candidate set, fuse, pin, hydrate, count tokens.
func (r *Retriever) Discover(ctx context.Context, req Request) (Result, error) {
	// 1. Validate.
	if err := validateCaller(req.Caller); err != nil {
		return Result{}, err
	}
	if err := validateQuery("query", req.Query, true); err != nil {
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
	return r.run(ctx, req, topK, alpha)
}

// run is the pipeline after validation: rank, and when the answer is
// low-confidence, reformulate the query once and rank again.
func (r *Retriever) run(ctx context.Context, req Request, topK int, alpha float64) (Result, error) {
	res, err := r.rank(ctx, req, req.Query, topK, alpha)
	if err != nil || !res.LowConfidence || req.NoReformulate {
		return res, err
	}
	q2 := Reformulate(req.Query)
	if q2 == req.Query {
		return res, nil
	}
	res2, err := r.rank(ctx, req, q2, topK, alpha)
	if err != nil {
		return Result{}, err
	}
	if res2.LowConfidence {
		// The reformulation found nothing better: keep the ranking of
		// what the caller asked (measured: answering with a still-weak
		// reformulation lowers recall).
		return res, nil
	}
	res2.LowConfidence, res2.Reformulated = true, q2
	return res2, nil
}

// rank runs steps 2–8 for one query text. The query is embedded before the
// view is locked, so a slow embedding server never holds up writers.
func (r *Retriever) rank(ctx context.Context, req Request, query string, topK int, alpha float64) (Result, error) {
	var qvec []float32
	qvecs, embedErr := r.emb.Embed(ctx, []string{query})
	switch {
	case embedErr == nil:
		qvec = qvecs[0]
	case ctx.Err() != nil:
		return Result{}, ctx.Err()
	default:
		// The embedder (an embedding server) failed: the lexical leg
		// still answers, flagged degraded.
		r.log.Warn("query embedding failed; answering from the lexical index", "err", embedErr)
	}

	r.mu.RLock()
	defer r.mu.RUnlock()

	// 2. Authorize first: the candidate set.
	filter, candidates, catalogTokens := r.candidates(req.Caller)
	res := Result{CandidateCount: len(candidates), CatalogTokens: catalogTokens}
	if len(candidates) == 0 {
		res.LowConfidence = true
		return res, nil
	}

	// 3–5. Both legs inside the candidate set, then fusion.
	lex, err := r.lex.Search(query, filter, LegDepth)
	if err != nil {
		return Result{}, fmt.Errorf("lexical search: %w", err)
	}
	var sem []Hit
	if qvec == nil {
		res.Degraded = true
	} else {
		sem, err = r.vec.Search(ctx, qvec, filter, LegDepth)
	}
	switch {
	case errors.Is(err, cards.ErrUnavailable):
		// The semantic leg's backend is down: answer from the lexical
		// leg alone and say so.
		r.log.Warn("semantic leg unavailable; answering from the lexical index", "err", err)
		sem, res.Degraded = nil, true
	case err != nil:
		return Result{}, fmt.Errorf("vector search: %w", err)
	}
	// Vectors with no positive similarity are no evidence of a match.
	sem = slices.DeleteFunc(sem, func(h Hit) bool { return h.Score <= 0 })
	lex, sem, single := req.Mode.singleLeg(lex, sem)
	var fused []Fused
	if cmp.Or(req.Fusion, DefaultFusion) == FusionRelative && !single {
		fused = FuseRelative(lex, sem, alpha)
	} else {
		fused = FuseRRF(lex, sem, DefaultRRFK)
	}
	res.LowConfidence = r.lowConfidence(fused)
	if r.serverPrior > 0 && !single {
		fused = ServerPrior(fused, func(id string) string { k, _ := ParseDocID(id); return k.Server }, r.serverPrior)
	}

	// 6. Pins first, authorized like everything else; then the ranked list.
	taken := map[string]bool{}
	for _, k := range req.AlwaysLoad {
		k.Tenant = req.Caller.Tenant
		id := DocID(k)
		e := candidates[id]
		if e == nil || taken[id] {
			continue
		}
		taken[id] = true
		res.Tools = append(res.Tools, Scored{Card: e.card, Pinned: true, Reason: "pinned (always_load)", Tokens: e.tokens,
			Scores: Fused{ID: id}})
	}
	n := 0
	for _, f := range fused {
		if n == topK {
			break
		}
		e := candidates[f.ID]
		if e == nil { // never happens: both legs search inside the set
			continue
		}
		n++
		if taken[f.ID] {
			// Pinned and also ranked: keep the pin, record its scores.
			for i := range res.Tools {
				if res.Tools[i].Card.Key() == e.card.Key() {
					res.Tools[i].Scores = f
					res.Tools[i].Reason = "pinned (always_load); " + reason(f)
				}
			}
			continue
		}
		taken[f.ID] = true
		res.Tools = append(res.Tools, Scored{Card: e.card, Scores: f, Reason: reason(f), Tokens: e.tokens})
	}

	// 8. Hydrate: copies, so callers cannot reach into the view.
	for i := range res.Tools {
		res.Tools[i].Card = res.Tools[i].Card.Clone()
		res.ShortlistTokens += int64(res.Tools[i].Tokens)
	}
	return res, nil
}

// candidates is the authorization gate: the caller's tenant's active cards
// whose required scopes the caller holds. The returned filter restricts the
// search legs to exactly that set. Call with r.mu held.
func (r *Retriever) candidates(c Caller) (Filter, map[string]*entry, int64) {
	all := r.byTenant[c.Tenant]
	out := make(map[string]*entry, len(all))
	var tokens int64
	for id, e := range all {
		if Allowed(c, &e.card) {
			out[id] = e
			tokens += int64(e.tokens)
		}
	}
	f := Filter{Tenant: c.Tenant}
	if len(out) < len(all) {
		f.IDs = make([]string, 0, len(out))
		for id := range out {
			f.IDs = append(f.IDs, id)
		}
		slices.Sort(f.IDs)
	}
	return f, out, tokens
}

func reason(f Fused) string {
	var parts []string
	if f.LexicalRank > 0 {
		if len(f.Fields) > 0 {
			parts = append(parts, fmt.Sprintf("lexical #%d on %s", f.LexicalRank, strings.Join(f.Fields, ", ")))
		} else {
			parts = append(parts, fmt.Sprintf("lexical #%d", f.LexicalRank))
		}
	}
	if f.SemanticRank > 0 {
		parts = append(parts, fmt.Sprintf("semantic #%d (cosine %.2f)", f.SemanticRank, f.Semantic))
	}
	if len(parts) == 0 {
		return "no match"
	}
	return strings.Join(parts, "; ")
}
