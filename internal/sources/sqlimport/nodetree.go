package sqlimport

import (
	"fmt"
	"strconv"
	"strings"
)

// target is one output column of a view's query as PostgreSQL stored it:
// its position and name, and the table column it is a plain reference to
// (resorigtbl, resorigcol; 0 when it is computed).
type target struct {
	resno   int
	name    string
	origTbl uint32
	origCol int
}

// viewQuery is what an import needs of a view's stored query.
type viewQuery struct {
	targets []target
	// innerOnly: the query reads tables and views joined by inner joins
	// only, without set operations or grouping sets, so a column that is
	// a plain reference to a NOT NULL column is never null either.
	innerOnly bool
}

// viewTargets reads the query in a view's _RETURN rule (pg_rewrite.ev_action,
// PostgreSQL's node-tree text): its output columns and where they come
// from — what parse analysis found for each (the origin RowDescription
// reports) — and whether it joins only with inner joins. It is read from the
// catalogue, so the importing role needs no privilege on the base tables.
func viewTargets(evAction string) (viewQuery, error) {
	q := viewQuery{innerOnly: true}
	ts, err := q.read(tokenize(evAction))
	q.targets = ts
	return q, err
}

func (q *viewQuery) read(toks []string) ([]target, error) {
	// ( {QUERY ... :rtable (...) ... :targetList ( {TARGETENTRY ...} ... ) ... } )
	i := 0
	if i >= len(toks) || toks[i] != "(" {
		return nil, fmt.Errorf("rule action: want a list")
	}
	i++
	if i+1 >= len(toks) || toks[i] != "{" || toks[i+1] != "QUERY" {
		return nil, fmt.Errorf("rule action: want a QUERY node")
	}
	i += 2
	var out []target
	found := false
	for i < len(toks) && toks[i] != "}" {
		switch f := toks[i]; {
		case f == ":targetList":
			ts, err := targetList(toks, i+1)
			if err != nil {
				return nil, err
			}
			out, found = ts, true
		case f == ":rtable":
			if !innerRangeTable(toks, i+1) {
				q.innerOnly = false
			}
		case (f == ":setOperations" || f == ":groupingSets") && i+1 < len(toks) && toks[i+1] != "<>":
			q.innerOnly = false
		}
		if strings.HasPrefix(toks[i], ":") {
			i = skipValue(toks, i+1)
			continue
		}
		i++
	}
	if !found {
		return nil, fmt.Errorf("rule action: the QUERY has no targetList")
	}
	return out, nil
}

// innerRangeTable reports whether every entry of the range table at i is a
// relation (rtekind 0) or an inner join (rtekind 2, jointype 0).
func innerRangeTable(toks []string, i int) bool {
	if i >= len(toks) || toks[i] != "(" {
		return true // <>
	}
	end := skipValue(toks, i)
	i++
	for i < end-1 {
		if toks[i] != "{" || i+1 >= len(toks) || toks[i+1] != "RANGETBLENTRY" {
			i = skipValue(toks, i)
			continue
		}
		next := skipValue(toks, i)
		rtekind, jointype := "", "0"
		for j := i + 2; j < next-1; {
			if j+1 < len(toks) && toks[j+1] != "{" && toks[j+1] != "(" {
				switch toks[j] {
				case ":rtekind":
					rtekind = toks[j+1]
				case ":jointype":
					jointype = toks[j+1]
				}
			}
			if strings.HasPrefix(toks[j], ":") {
				j = skipValue(toks, j+1)
				continue
			}
			j++
		}
		if !(rtekind == "0" || (rtekind == "2" && jointype == "0")) {
			return false
		}
		i = next
	}
	return true
}

func targetList(toks []string, i int) ([]target, error) {
	if i < len(toks) && toks[i] == "<>" {
		return nil, nil
	}
	if i >= len(toks) || toks[i] != "(" {
		return nil, fmt.Errorf("targetList: want a list")
	}
	i++
	var out []target
	for i < len(toks) && toks[i] != ")" {
		if toks[i] != "{" || i+1 >= len(toks) || toks[i+1] != "TARGETENTRY" {
			i = skipValue(toks, i)
			continue
		}
		i += 2
		var t target
		junk := false
		for i < len(toks) && toks[i] != "}" {
			field := toks[i]
			if !strings.HasPrefix(field, ":") {
				i++
				continue
			}
			if i+1 < len(toks) && toks[i+1] != "{" && toks[i+1] != "(" {
				v := toks[i+1]
				switch field {
				case ":resno":
					t.resno, _ = strconv.Atoi(v)
				case ":resname":
					if v != "<>" {
						t.name = v
					}
				case ":resorigtbl":
					n, _ := strconv.ParseUint(v, 10, 32)
					t.origTbl = uint32(n)
				case ":resorigcol":
					t.origCol, _ = strconv.Atoi(v)
				case ":resjunk":
					junk = v == "true"
				}
			}
			i = skipValue(toks, i+1)
		}
		i++ // }
		if !junk {
			out = append(out, t)
		}
	}
	return out, nil
}

// skipValue returns the index after the value starting at i: a node
// {...}, a list (...), or one token.
func skipValue(toks []string, i int) int {
	if i >= len(toks) {
		return i
	}
	switch toks[i] {
	case "{", "(":
		depth := 0
		for ; i < len(toks); i++ {
			switch toks[i] {
			case "{", "(":
				depth++
			case "}", ")":
				depth--
				if depth == 0 {
					return i + 1
				}
			}
		}
		return i
	case "}", ")":
		return i // the end of the enclosing value: nothing to skip
	}
	return i + 1
}

// tokenize splits node-tree text as PostgreSQL's pg_strtok does: braces and
// parentheses are tokens, other tokens end at white space or one of them,
// and a backslash makes the next character part of the token.
func tokenize(s string) []string {
	var out []string
	var b strings.Builder
	flush := func() {
		if b.Len() > 0 {
			out = append(out, b.String())
			b.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case ' ', '\t', '\n', '\r':
			flush()
		case '(', ')', '{', '}':
			flush()
			out = append(out, string(c))
		case '\\':
			if i+1 < len(s) {
				i++
				b.WriteByte(s[i])
			}
		default:
			b.WriteByte(c)
		}
	}
	flush()
	return out
}
