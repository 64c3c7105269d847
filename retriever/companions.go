package retriever

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/seed0cff8200/cardex/cards"
)

// Companions: tools used together. Every store keeps, per card, the tools
// of its tenant used in the same session or turn, with decayed counts
// (cards.Companions); the view holds each active card's table. When a
// shortlist holds a tool A with good confidence, the companion step brings
// A's companions that the caller may use into slots that weak tools held,
// or that were spare: the steps of a task that no text names (the station
// codes before the tickets, the chart after the prices).
//
// A companion B of A is worth conf(A) × P(B | A), P(B | A) being the share
// of A's sessions that used B, smoothed by Prior sessions that did not
// (count / (uses + Prior)); several anchors combine as independent chances.
// The rules, each enforced here:
//   - only tools of the caller's candidate set (authorized, active) are
//     brought;
//   - a destructive tool is never brought by co-usage (it can still rank
//     on its own evidence);
//   - a companion only takes the slot of a weak tool (confidence under
//     CompanionOptions.Weak) that is less likely than the companion to be
//     needed, or a spare slot: no tool that matched with good confidence
//     loses its place or moves;
//   - at most CompanionOptions.MaxSlots companions, and never more than
//     half of the list;
//   - a companion is marked (Scored.CompanionOf, its reason "used with
//     A").

// CompanionOptions tune the companion step.
type CompanionOptions struct {
	// Anchor is the confidence a shortlisted tool needs for its companions
	// to be brought.
	Anchor float64
	// Weak is the confidence under which a shortlisted tool's slot may go
	// to a companion worth more than it.
	Weak float64
	// Min is the least a companion must be worth to take a slot, spare
	// ones included.
	Min float64
	// Prior is the number of sessions, not using a companion, that its
	// share of an anchor's sessions is smoothed with: count / (uses +
	// Prior), so one session is not taken for a rule.
	Prior float64
	// MaxSlots bounds the companions of one answer (and never more than
	// half of top_k).
	MaxSlots int
}

// DefaultCompanionOptions are the step's defaults (docs/EVAL.md,
// "Companions and hot tools").
var DefaultCompanionOptions = CompanionOptions{Anchor: 0.5, Weak: 0.3, Min: 0.2, Prior: 2, MaxSlots: 2}

// WithCompanions sets the companion step's options; MaxSlots 0 turns the
// step off.
func WithCompanions(o CompanionOptions) Option { return func(r *Retriever) { r.companionOpts = o } }

// RecordCoUse records co-usage observations (tools used together, in
// order) in the store, which every replica follows, and syncs this view.
// Observations naming a card that does not exist are skipped; it reports
// whether any table changed. The caller has authorized every tool named.
func (r *Retriever) RecordCoUse(ctx context.Context, uses []cards.CoUse) (bool, error) {
	if len(uses) == 0 {
		return false, nil
	}
	changed, err := r.store.AddCompanions(ctx, uses)
	if err != nil || !changed {
		return false, err
	}
	if err := r.Sync(ctx); err != nil {
		return true, fmt.Errorf("co-usage recorded, but this view is not current yet (the next sync applies it): %w", err)
	}
	return true, nil
}

// CompanionsOf returns a copy of a card's co-usage table as the view holds
// it (decayed to when it was loaded), and whether the card is active.
func (r *Retriever) CompanionsOf(k cards.Key) (cards.Companions, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	e := r.byID[DocID(k)]
	if e == nil {
		return cards.Companions{}, false
	}
	if e.co == nil {
		return cards.Companions{}, true
	}
	return cards.Companions{At: e.co.view.At, Uses: e.co.view.Uses, Tools: slices.Clone(e.co.view.Tools)}, true
}

// coUsage is a card's co-usage table: as stored, which a snapshot keeps
// (so that a restart decays it as a read from the store would), and as the
// view uses it, decayed to when it was read.
type coUsage struct {
	stored, view cards.Companions
}

// newCoUsage is a stored table as the view keeps it: nil when it has no
// tools.
func newCoUsage(stored cards.Companions) *coUsage {
	if len(stored.Tools) == 0 {
		return nil
	}
	return &coUsage{stored: stored, view: stored.Decayed(time.Now())}
}

// companionPick is a tool the step may bring: its entry, how likely the
// shortlist's anchors make it, and its strongest anchor.
type companionPick struct {
	e           *entry
	worth, best float64 // best: the strongest anchor's part
	anchor      *entry
}

// addCompanions is the companion step over a merged shortlist of at most
// topK tools (ranked are the lists it was merged from, cs the caller's
// candidate set). It returns the shortlist with companions in the slots of
// weak tools, then in spare ones, and the anchor of each (nil: not a
// companion), index for index. merged is not modified.
func addCompanions(o CompanionOptions, cs *candSet, ranked [][]Fused, merged []Merged, topK int) ([]Merged, []*entry) {
	slots := min(o.MaxSlots, topK/2)
	if slots <= 0 || len(merged) == 0 {
		return merged, nil
	}
	var picks []companionPick
	for _, m := range merged {
		a := m.e
		if m.Confidence < o.Anchor || a == nil || a.co == nil || len(a.co.view.Tools) == 0 {
			continue
		}
		for _, c := range a.co.view.Tools {
			id := DocID(cards.Key{Tenant: a.card.Tenant, Server: c.Server, Name: c.Name})
			e := cs.entries[id]
			if e == nil || e.destructive || slices.ContainsFunc(merged, func(m Merged) bool { return m.e == e }) {
				continue
			}
			p := m.Confidence * min(1, c.Count()/(a.co.view.Uses+o.Prior))
			if i := slices.IndexFunc(picks, func(q companionPick) bool { return q.e == e }); i >= 0 {
				q := &picks[i]
				if p > q.best {
					q.best, q.anchor = p, a
				}
				q.worth = 1 - (1-q.worth)*(1-p)
				continue
			}
			picks = append(picks, companionPick{e: e, worth: p, best: p, anchor: a})
		}
	}
	picks = slices.DeleteFunc(picks, func(p companionPick) bool { return p.worth < o.Min })
	if len(picks) == 0 {
		return merged, nil
	}
	slices.SortStableFunc(picks, func(x, y companionPick) int {
		return cmp.Or(cmp.Compare(y.worth, x.worth), cmp.Compare(x.e.id, y.e.id))
	})
	picks = picks[:min(len(picks), slots)]
	// Slots: weak tools worth less than the next pick, in shortlist order,
	// then spare ones.
	out := slices.Clone(merged)
	anchors := make([]*entry, len(out), topK)
	placed := 0
	for i := range out {
		if placed == len(picks) {
			break
		}
		if c := out[i].Confidence; c >= o.Weak || c >= picks[placed].worth {
			continue
		}
		out[i], anchors[i] = companionMerged(picks[placed], ranked), picks[placed].anchor
		placed++
	}
	for ; placed < len(picks) && len(out) < topK; placed++ {
		out = append(out, companionMerged(picks[placed], ranked))
		anchors = append(anchors, picks[placed].anchor)
	}
	if placed == 0 {
		return merged, nil
	}
	return out, anchors
}

// rankIn is the 1-based position of e's tool in a ranked list, 0 when
// absent.
func rankIn(list []Fused, e *entry) int {
	for i := range list {
		if list[i].e == e {
			return i + 1
		}
	}
	return 0
}

// companionMerged is a pick as a shortlist entry: no ranked list reached
// it, so it carries its scores in the list that ranked it best (none when
// no list ranked it), for its reason, and no list.
func companionMerged(p companionPick, ranked [][]Fused) Merged {
	m := Merged{Fused: Fused{ID: p.e.id, e: p.e}}
	best := 0
	for _, l := range ranked {
		if r := rankIn(l, p.e); r > 0 && (best == 0 || r < best) {
			best = r
			m.Fused = l[r-1]
			m.Fields = slices.Clone(m.Fields)
		}
	}
	return m
}

// companionReason says why a companion is in the answer: the tool it is
// used with, then its own evidence, if any.
func companionReason(anchor cards.Key, f Fused) string {
	why := "used with " + anchor.Server + "/" + anchor.Name
	if f.LexicalRank > 0 || f.SemanticRank > 0 {
		why += "; " + reason(f)
	}
	return why
}
