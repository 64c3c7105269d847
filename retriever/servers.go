package retriever

import (
	"math"

	"github.com/seed0cff8200/cardex/cards"
)

// Server evidence. A ranked list lifts the tools of the servers it matches
// strongly, because the tools a task needs often come from one server (a
// route needs geocoding and directions from the same map server). Two kinds
// of evidence say that a server matches a text:
//
//   - its tools: the server's best tool in the list, as a share of the
//     list's best score (weighted by WithServerPrior);
//   - its server entry (cards.ServerInfo: name, title and description),
//     indexed lexically like a card: the IDF-weighted share of the text's
//     terms the entry matches (weighted by WithServerBoost), so that a text
//     naming a server ("the 12306 tickets") lifts it.
//
// The lift is bounded (liftServers): a tool moves towards the list's best
// score by its server's lift, at most maxLift of the way, so it never passes
// the best tool on its own evidence and a server's tools keep their order;
// a tool marked destructive is never lifted, so nothing dangerous surfaces on
// its neighbours' strength. A server entry counts only when the caller may
// use at least one of its tools, and its statistics are those of such
// entries alone: an entry whose tools the caller cannot see changes nothing.

// Defaults of the server evidence, measured on ../shared/eval
// (docs/EVAL.md).
const (
	DefaultServerPrior = 0.7
	DefaultServerBoost = 0.6
	// maxLift bounds a lift below 1, so that a lifted tool never reaches
	// the list's best score.
	maxLift = 0.9
)

// WithServerPrior sets the weight of a server's best tool as evidence for
// its other tools (0 turns it off).
func WithServerPrior(w float64) Option { return func(r *Retriever) { r.serverPrior = w } }

// WithServerBoost sets the weight of server-entry matches (0 turns them off).
func WithServerBoost(w float64) Option { return func(r *Retriever) { r.serverBoost = w } }

// serverIndex holds the server entries of every tenant, lexically (the
// entries themselves are the view's servers map).
type serverIndex struct {
	lex *LexicalIndex
}

func newServerIndex() (*serverIndex, error) {
	lex, err := NewLexicalIndexWithWeights(LexicalWeights{Name: 3, Summary: 2, Description: 1})
	if err != nil {
		return nil, err
	}
	return &serverIndex{lex: lex}, nil
}

func (x *serverIndex) close() error { return x.lex.Close() }

// update indexes server entries (replacing those with the same key) and
// drops the entries named by remove (server keys). Call with r.mu held for
// writing.
func (x *serverIndex) update(ss []cards.ServerInfo, remove []cards.Key) error {
	var ids []string
	for _, k := range remove {
		ids = append(ids, DocID(cards.ServerKey(k.Tenant, k.Server)))
	}
	if err := x.lex.Delete(ids); err != nil {
		return err
	}
	docs := make([]LexicalDoc, len(ss))
	for i, s := range ss {
		id := DocID(cards.ServerKey(s.Tenant, s.Name))
		docs[i] = LexicalDoc{ID: id, Tenant: s.Tenant, Name: s.Name, Summary: s.Title, Description: s.Description}
	}
	return x.lex.Upsert(docs)
}

// serverSlot stands for one server of a tenant in the view: its entries
// share it (entry.server), and n counts them.
type serverSlot struct{ n int }

// serverLift returns the lift of each tool of a ranked list, by position:
// its server's lift, the server prior × the server's best tool's share of
// the list's best score, plus the server boost × the server entry's lexical
// evidence for text. Call with r.mu held.
func (r *Retriever) serverLift(cs *candSet, text []WeightedText, fused []Fused) []float64 {
	if len(fused) == 0 || !(fused[0].Score > 0) {
		return nil
	}
	bySlot := map[*serverSlot]float64{}
	if r.serverPrior > 0 {
		for _, f := range fused {
			s := f.e.server
			bySlot[s] = max(bySlot[s], r.serverPrior*f.Score/fused[0].Score)
		}
	}
	if entries := r.servers[cs.filter.Tenant]; r.serverBoost > 0 && len(entries) > 0 {
		var ids []string
		for _, s := range cs.servers {
			if _, ok := entries[s]; ok {
				ids = append(ids, DocID(cards.ServerKey(cs.filter.Tenant, s)))
			}
		}
		if len(ids) > 0 {
			// ids are in server order, so the statistics sum in a fixed order.
			hits, err := r.srv.lex.SearchWeighted(text, Filter{Tenant: cs.filter.Tenant, IDs: ids}, len(ids))
			if err != nil {
				r.log.Warn("server entry search failed", "err", err)
			}
			for _, h := range hits {
				k, _ := ParseDocID(h.ID)
				// A server the caller may use has a slot: cs.servers
				// are those of its candidates.
				if s := r.slots[cs.filter.Tenant+idSep+k.Server]; s != nil {
					bySlot[s] += r.serverBoost * h.Evidence
				}
			}
		}
	}
	if len(bySlot) == 0 {
		return nil
	}
	lifts := make([]float64, len(fused))
	for i, f := range fused {
		lifts[i] = bySlot[f.e.server]
	}
	return lifts
}

// directConfidence is the confidence from which a tool is a direct match of
// its list: a lifted tool never passes a direct match ranked above it. It is
// the confidence that answers a list on its own (DefaultMinConfidence):
// measured on every labelled dataset (docs/EVAL.md), it changes nothing
// without search examples, and with them it keeps a server's weak siblings
// from passing the direct matches the examples bring (0.1, the round-2
// value, let them: livemcpbench intents 0.658, with it 0.685).
const directConfidence = DefaultMinConfidence

// liftServers moves each tool's score towards a target by its server's lift
// (lifts, by position; nil lifts nothing):
// score + (target − score) × min(lift, maxLift). The target is the list's
// best score for a direct match (confidence at least directConfidence), and
// for any other tool the lowest score of the direct matches ranked above
// it, so a tool that is not a direct match on its own evidence never passes
// one. Destructive tools are not lifted. fused must carry confidences and
// entries; it is lifted and re-sorted in place (the pipeline's own list).
func liftServers(fused []Fused, lifts []float64) []Fused {
	if len(lifts) == 0 || len(fused) == 0 {
		return fused
	}
	out, best := fused, fused[0].Score
	floor := best // the lowest score of a direct match so far
	for i := range out {
		f := &out[i]
		target := floor
		if f.Confidence >= directConfidence {
			target = best
		}
		if !f.e.destructive {
			if l := min(lifts[i], maxLift); l > 0 && f.Score < target {
				f.Score += (target - f.Score) * l
			}
		}
		if f.Confidence >= directConfidence {
			floor = math.Min(floor, f.Score)
		}
	}
	sortFused(out)
	return out
}

func isDestructive(c *cards.Card) bool {
	return c.Annotations.Destructive != nil && *c.Annotations.Destructive
}
