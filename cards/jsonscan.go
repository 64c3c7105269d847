package cards

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Shape is what ScanJSON learns about a JSON document.
type Shape struct {
	// Values counts every value: objects, arrays and scalars.
	Values int
	// Objects counts the objects.
	Objects int
	// Depth is the deepest nesting of objects and arrays (a scalar alone
	// is depth 0, {"a":1} depth 1).
	Depth int
	// PerDepth counts the values at each depth: the root is at depth 0,
	// its members and items at depth 1, and so on.
	PerDepth []int
}

// DuplicateKeyError is an object holding the same key twice. Parsers
// disagree about such objects (most keep the last value, some the first),
// so cardex refuses them rather than validate one reading and forward the
// other.
type DuplicateKeyError struct {
	Path string // JSON pointer of the object, "" for the root
	Key  string
}

func (e *DuplicateKeyError) Error() string {
	return fmt.Sprintf("at '%s': duplicate key %q", e.Path+"/"+pointerToken(e.Key), e.Key)
}

// ScanJSON reads one JSON document and returns its shape. It refuses
// invalid JSON, trailing data, an object with a duplicate key
// (*DuplicateKeyError, naming the path), nesting deeper than maxDepth and
// numbers over the number limits (*LimitError, naming the path).
func ScanJSON(raw []byte, maxDepth int) (Shape, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var sh Shape
	type frame struct {
		object bool
		keys   map[string]bool
		index  int    // next array index
		key    string // last key read, for the path
		expect bool   // object: the next token is a key
	}
	var stack []frame
	// pointer is the JSON pointer of the value the frames lead to: path()
	// that of the innermost open container, valuePath() that of the value
	// just read.
	pointer := func(frames []frame) string {
		var b strings.Builder
		for _, f := range frames {
			b.WriteByte('/')
			if f.object {
				b.WriteString(pointerToken(f.key))
			} else {
				b.WriteString(strconv.Itoa(f.index - 1))
			}
		}
		return b.String()
	}
	path := func() string { return pointer(stack[:len(stack)-1]) }
	valuePath := func() string { return pointer(stack) }
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			switch {
			case sh.Values == 0:
				return sh, errors.New("empty document")
			case len(stack) > 0:
				return sh, io.ErrUnexpectedEOF
			}
			return sh, nil
		}
		if err != nil {
			return sh, err
		}
		if len(stack) == 0 && sh.Values > 0 {
			return sh, errors.New("unexpected data after the JSON value")
		}
		if n := len(stack); n > 0 {
			top := &stack[n-1]
			if top.object && top.expect {
				if d, ok := tok.(json.Delim); ok && d == '}' {
					stack = stack[:n-1]
					continue
				}
				k := tok.(string) // the decoder guarantees a key here
				if top.keys[k] {
					return sh, &DuplicateKeyError{Path: path(), Key: k}
				}
				top.keys[k] = true
				top.key, top.expect = k, false
				continue
			}
			if d, ok := tok.(json.Delim); ok && d == ']' {
				stack = stack[:n-1]
				continue
			}
			if top.object {
				top.expect = true
			} else {
				top.index++
			}
		}
		sh.Values++
		if n, ok := tok.(json.Number); ok {
			if err := checkNumber(string(n)); err != nil {
				return sh, &LimitError{fmt.Sprintf("at '%s': %s", valuePath(), err.Msg)}
			}
		}
		if len(sh.PerDepth) <= len(stack) {
			sh.PerDepth = append(sh.PerDepth, 0)
		}
		sh.PerDepth[len(stack)]++
		if d, ok := tok.(json.Delim); ok {
			if d == '{' {
				sh.Objects++
			}
			f := frame{object: d == '{', expect: d == '{'}
			if f.object {
				f.keys = map[string]bool{}
			}
			stack = append(stack, f)
			if len(stack) > sh.Depth {
				sh.Depth = len(stack)
			}
			if sh.Depth > maxDepth {
				return sh, &LimitError{fmt.Sprintf("nests more than %d levels deep; the limit is %d", maxDepth, maxDepth)}
			}
		}
	}
}

// Number limits. A JSON number is read as a float64 by most parsers
// (encoding/json among them), and exactly, as a big rational, by the schema
// validator: 1e999999 is a million-digit integer to it, and a few thousand
// such numbers cost seconds of CPU. So a number must be a float64 (what
// encoding/json refuses, ScanJSON refuses), at most MaxNumberLen
// characters long, with an exponent of at most ±MaxNumberExponent (1e-999999
// is a float64, 0, but still a million-digit denominator).
const (
	MaxNumberLen      = 100
	MaxNumberExponent = 400
)

// checkNumber applies the number limits to a JSON number's text.
func checkNumber(n string) *LimitError {
	if len(n) > MaxNumberLen {
		return &LimitError{fmt.Sprintf("a number of %d characters; the limit is %d", len(n), MaxNumberLen)}
	}
	if i := strings.IndexAny(n, "eE"); i >= 0 {
		e := strings.TrimPrefix(n[i+1:], "+")
		if x, err := strconv.Atoi(e); err != nil || x > MaxNumberExponent || x < -MaxNumberExponent {
			return &LimitError{fmt.Sprintf("the number's exponent is %s; the limit is ±%d", e, MaxNumberExponent)}
		}
	}
	if _, err := strconv.ParseFloat(n, 64); err != nil {
		return &LimitError{fmt.Sprintf("number %s is out of the range of a float64 (±1.8e308)", n)}
	}
	return nil
}

func pointerToken(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// LimitError is a document over one of the named limits.
type LimitError struct{ Msg string }

func (e *LimitError) Error() string { return e.Msg }
