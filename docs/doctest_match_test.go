package docs_test

import (
	"fmt"
	"regexp"
	"strings"
)

// placeholders are what may legitimately vary in printed output, by name.
var placeholders = map[string]string{
	"{id}":    `[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`,
	"{hex}":   `[0-9a-f]+`,
	"{token}": `[A-Za-z0-9_-]+`,
	"{time}":  `\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)`,
	"{num}":   `-?\d[\d,]*(?:\.\d+)?`,
	"{dur}":   `(?:\d+(?:\.\d+)?(?:ns|µs|us|ms|s|m|h))+`,
}

var tokenRE = regexp.MustCompile(`\{(?:id|hex|token|time|num|dur)\}|\.\.\.| {2,}`)

// linePattern compiles one expected line: "..." is any text, a placeholder
// its pattern, a run of two or more spaces any such run; the rest literal.
func linePattern(want string) *regexp.Regexp {
	var b strings.Builder
	b.WriteString("^")
	rest := strings.TrimRight(want, " ")
	for {
		loc := tokenRE.FindStringIndex(rest)
		if loc == nil {
			b.WriteString(regexp.QuoteMeta(rest))
			break
		}
		b.WriteString(regexp.QuoteMeta(rest[:loc[0]]))
		switch tok := rest[loc[0]:loc[1]]; {
		case tok == "...":
			b.WriteString(".*?")
		case strings.HasPrefix(tok, "{"):
			b.WriteString(placeholders[tok])
		default:
			b.WriteString(" {2,}")
		}
		rest = rest[loc[1]:]
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String())
}

// normalize splits printed output into lines without trailing spaces or
// trailing blank lines.
func normalize(out string) []string {
	lines := strings.Split(strings.ReplaceAll(out, "\r\n", "\n"), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " \t")
	}
	for len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	return lines
}

// matches reports whether got (normalized) is what want documents: a want
// line "..." matches any number of lines, every other line one line.
func matches(want, got []string) bool {
	pats := make([]*regexp.Regexp, len(want))
	for i, w := range want {
		if strings.TrimSpace(w) != "..." {
			pats[i] = linePattern(w)
		}
	}
	// memo[i][j]: want[i:] against got[j:] already failed.
	failed := map[[2]int]bool{}
	var match func(i, j int) bool
	match = func(i, j int) bool {
		if i == len(want) {
			return j == len(got)
		}
		if failed[[2]int{i, j}] {
			return false
		}
		ok := false
		if pats[i] == nil {
			for k := j; k <= len(got) && !ok; k++ {
				ok = match(i+1, k)
			}
		} else {
			ok = j < len(got) && pats[i].MatchString(got[j]) && match(i+1, j+1)
		}
		if !ok {
			failed[[2]int{i, j}] = true
		}
		return ok
	}
	return match(0, 0)
}

// diff shows want against got line by line, "-" for documented lines that
// were not printed, "+" for printed lines that were not documented, " " for
// the lines that match (a "..." line is kept as it is).
func diff(want, got []string) string {
	pats := make([]*regexp.Regexp, len(want))
	for i, w := range want {
		if strings.TrimSpace(w) != "..." {
			pats[i] = linePattern(w)
		}
	}
	eq := func(i, j int) bool { return pats[i] != nil && pats[i].MatchString(got[j]) }
	// Longest common subsequence of matching lines.
	n, m := len(want), len(got)
	lcs := make([][]int, n+1)
	for i := range lcs {
		lcs[i] = make([]int, m+1)
	}
	for i := n - 1; i >= 0; i-- {
		for j := m - 1; j >= 0; j-- {
			switch {
			case eq(i, j):
				lcs[i][j] = lcs[i+1][j+1] + 1
			case lcs[i+1][j] >= lcs[i][j+1]:
				lcs[i][j] = lcs[i+1][j]
			default:
				lcs[i][j] = lcs[i][j+1]
			}
		}
	}
	var b strings.Builder
	i, j := 0, 0
	for i < n || j < m {
		switch {
		case i < n && j < m && eq(i, j):
			fmt.Fprintf(&b, "  %s\n", got[j])
			i, j = i+1, j+1
		case i < n && pats[i] == nil:
			fmt.Fprintf(&b, "  %s\n", want[i])
			i++
		case j < m && (i == n || lcs[i][j+1] >= lcs[i+1][j]):
			fmt.Fprintf(&b, "+ %s\n", got[j])
			j++
		default:
			fmt.Fprintf(&b, "- %s\n", want[i])
			i++
		}
	}
	return b.String()
}
