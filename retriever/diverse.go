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
// its group has no near-duplicate, and collapsing passes it by.
type dupGroup struct{ n int }

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
// the best ranked, and records the others as its alternatives (in rank
// order). It returns the shortened list, in fused's array (the pipeline's
// own list, which it no longer needs), and the alternatives by ID.
func collapseList(fused []Fused, alts map[string][]string) []Fused {
	out := fused[:0]                // written behind the reading position
	var kept map[*dupGroup][]*entry // dup group → its kept entries
	for _, f := range fused {
		if e := f.e; e.group != nil && e.group.n > 1 {
			if kept == nil {
				kept = map[*dupGroup][]*entry{}
			}
			i := slices.IndexFunc(kept[e.group], func(k *entry) bool { return nearDuplicates(k, e) })
			if i >= 0 {
				id := kept[e.group][i].id
				if !slices.Contains(alts[id], f.ID) {
					alts[id] = append(alts[id], f.ID)
				}
				continue
			}
			kept[e.group] = append(kept[e.group], e)
		}
		out = append(out, f)
	}
	return out
}
