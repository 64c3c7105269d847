package cards

import (
	"slices"
	"strings"
	"unicode/utf8"
)

// Learned-phrasing bounds: per card, the most recent MaxLearned distinct
// phrasings of at most MaxLearnedLen characters are kept.
const (
	MaxLearned    = 32
	MaxLearnedLen = 200
)

// AddLearned is the one rule for learned phrasings, applied by every store:
// each phrase is sanitised and cut to MaxLearnedLen code points; empty ones
// and ones already held (compared case-insensitively) are dropped; new ones
// are appended and only the latest MaxLearned are kept. It returns the new
// list (a fresh slice; have is not modified) and whether it differs from
// have.
func AddLearned(have []string, phrases ...string) ([]string, bool) {
	out := slices.Clone(have)
	changed := false
	for _, p := range phrases {
		p = Sanitize(p)
		if utf8.RuneCountInString(p) > MaxLearnedLen {
			p = strings.TrimSpace(string([]rune(p)[:MaxLearnedLen]))
		}
		if p == "" || slices.ContainsFunc(out, func(q string) bool { return strings.EqualFold(p, q) }) {
			continue
		}
		out = append(out, p)
		changed = true
	}
	if len(out) > MaxLearned {
		out = out[len(out)-MaxLearned:]
	}
	return out, changed
}
