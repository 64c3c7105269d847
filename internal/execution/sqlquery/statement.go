package sqlquery

import (
	"fmt"
	"strings"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/execution/upstream"
)

// Statement limits.
const (
	MaxSQLBytes = 64 << 10
	MaxParams   = 100
)

// Statement is a query checked to be one SELECT or WITH statement, with its
// :name parameters replaced by $1, $2, ... (in order of first use).
type Statement struct {
	SQL    string
	Params []string
}

// Parse checks and rewrites a query. It reads the text the way PostgreSQL's
// lexer does for what matters here — quoted strings (E'...' with backslash escapes),
// quoted identifiers, dollar quoting, line comments (ended by \n or \r) and
// nested block comments — so a
// semicolon or a colon inside any of them is text, not syntax. It refuses
// an empty query, a second statement, a first keyword other than SELECT or
// WITH, and positional parameters ($1). It is the first check, not the only
// one: the statement runs as a cursor over the extended protocol (one
// statement only) inside a READ ONLY transaction, which is the real guard.
func Parse(sql string) (Statement, error) {
	if len(sql) > MaxSQLBytes {
		return Statement{}, refuse(RefusedArguments, "sql is %d bytes; the limit is %d", len(sql), MaxSQLBytes)
	}
	l := lexer{s: sql, index: map[string]int{}}
	if err := l.run(); err != nil {
		return Statement{}, err
	}
	if !l.seen {
		return Statement{}, refuse(RefusedStatement, "sql holds no statement: write one SELECT or WITH query")
	}
	return Statement{SQL: strings.TrimSpace(l.out.String()), Params: l.params}, nil
}

type lexer struct {
	s      string
	i      int
	out    strings.Builder
	params []string
	index  map[string]int
	seen   bool // the first token has been read
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80
}

func isIdentChar(c byte) bool {
	return isIdentStart(c) || (c >= '0' && c <= '9') || c == '$'
}

func (l *lexer) peek(k int) byte {
	if l.i+k < len(l.s) {
		return l.s[l.i+k]
	}
	return 0
}

// token notes a token outside comments: the first must be SELECT or WITH
// (after any opening parentheses).
func (l *lexer) token(word string) error {
	if l.seen {
		return nil
	}
	l.seen = true
	switch strings.ToLower(word) {
	case "select", "with":
		return nil
	}
	return refuse(RefusedStatement, "only a SELECT or WITH query can run here (the statement starts with %s)", describeToken(word))
}

func describeToken(w string) string { return fmt.Sprintf("%q", cards.Cut(w, 40)) }

func (l *lexer) run() error {
	for l.i < len(l.s) {
		c := l.s[l.i]
		switch {
		case c == '-' && l.peek(1) == '-':
			end := lineEnd(l.s[l.i:])
			if end < 0 {
				end = len(l.s) - l.i
			}
			l.out.WriteString(l.s[l.i : l.i+end])
			l.i += end
		case c == '/' && l.peek(1) == '*':
			end, ok := blockComment(l.s, l.i)
			if !ok {
				return refuse(RefusedStatement, "sql ends inside a /* comment */")
			}
			l.out.WriteString(l.s[l.i:end])
			l.i = end
		case c == '\'':
			if err := l.token("'"); err != nil {
				return err
			}
			if err := l.quoted('\'', false); err != nil {
				return err
			}
		case c == '"':
			if err := l.token(`"`); err != nil {
				return err
			}
			if err := l.quoted('"', false); err != nil {
				return err
			}
		case c == '$':
			if d := l.peek(1); d >= '0' && d <= '9' {
				return refuse(RefusedArguments, "positional parameters ($1) are not accepted: write :name and give params {\"name\": value}")
			}
			if end, ok := dollarQuote(l.s, l.i); ok {
				if err := l.token("$"); err != nil {
					return err
				}
				if end < 0 {
					return refuse(RefusedStatement, "sql ends inside a dollar-quoted string")
				}
				l.out.WriteString(l.s[l.i:end])
				l.i = end
				continue
			}
			if err := l.token("$"); err != nil {
				return err
			}
			l.out.WriteByte(c)
			l.i++
		case c == ':':
			if l.peek(1) == ':' { // a cast
				if err := l.token("::"); err != nil {
					return err
				}
				l.out.WriteString("::")
				l.i += 2
				continue
			}
			if !isIdentStart(l.peek(1)) {
				if err := l.token(":"); err != nil {
					return err
				}
				l.out.WriteByte(c)
				l.i++
				continue
			}
			if err := l.token(":"); err != nil {
				return err
			}
			j := l.i + 1
			for j < len(l.s) && isIdentChar(l.s[j]) && l.s[j] != '$' {
				j++
			}
			name := l.s[l.i+1 : j]
			if !upstream.ParamName.MatchString(name) {
				return refuse(RefusedArguments, "parameter :%s: a name is [A-Za-z_][A-Za-z0-9_]{0,62}", cards.Cut(name, 70))
			}
			n, ok := l.index[name]
			if !ok {
				if len(l.params) == MaxParams {
					return refuse(RefusedArguments, "the query uses more than %d parameters", MaxParams)
				}
				l.params = append(l.params, name)
				n = len(l.params)
				l.index[name] = n
			}
			fmt.Fprintf(&l.out, "$%d", n)
			l.i = j
		case c == ';':
			if rest := skipSpaceAndComments(l.s, l.i+1); rest < len(l.s) {
				return refuse(RefusedStatement, "sql holds more than one statement: send one SELECT or WITH query per call")
			}
			l.i = len(l.s)
		case isIdentStart(c):
			j := l.i + 1
			for j < len(l.s) && isIdentChar(l.s[j]) {
				j++
			}
			word := l.s[l.i:j]
			if err := l.token(word); err != nil {
				return err
			}
			l.out.WriteString(word)
			l.i = j
			// E'...' is a string with backslash escapes.
			if (word == "e" || word == "E") && l.peek(0) == '\'' {
				if err := l.quoted('\'', true); err != nil {
					return err
				}
			}
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '(':
			l.out.WriteByte(c)
			l.i++
		default:
			if err := l.token(string(c)); err != nil {
				return err
			}
			l.out.WriteByte(c)
			l.i++
		}
	}
	return nil
}

// quoted copies a quoted string or identifier starting at l.i; a doubled
// quote is one quote, and with backslashes a backslash escapes the next
// byte.
func (l *lexer) quoted(q byte, backslashes bool) error {
	j := l.i + 1
	for {
		if j >= len(l.s) {
			if q == '"' {
				return refuse(RefusedStatement, "sql ends inside a quoted identifier")
			}
			return refuse(RefusedStatement, "sql ends inside a quoted string")
		}
		switch c := l.s[j]; {
		case backslashes && c == '\\':
			j += 2
			continue
		case c == q && j+1 < len(l.s) && l.s[j+1] == q:
			j += 2
			continue
		case c == q:
			l.out.WriteString(l.s[l.i : j+1])
			l.i = j + 1
			return nil
		}
		j++
	}
}

// lineEnd is the index of the first line end in s, or -1: PostgreSQL's
// lexer ends a -- comment at \n or \r alike (newline [\n\r] in scan.l).
func lineEnd(s string) int { return strings.IndexAny(s, "\n\r") }

// blockComment returns the end of the (nested) comment starting at i.
func blockComment(s string, i int) (int, bool) {
	depth := 0
	for i < len(s) {
		switch {
		case s[i] == '/' && i+1 < len(s) && s[i+1] == '*':
			depth++
			i += 2
		case s[i] == '*' && i+1 < len(s) && s[i+1] == '/':
			depth--
			i += 2
			if depth == 0 {
				return i, true
			}
		default:
			i++
		}
	}
	return len(s), false
}

// dollarQuote reports whether a dollar quote ($$ or $tag$) starts at i and
// returns its end (-1 when it is not closed).
func dollarQuote(s string, i int) (int, bool) {
	j := i + 1
	if j < len(s) && isIdentStart(s[j]) {
		j++
		for j < len(s) && isIdentChar(s[j]) && s[j] != '$' {
			j++
		}
	}
	if j >= len(s) || s[j] != '$' {
		return 0, false
	}
	tag := s[i : j+1]
	k := strings.Index(s[j+1:], tag)
	if k < 0 {
		return -1, true
	}
	return j + 1 + k + len(tag), true
}

// skipSpaceAndComments returns the index of the first byte from i that is
// neither white space nor inside a comment.
func skipSpaceAndComments(s string, i int) int {
	for i < len(s) {
		switch {
		case s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r' || s[i] == '\f':
			i++
		case s[i] == '-' && i+1 < len(s) && s[i+1] == '-':
			end := lineEnd(s[i:])
			if end < 0 {
				return len(s)
			}
			i += end
		case s[i] == '/' && i+1 < len(s) && s[i+1] == '*':
			end, ok := blockComment(s, i)
			if !ok {
				return i
			}
			i = end
		default:
			return i
		}
	}
	return i
}
