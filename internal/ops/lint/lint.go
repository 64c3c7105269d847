// Package lint reviews a catalogue for what makes tools hard to tell apart
// or hard to find: look-alike cards without negative guidance, cards
// without aliases, and cards that recorded misses point to — with alias
// suggestions taken from the queries that missed them.
package lint

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

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
	// KindPin: a tool used so often (reported outcomes) that it is a
	// candidate for always_load, for its tenant's callers or one caller.
	KindPin = "pin_candidate"
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
	// Uses and Share (pin candidates): the decayed uses of the tool and its
	// share of its tally's; Caller is the subject hash of the caller whose
	// tally it is (empty: the tenant's).
	Uses    float64 `json:"uses,omitempty"`
	Share   float64 `json:"share,omitempty"`
	Caller  string  `json:"caller,omitempty"`
	Message string  `json:"message"`
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
	out = append(out, Pins(active, events, time.Now())...)
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

// Pins turns the feedback log's used tools into pin suggestions: per
// tenant, then per caller (by subject hash) whose candidates differ from
// its tenant's, the active tools that qualify as hot (feedback.Candidates),
// at most feedback.MaxPins each.
func Pins(active []cards.Card, events []feedback.Event, now time.Time) []Finding {
	isActive := map[cards.Key]bool{}
	tenants := map[string]bool{}
	for _, c := range active {
		isActive[c.Key()] = true
		tenants[c.Tenant] = true
	}
	hot := feedback.HotFromEvents(events)
	pins := func(tenant string, tools []feedback.HotTool) []feedback.HotTool {
		tools = slices.DeleteFunc(tools, func(t feedback.HotTool) bool {
			return !isActive[cards.Key{Tenant: tenant, Server: t.Server, Name: t.Name}]
		})
		return feedback.Candidates(tools, feedback.MaxPins)
	}
	var out []Finding
	add := func(tenant, caller string, ts []feedback.HotTool) {
		who := "tenant " + tenant + "'s callers"
		if caller != "" {
			who = "caller " + caller + " of tenant " + tenant
		}
		for _, t := range ts {
			out = append(out, Finding{Kind: KindPin, Card: cards.Key{Tenant: tenant, Server: t.Server, Name: t.Name}, Uses: round(t.Uses), Share: round(t.Share), Caller: caller,
				Message: fmt.Sprintf("%s/%s is used often by %s (%.1f uses, %.0f%% of theirs): a candidate for always_load", t.Server, t.Name, who, t.Uses, 100*t.Share)})
		}
	}
	for _, tenant := range slices.Sorted(maps.Keys(tenants)) {
		mine := pins(tenant, hot.Tenant(tenant, now))
		add(tenant, "", mine)
		for _, caller := range hot.Callers(tenant) {
			theirs := pins(tenant, hot.Caller(tenant, caller, now))
			same := len(theirs) == len(mine)
			for i := 0; same && i < len(theirs); i++ {
				same = theirs[i].Tool == mine[i].Tool
			}
			if !same {
				add(tenant, caller, theirs)
			}
		}
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
