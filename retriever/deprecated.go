package retriever

// DeprecatedWeight scales the fused score of a deprecated card (tag
// deprecated, cards.TagDeprecated): its replacement, which matches the same
// requests about as well, ranks above it, while a deprecated tool that
// nothing else fits is still found.
const DeprecatedWeight = 0.7

// demoteDeprecated scales the fused scores of deprecated cards and re-sorts
// the list (in place: fused is the pipeline's own).
func demoteDeprecated(fused []Fused) []Fused {
	moved := false
	for i := range fused {
		if fused[i].e.deprecated {
			fused[i].Score *= DeprecatedWeight
			moved = true
		}
	}
	if moved {
		sortFused(fused)
	}
	return fused
}
