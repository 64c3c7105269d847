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
		seen := make(map[string]bool, n)
		for _, f := range lists[0] {
			if len(out) == k {
				break
			}
			if seen[f.ID] {
				continue
			}
			seen[f.ID] = true
			f.Fields = slices.Clone(f.Fields)
			out = append(out, Merged{Fused: f, Lists: []int{0}})
		}
		return out
	}
	pos := make([]int, len(lists))
	at := map[string]int{} // ID → index in out
	var out []Merged
	for len(out) < k {
		progressed := false
		for i, l := range lists {
			if len(out) == k {
				break
			}
			for pos[i] < len(l) {
				f := l[pos[i]]
				pos[i]++
				if j, ok := at[f.ID]; ok {
					if !slices.Contains(out[j].Lists, i) {
						out[j].Lists = append(out[j].Lists, i)
						slices.Sort(out[j].Lists)
					}
					continue
				}
				at[f.ID] = len(out)
				f.Fields = slices.Clone(f.Fields)
				out = append(out, Merged{Fused: f, Lists: []int{i}})
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
