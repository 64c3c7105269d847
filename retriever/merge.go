package retriever

import "slices"

// Merged is one tool of a merged shortlist: its scores in the list that
// placed it, and every list that wanted it.
type Merged struct {
	Fused
	// Lists are the indices of the ranked lists that reached this tool
	// during the merge, ascending; the first placed it.
	Lists []int
}

// MergeFair merges ranked lists (each best first) into at most k tools, in
// turns: every list's best tool first, then every list's second, and so on,
// the lists taking their turns in the order given. A tool that several lists
// want appears once, at the first turn that reaches it, and lists every list
// that reached it; a list whose next tool is already placed moves on to its
// following one within the same turn, so every list gets a new tool per turn
// while it has any. The result depends only on the lists and k (the same
// input gives the same output, and the result for k is a prefix of the one
// for k+1). Inputs are not modified.
func MergeFair(lists [][]Fused, k int) []Merged {
	if k <= 0 {
		return nil
	}
	if len(lists) == 1 {
		n := min(k, len(lists[0]))
		out := make([]Merged, 0, n)
		zeros := make([]int, n) // every tool's Lists, {0}
		for i := range lists[0] {
			f := &lists[0][i]
			if len(out) == k {
				break
			}
			if mergedAt(out, f) >= 0 {
				continue
			}
			m := Merged{Fused: *f, Lists: zeros[len(out) : len(out)+1 : len(out)+1]}
			m.Fields = slices.Clone(m.Fields)
			out = append(out, m)
		}
		return out
	}
	pos := make([]int, len(lists))
	var out []Merged
	for len(out) < k {
		progressed := false
		for i, l := range lists {
			if len(out) == k {
				break
			}
			for pos[i] < len(l) {
				f := &l[pos[i]]
				pos[i]++
				if j := mergedAt(out, f); j >= 0 {
					if !slices.Contains(out[j].Lists, i) {
						out[j].Lists = append(out[j].Lists, i)
						slices.Sort(out[j].Lists)
					}
					continue
				}
				m := Merged{Fused: *f, Lists: []int{i}}
				m.Fields = slices.Clone(m.Fields)
				out = append(out, m)
				progressed = true
				break
			}
		}
		if !progressed {
			break
		}
	}
	return out
}

// mergedAt is the position in out of f's card, -1 when it is not there
// (a scan: out holds at most MaxTopK tools).
func mergedAt(out []Merged, f *Fused) int {
	for j := range out {
		if sameCard(&out[j].Fused, f) {
			return j
		}
	}
	return -1
}
