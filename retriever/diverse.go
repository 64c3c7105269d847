package retriever

import (
	"hash/fnv"
	"slices"
	"strings"

	"github.com/seed0cff8200/cardex/cards"
)

// Near-duplicates: interchangeable tools on different servers
// (filesystem/read_file and desktop-commander/read_file,
// playwright_click and puppeteer_click) take one slot of a shortlist, held by
// the better ranked, which names the others as its alternatives. Two tools
// are near-duplicates when they are on different servers, their names are
// the same once the words of their servers' names (of three letters or more)
// are taken out, and their
// summaries share at least MinSummaryOverlap of their words.
const MinSummaryOverlap = 0.4

// WithCollapse turns the collapsing of near-duplicates on or off.
func WithCollapse(on bool) Option { return func(r *Retriever) { r.collapse = on } }

// DefaultCollapse says whether near-duplicates are collapsed by default.
const DefaultCollapse = true

// dupGroup counts a tenant's active cards with one dup key: a card alone in
// its group has no near-duplicate, and collapsing passes it by. no is its
// number in the view (≥ 1), by which collapsing finds a group's kept tools.
type dupGroup struct {
	n  int
	no uint32
}

// dupKey is the part of a card that near-duplicates share: its name without
// its server's words. Computed once per card (entry.dup).
func dupKey(c *cards.Card) string {
	server := map[string]bool{}
	for _, w := range strings.Fields(SplitIdentifiers(c.Server)) {
		if len(w) >= 3 { // a server's word, not a digit or an initial
			server[w] = true
		}
	}
	var kept []string
	for _, w := range strings.Fields(SplitIdentifiers(c.Name)) {
		if !server[w] {
			kept = append(kept, w)
		}
	}
	return strings.Join(kept, " ")
}

// summaryWords are a summary's distinct lower-cased words, as sorted
// hashes (so that two summaries compare by one merge).
func summaryWords(s string) []uint64 {
	var out []uint64
	for _, w := range strings.Fields(strings.ToLower(SplitIdentifiers(s))) {
		w = strings.Trim(w, `.,;:!?()[]"'`)
		if w != "" {
			h := fnv.New64a()
			h.Write([]byte(w))
			out = append(out, h.Sum64())
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// overlap is the Jaccard similarity of two word sets.
func overlap(a, b []uint64) float64 {
	if len(a) == 0 || len(b) == 0 {
		return 0
	}
	n, i, j := 0, 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i] == b[j]:
			n++
			i++
			j++
		case a[i] < b[j]:
			i++
		default:
			j++
		}
	}
	return float64(n) / float64(len(a)+len(b)-n)
}

func nearDuplicates(a, b *entry) bool {
	return a.card.Server != b.card.Server && a.dup != "" && a.dup == b.dup &&
		overlap(a.words, b.words) >= MinSummaryOverlap
}

// collapseList keeps, of every group of near-duplicates in a ranked list,
// the best ranked, and records the others as its alternatives in alts (in
// rank order). It returns the shortened list, in fused's array (the
// pipeline's own list, which it no longer needs). kept is scratch, empty
// before and after.
func collapseList(fused []Fused, kept, alts *entryLists) []Fused {
	out := fused[:0] // written behind the reading position
	for _, f := range fused {
		if e := f.e; e.group != nil && e.group.n > 1 {
			var k *entry
			kept.each(e.group.no, func(c *entry) bool {
				if nearDuplicates(c, e) {
					k = c
					return false
				}
				return true
			})
			if k != nil {
				alts.addOnce(k.no, e)
				continue
			}
			kept.add(e.group.no, e)
		}
		out = append(out, f)
	}
	kept.reset()
	return out
}

// entryLists are lists of entries by an integer key (a dup group's number,
// an entry's), each in the order added, in scratch that is reused across
// requests (reset).
type entryLists struct {
	at    keyTable // key → 1 + the index in ends of its list
	ends  []listEnds
	nodes []entryNode
}

// listEnds are 1 + the indices in nodes of a list's first and last node.
type listEnds struct{ head, tail int32 }

type entryNode struct {
	e    *entry
	next int32 // 1 + the index of the next node, 0 at the end
}

// add appends e to key's list.
func (l *entryLists) add(key uint32, e *entry) {
	l.nodes = append(l.nodes, entryNode{e: e})
	at := int32(len(l.nodes))
	p := l.at.slot(key)
	if *p == 0 {
		l.ends = append(l.ends, listEnds{head: at, tail: at})
		*p = int32(len(l.ends))
		return
	}
	end := &l.ends[*p-1]
	l.nodes[end.tail-1].next = at
	end.tail = at
}

// addOnce appends e to key's list unless it holds it.
func (l *entryLists) addOnce(key uint32, e *entry) {
	held := false
	l.each(key, func(c *entry) bool {
		held = c == e
		return !held
	})
	if !held {
		l.add(key, e)
	}
}

// each calls fn with key's entries in order while it returns true.
func (l *entryLists) each(key uint32, fn func(*entry) bool) {
	x := l.at.get(key)
	if x == 0 {
		return
	}
	for i := l.ends[x-1].head; i != 0; i = l.nodes[i-1].next {
		if !fn(l.nodes[i-1].e) {
			return
		}
	}
}

// reset empties every list.
func (l *entryLists) reset() {
	l.at.reset(0)
	clear(l.nodes)
	l.nodes, l.ends = l.nodes[:0], l.ends[:0]
}
