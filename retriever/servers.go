package retriever

import (
	"math"
	"slices"

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
// share it (entry.server), and n counts them; no is its number in the view
// (≥ 1), by which the server lift keeps its per-request sums.
type serverSlot struct {
	n  int
	no uint32
}

// serverLift returns the lift of each tool of a ranked list, by position:
// its server's lift, the server prior × the server's best tool's share of
// the list's best score, plus the server boost × the server entry's lexical
// evidence for text (the list's analysed query, queryTerms). The lifts are in sums' scratch, valid until its next
// use. Call with r.mu held.
func (r *Retriever) serverLift(cs *candSet, text []queryTerm, fused []Fused, sums *slotSums) []float64 {
	if len(fused) == 0 || !(fused[0].Score > 0) {
		return nil
	}
	defer sums.reset()
	if r.serverPrior > 0 {
		for _, f := range fused {
			sums.max(f.e.server.no, r.serverPrior*f.Score/fused[0].Score)
		}
	}
	if entries := r.servers[cs.filter.Tenant]; r.serverBoost > 0 && len(entries) > 0 {
		if sv := r.serverEntries(cs); len(sv.filter.IDs) > 0 {
			// The IDs are in server order, so the statistics sum in a
			// fixed order.
			hits, err := r.srv.lex.searchTerms(nil, text, sv.set, sv.filter, len(sv.filter.IDs), false)
			if err != nil {
				r.log.Warn("server entry search failed", "err", err)
			}
			for _, h := range hits {
				// A server the caller may use has a slot: the set's
				// servers are those of its candidates.
				if s := sv.slots[h.ID]; s != nil {
					sums.add(s.no, r.serverBoost*h.Evidence)
				}
			}
		}
	}
	if len(sums.touched) == 0 {
		return nil
	}
	lifts := slices.Grow(sums.lifts[:0], len(fused))
	for _, f := range fused {
		lifts = append(lifts, sums.sum[f.e.server.no])
	}
	sums.lifts = lifts
	return lifts
}

// srvEntries are the server entries of a candidate set's servers, prepared
// for the server index once per set: the filter of their IDs (in server
// order), its prepared set, and each ID's slot.
type srvEntries struct {
	filter Filter
	set    *LexSet
	slots  map[string]*serverSlot
}

// serverEntries are cs's server entries, computed at first use. Call with
// r.mu held.
func (r *Retriever) serverEntries(cs *candSet) *srvEntries {
	cs.srvOnce.Do(func() {
		sv := &srvEntries{filter: Filter{Tenant: cs.filter.Tenant}, slots: map[string]*serverSlot{}}
		entries := r.servers[cs.filter.Tenant]
		for _, s := range cs.servers {
			if _, ok := entries[s]; ok {
				id := DocID(cards.ServerKey(cs.filter.Tenant, s))
				sv.filter.IDs = append(sv.filter.IDs, id)
				sv.slots[id] = r.slots[cs.filter.Tenant+idSep+s]
			}
		}
		if len(sv.filter.IDs) > 0 {
			sv.set = r.srv.lex.Prepare(sv.filter)
		}
		cs.srv = sv
	})
	return cs.srv
}

// slotSums are a ranked list's sums by server slot number: scratch reused
// across lists, cleared of the slots it touched after each.
type slotSums struct {
	sum     []float64
	has     []bool
	touched []uint32
	lifts   []float64 // serverLift's answer
}

func (s *slotSums) touch(no uint32) {
	s.sum, s.has = reach(s.sum, no), reach(s.has, no)
	if !s.has[no] {
		s.has[no] = true
		s.touched = append(s.touched, no)
	}
}

// max raises slot no's sum to at least x (a slot's first value is max(0, x)).
func (s *slotSums) max(no uint32, x float64) {
	s.touch(no)
	s.sum[no] = max(s.sum[no], x)
}

// add adds x to slot no's sum.
func (s *slotSums) add(no uint32, x float64) {
	s.touch(no)
	s.sum[no] += x
}

func (s *slotSums) reset() {
	for _, no := range s.touched {
		s.sum[no], s.has[no] = 0, false
	}
	s.touched = s.touched[:0]
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
