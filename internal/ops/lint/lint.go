// Package lint reviews a catalogue for what makes tools hard to tell apart
// or hard to find: look-alike cards without negative guidance, cards
// without aliases, and cards that recorded misses point to — with alias
// suggestions taken from the queries that missed them.
package lint

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/telemetry/feedback"
	"github.com/seed0cff8200/cardex/retriever"
)

// Finding kinds.
const (
	KindLookalike = "lookalike"
	KindNoAliases = "no_aliases"
	KindMissed    = "missed"
	KindNoComment = "no_comment" // an imported view or table without COMMENT ON
)

// Finding is one thing worth a platform team's attention.
type Finding struct {
	Kind string    `json:"kind"`
	Card cards.Key `json:"card"`
	// Other is the look-alike card.
	Other      *cards.Key `json:"other,omitempty"`
	Similarity float64    `json:"similarity,omitempty"`
	// Misses counts recorded misses that needed this card.
	Misses int `json:"misses,omitempty"`
	// SuggestedAliases are missed queries the card could answer to.
	SuggestedAliases []string `json:"suggested_aliases,omitempty"`
	Message          string   `json:"message"`
}

// Options tune the checks.
type Options struct {
	// Similarity at or above which two cards of one tenant look alike
	// (cosine of their embedding texts). Default DefaultSimilarity.
	Similarity float64
	// MaxSuggestions bounds alias suggestions per card (default 5).
	MaxSuggestions int
	// Card, when set, asks for the findings about that card alone: its
	// look-alikes among the others (only its pairs are compared), and its
	// own findings.
	Card *cards.Key
}

// DefaultSimilarity suits the built-in hashed embedder (see README "cards lint").
const DefaultSimilarity = 0.4

// Run lints active cards. events are feedback-log events (may be empty).
func Run(ctx context.Context, cs []cards.Card, events []feedback.Event, emb embed.Embedder, o Options) ([]Finding, error) {
	if o.Similarity == 0 {
		o.Similarity = DefaultSimilarity
	}
	if o.MaxSuggestions == 0 {
		o.MaxSuggestions = 5
	}
	var active []cards.Card
	for _, c := range cs {
		if c.Status == "" || c.Status == cards.StatusActive {
			active = append(active, c)
		}
	}
	slices.SortFunc(active, func(a, b cards.Card) int {
		return cmp.Or(cmp.Compare(a.Tenant, b.Tenant), cmp.Compare(a.Server, b.Server), cmp.Compare(a.Name, b.Name))
	})
	var out []Finding

	if o.Card != nil {
		// Only the card's tenant can hold its look-alikes.
		active = slices.DeleteFunc(active, func(c cards.Card) bool { return c.Tenant != o.Card.Tenant })
		if !slices.ContainsFunc(active, func(c cards.Card) bool { return c.Key() == *o.Card }) {
			return nil, nil
		}
	}
	texts := make([]string, len(active))
	for i := range active {
		texts[i] = retriever.EmbeddingText(&active[i])
	}
	vecs, err := emb.Embed(ctx, texts)
	if err != nil {
		return nil, fmt.Errorf("embed cards: %w", err)
	}
	focus := func(c *cards.Card) bool { return o.Card == nil || c.Key() == *o.Card }
	for i := range active {
		for j := i + 1; j < len(active); j++ {
			a, b := &active[i], &active[j]
			if a.Tenant != b.Tenant || (a.WhenNotToUse != "" && b.WhenNotToUse != "") || !(focus(a) || focus(b)) {
				continue
			}
			sim := dot(vecs[i], vecs[j])
			if sim < o.Similarity {
				continue
			}
			lacking := []string{}
			for _, c := range []*cards.Card{a, b} {
				if c.WhenNotToUse == "" {
					lacking = append(lacking, c.Server+"/"+c.Name)
				}
			}
			bk := b.Key()
			out = append(out, Finding{Kind: KindLookalike, Card: a.Key(), Other: &bk, Similarity: round(sim),
				Message: fmt.Sprintf("%s/%s and %s/%s look alike (similarity %.2f); add when_not_to_use to %s",
					a.Server, a.Name, b.Server, b.Name, sim, strings.Join(lacking, " and "))})
		}
	}
	for i := range active {
		if len(active[i].Aliases) == 0 && focus(&active[i]) {
			out = append(out, Finding{Kind: KindNoAliases, Card: active[i].Key(),
				Message: fmt.Sprintf("%s/%s has no aliases: add the phrasings users say for it", active[i].Server, active[i].Name)})
		}
	}
	out = append(out, uncommented(active)...)
	out = append(out, Missed(active, events, o.MaxSuggestions)...)
	if o.Card != nil {
		out = slices.DeleteFunc(out, func(f Finding) bool {
			return f.Card != *o.Card && (f.Other == nil || *f.Other != *o.Card)
		})
	}
	return out, nil
}

// Missed turns recorded misses into findings with alias suggestions: one
// per active card that misses point to (most missed first), suggesting up
// to maxSuggestions of the missed queries (kept raw, sanitised, at most an
// alias long, not yet an alias of the card).
func Missed(active []cards.Card, events []feedback.Event, maxSuggestions int) []Finding {
	byKey := map[cards.Key]*cards.Card{}
	for i := range active {
		byKey[active[i].Key()] = &active[i]
	}
	type tally struct {
		n       int
		queries []string
	}
	counts := map[cards.Key]*tally{}
	for _, e := range events {
		if !e.Miss || e.Tool == nil {
			continue
		}
		k := cards.Key{Tenant: e.Tenant, Server: e.Tool.Server, Name: e.Tool.Name}
		if byKey[k] == nil {
			continue
		}
		t := counts[k]
		if t == nil {
			t = &tally{}
			counts[k] = t
		}
		t.n++
		if q := cards.Sanitize(e.Query); q != "" && len([]rune(q)) <= cards.MaxAliasLen &&
			!slices.ContainsFunc(t.queries, func(s string) bool { return strings.EqualFold(s, q) }) &&
			!slices.ContainsFunc(byKey[k].Aliases, func(s string) bool { return strings.EqualFold(s, q) }) {
			t.queries = append(t.queries, q)
		}
	}
	keys := make([]cards.Key, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b cards.Key) int {
		return cmp.Or(cmp.Compare(counts[b].n, counts[a].n), cmp.Compare(a.String(), b.String()))
	})
	var out []Finding
	for _, k := range keys {
		t := counts[k]
		sugg := t.queries[:min(len(t.queries), maxSuggestions)]
		msg := fmt.Sprintf("%s/%s was needed but not shortlisted %d time(s)", k.Server, k.Name, t.n)
		if len(sugg) > 0 {
			msg += "; consider aliases: " + strings.Join(quote(sugg), ", ")
		}
		out = append(out, Finding{Kind: KindMissed, Card: k, Misses: t.n, SuggestedAliases: sugg, Message: msg})
	}
	return out
}

func quote(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

func dot(a, b []float32) float64 {
	s := 0.0
	for i := range a {
		s += float64(a[i]) * float64(b[i])
	}
	return s
}

func round(x float64) float64 { return float64(int(x*1000+0.5)) / 1000 }
