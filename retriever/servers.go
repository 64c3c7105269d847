package retriever

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"

	"github.com/seed0cff8200/cardex/cards"
)

// Server evidence: a server entry (cards.ServerInfo: its name, title and
// description) is indexed like a card, lexically and semantically, and a
// ranked text that matches a server strongly lifts that server's tools. The
// lift is bounded: it never takes a tool above the best tool of the list on
// its own evidence, and it never applies to a tool marked destructive, so
// nothing dangerous is surfaced on its neighbours' strength.
//
// A server counts only when the caller may see at least one of its tools,
// and its statistics are those of such servers alone, so a server entry
// whose tools the caller cannot see changes nothing.

// DefaultServerBoost is the weight of server evidence (WithServerBoost).
const DefaultServerBoost = 0.0

// WithServerBoost sets the weight of the server evidence (0 turns it off).
func WithServerBoost(w float64) Option { return func(r *Retriever) { r.serverBoost = w } }

// serverIndex holds the server entries of every tenant.
type serverIndex struct {
	lex  *LexicalIndex
	vec  *MemoryVectors
	info map[string]cards.ServerInfo // DocID(ServerKey) → entry
}

func newServerIndex(dim int) (*serverIndex, error) {
	lex, err := NewLexicalIndexWithWeights(LexicalWeights{Name: 3, Summary: 2, Description: 1})
	if err != nil {
		return nil, err
	}
	return &serverIndex{lex: lex, vec: NewMemoryVectors(dim), info: map[string]cards.ServerInfo{}}, nil
}

func (x *serverIndex) close() error { return x.lex.Close() }

// serverText is the text a server entry is embedded from.
func serverText(s *cards.ServerInfo) string {
	parts := []string{SplitIdentifiers(s.Name), s.Title, s.Description}
	var out []string
	for _, p := range parts {
		if strings.TrimSpace(p) != "" {
			out = append(out, p)
		}
	}
	return strings.Join(out, ". ")
}

// UpsertServers indexes server entries (replacing entries with the same
// key) and drops the entries named by remove. Call with r.mu held for
// writing; vectors are computed by the caller.
func (x *serverIndex) upsert(ss []cards.ServerInfo, vecs [][]float32, remove []cards.Key) error {
	var ids []string
	for _, k := range remove {
		id := DocID(cards.ServerKey(k.Tenant, k.Server))
		ids = append(ids, id)
		delete(x.info, id)
		x.vec.Delete(id)
	}
	if err := x.lex.Delete(ids); err != nil {
		return err
	}
	docs := make([]LexicalDoc, len(ss))
	for i, s := range ss {
		id := DocID(cards.ServerKey(s.Tenant, s.Name))
		docs[i] = LexicalDoc{ID: id, Tenant: s.Tenant, Name: s.Name, Summary: s.Title, Description: s.Description}
		x.info[id] = s
		if vecs[i] != nil {
			if err := x.vec.Upsert(id, s.Tenant, vecs[i]); err != nil {
				return err
			}
		}
	}
	return x.lex.Upsert(docs)
}

// SetServers indexes server entries: the view's copy of the store's server
// catalogue. Entries replace those with the same (tenant, name).
func (r *Retriever) SetServers(ctx context.Context, ss []cards.ServerInfo) error {
	texts := make([]string, len(ss))
	for i := range ss {
		texts[i] = serverText(&ss[i])
	}
	vecs := make([][]float32, len(ss))
	if len(ss) > 0 {
		v, err := r.emb.Embed(ctx, texts)
		if err != nil {
			return fmt.Errorf("embed servers: %w", err)
		}
		copy(vecs, v)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.srv.upsert(ss, vecs, nil)
}

// serverLift returns, for one ranked text, the lift of each visible server
// (by server name): w × its strength, the server's match as a calibrated
// confidence of the server entry (see ConfidenceModel), kept only when the
// entry matched lexically. Call with r.mu held.
func (r *Retriever) serverLift(ctx context.Context, filter Filter, candidates map[string]*entry, text []WeightedText, qvec []float32) map[string]float64 {
	if r.serverBoost <= 0 || len(r.srv.info) == 0 {
		return nil
	}
	visible := map[string]bool{}
	for _, e := range candidates {
		visible[e.card.Server] = true
	}
	var ids []string
	for s := range visible {
		id := DocID(cards.ServerKey(filter.Tenant, s))
		if _, ok := r.srv.info[id]; ok {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	f := Filter{Tenant: filter.Tenant, IDs: ids}
	lex, err := r.srv.lex.SearchWeighted(text, f, len(ids))
	if err != nil || len(lex) == 0 {
		return nil
	}
	var sem []Hit
	if qvec != nil {
		sem, _ = r.srv.vec.Search(qvec, f, len(ids))
	}
	cos := map[string]float64{}
	for _, h := range sem {
		cos[h.ID] = h.Score
	}
	out := map[string]float64{}
	for _, h := range lex {
		k, _ := ParseDocID(h.ID)
		var strength float64
		switch os.Getenv("SBMODE") {
		case "ev":
			strength = h.Evidence
		case "cov":
			strength = h.Coverage
		case "evcos":
			strength = (h.Evidence + math.Max(0, cos[h.ID])) / 2
		default:
			strength = h.Evidence * math.Max(0, cos[h.ID])
		}
		if strength > 0 {
			out[k.Server] = r.serverBoost * strength
		}
	}
	return out
}

// liftServers adds each tool's server lift to its score, capped just under
// the list's best own score, leaving destructive tools alone, and re-sorts.
func liftServers(fused []Fused, lift map[string]float64, candidates map[string]*entry) []Fused {
	if len(lift) == 0 || len(fused) == 0 {
		return fused
	}
	top := fused[0].Score
	out := make([]Fused, len(fused))
	copy(out, fused)
	for i := range out {
		e := candidates[out[i].ID]
		if e == nil {
			continue
		}
		l := lift[e.card.Server]
		if l == 0 || isDestructive(&e.card) || out[i].Score >= top {
			continue
		}
		out[i].Score = math.Min(out[i].Score+l, math.Nextafter(top, math.Inf(-1)))
	}
	sortFused(out)
	return out
}

func isDestructive(c *cards.Card) bool {
	return c.Annotations.Destructive != nil && *c.Annotations.Destructive
}
