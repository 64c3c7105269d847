package retriever

import (
	"strings"
	"unicode"
)

// MaxDecomposed is the most parts Decompose splits a request into.
const MaxDecomposed = MaxIntents

// Decompose splits a multi-part request into its parts, deterministically
// and without a model: at sentence ends (". ", "! ", "? "), semicolons, and
// the clause joints people use to chain steps (", then", "and then",
// ", and"). Parts of fewer than three words stay with the part before them.
// A request that does not split into at least two parts returns nil.
func Decompose(q string) []string {
	var parts []string
	var b strings.Builder
	rs := []rune(q)
	flush := func() {
		if p := strings.TrimSpace(strings.Trim(strings.TrimSpace(b.String()), ",;")); p != "" {
			parts = append(parts, p)
		}
		b.Reset()
	}
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case (r == '.' || r == '!' || r == '?') && (i+1 == len(rs) || unicode.IsSpace(rs[i+1])):
			b.WriteRune(r)
			flush()
			continue
		case r == ';':
			flush()
			continue
		case r == ',':
			rest := strings.ToLower(string(rs[i+1:]))
			for _, joint := range []string{" and then ", " then ", " and "} {
				if strings.HasPrefix(rest, joint) {
					flush()
					i += len([]rune(joint))
					break
				}
			}
			if b.Len() == 0 {
				continue
			}
		case r == ' ' && strings.HasPrefix(strings.ToLower(string(rs[i:])), " and then "):
			flush()
			i += len(" and then ") - 1
			continue
		}
		b.WriteRune(r)
	}
	flush()
	// Merge fragments too short to be a step into the previous part.
	var out []string
	for _, p := range parts {
		if len(strings.Fields(p)) < 3 && len(out) > 0 {
			out[len(out)-1] += " " + p
			continue
		}
		out = append(out, p)
	}
	if len(out) < 2 {
		return nil
	}
	if len(out) > MaxDecomposed {
		out = append(out[:MaxDecomposed-1], strings.Join(out[MaxDecomposed-1:], " "))
	}
	return out
}
