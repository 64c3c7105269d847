// Package pgjson is the one place that decides how a PostgreSQL value looks
// in JSON: the JSON Schema that `cardex import sql` writes into a view's row
// contract, and the JSON value the SQL gateway writes for each field of a
// result row, both follow from the column's Type here, so the rows a query
// returns match the contract its card advertises.
//
// Values are read in PostgreSQL's text format, with the session settings
// that Settings lists (UTC, ISO dates, ISO 8601 intervals, hex bytea).
package pgjson

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
)

// Kind is the JSON shape of a PostgreSQL type.
type Kind int

// Kinds.
const (
	String      Kind = iota // the value's text (text, varchar, uuid, enums, intervals, ...)
	Bool                    // true / false
	Integer                 // a JSON integer, exact (int2, int4, int8, oid)
	Number                  // a JSON number, exact; NaN, Infinity and -Infinity as strings
	JSON                    // json, jsonb: the document itself
	Bytea                   // base64 (standard alphabet, padded)
	Timestamptz             // RFC 3339 in UTC, e.g. 2025-03-01T12:00:00Z
	Timestamp               // the same layout without an offset (the value has no zone)
	Date                    // RFC 3339 full-date, 2025-03-01
	Array                   // a JSON array of Elem (nested for multi-dimensional values)
)

// Settings are the transaction-local settings values are read with: they
// fix the text formats the conversion expects, whatever the role's or the
// database's defaults.
const Settings = `SET LOCAL TimeZone = 'UTC'; SET LOCAL DateStyle = 'ISO, YMD'; ` +
	`SET LOCAL IntervalStyle = 'iso_8601'; SET LOCAL bytea_output = 'hex'; ` +
	`SET LOCAL extra_float_digits = 1; SET LOCAL standard_conforming_strings = on`

// Type is a column type as JSON sees it.
type Type struct {
	Kind Kind
	// Elem is the element type of an Array.
	Elem *Type
	// Delim separates array elements in the text form (',' but for box).
	Delim byte
	// Format is a JSON Schema format for strings (uuid, date, date-time).
	Format string
	// Enum lists an enum type's labels in their order.
	Enum []string
}

// Built-in type OIDs (fixed in every PostgreSQL).
const (
	oidBool        = 16
	oidBytea       = 17
	oidInt8        = 20
	oidInt2        = 21
	oidInt4        = 23
	oidOID         = 26
	oidJSON        = 114
	oidFloat4      = 700
	oidFloat8      = 701
	oidNumeric     = 1700
	oidDate        = 1082
	oidTimestamp   = 1114
	oidTimestamptz = 1184
	oidUUID        = 2950
	oidJSONB       = 3802
	oidInt2Vector  = 22
	oidOIDVector   = 30
)

func builtin(oid uint32) (Type, bool) {
	switch oid {
	case oidBool:
		return Type{Kind: Bool}, true
	case oidInt2, oidInt4, oidInt8, oidOID:
		return Type{Kind: Integer}, true
	case oidFloat4, oidFloat8, oidNumeric:
		return Type{Kind: Number}, true
	case oidJSON, oidJSONB:
		return Type{Kind: JSON}, true
	case oidBytea:
		return Type{Kind: Bytea}, true
	case oidTimestamptz:
		return Type{Kind: Timestamptz, Format: "date-time"}, true
	case oidTimestamp:
		return Type{Kind: Timestamp}, true
	case oidDate:
		return Type{Kind: Date, Format: "date"}, true
	case oidUUID:
		return Type{Kind: String, Format: "uuid"}, true
	case oidInt2Vector, oidOIDVector:
		return Type{Kind: String}, true // "1 2 3": not array text
	}
	return Type{}, false
}

// Querier runs a query (a *pgx.Conn or a pgx.Tx).
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// typeRow is what pg_type says about one type.
type typeRow struct {
	typtype  string // b base, d domain, e enum, c composite, r range, m multirange, p pseudo
	category string // A for arrays
	base     uint32 // a domain's base type
	elem     uint32 // an array's element type
	delim    string
	labels   []string
}

// maxDepth bounds domain and array chains.
const maxDepth = 16

// Load resolves the types of oids (and of the domains' base types and the
// arrays' element types they lead to) from pg_catalog, adding them to
// known. Types it cannot resolve become String.
func Load(ctx context.Context, q Querier, known map[uint32]Type, oids []uint32) error {
	rows := map[uint32]typeRow{}
	todo := oids
	for depth := 0; len(todo) > 0 && depth <= maxDepth; depth++ {
		var ask []int64
		for _, o := range todo {
			if _, ok := known[o]; ok {
				continue
			}
			if _, ok := rows[o]; ok {
				continue
			}
			if _, ok := builtin(o); ok {
				continue
			}
			ask = append(ask, int64(o))
		}
		todo = nil
		if len(ask) == 0 {
			break
		}
		r, err := q.Query(ctx, `SELECT t.oid::int8, t.typtype::text, t.typcategory::text, t.typbasetype::int8, t.typelem::int8, t.typdelim::text,
			COALESCE((SELECT array_agg(e.enumlabel::text ORDER BY e.enumsortorder) FROM pg_catalog.pg_enum e WHERE e.enumtypid = t.oid), '{}')
			FROM pg_catalog.pg_type t WHERE t.oid = ANY($1::int8[]::oid[])`, ask)
		if err != nil {
			return fmt.Errorf("read pg_type: %w", err)
		}
		for r.Next() {
			var oid, base, elem int64
			var tr typeRow
			if err := r.Scan(&oid, &tr.typtype, &tr.category, &base, &elem, &tr.delim, &tr.labels); err != nil {
				r.Close()
				return fmt.Errorf("read pg_type: %w", err)
			}
			tr.base, tr.elem = uint32(base), uint32(elem)
			rows[uint32(oid)] = tr
			if tr.typtype == "d" && tr.base != 0 {
				todo = append(todo, tr.base)
			}
			if tr.category == "A" && tr.elem != 0 {
				todo = append(todo, tr.elem)
			}
		}
		r.Close()
		if err := r.Err(); err != nil {
			return fmt.Errorf("read pg_type: %w", err)
		}
	}
	for _, o := range oids {
		known[o] = resolve(o, rows, known, 0)
	}
	return nil
}

func resolve(oid uint32, rows map[uint32]typeRow, known map[uint32]Type, depth int) Type {
	if t, ok := builtin(oid); ok {
		return t
	}
	if t, ok := known[oid]; ok {
		return t
	}
	tr, ok := rows[oid]
	if !ok || depth > maxDepth {
		return Type{Kind: String}
	}
	switch {
	case tr.typtype == "d":
		return resolve(tr.base, rows, known, depth+1)
	case tr.typtype == "e":
		return Type{Kind: String, Enum: tr.labels}
	case tr.category == "A" && tr.elem != 0 && tr.typtype == "b":
		el := resolve(tr.elem, rows, known, depth+1)
		d := byte(',')
		if er, ok := rows[tr.elem]; ok && len(er.delim) == 1 {
			d = er.delim[0]
		} else if tr.elem == 603 { // box
			d = ';'
		}
		return Type{Kind: Array, Elem: &el, Delim: d}
	}
	return Type{Kind: String}
}

// Schema is the JSON Schema of a value of the type (null allowed when
// nullable).
func (t Type) Schema(nullable bool) map[string]any {
	s := map[string]any{}
	var typ string
	switch t.Kind {
	case JSON:
		return s // any JSON value, null included
	case Bool:
		typ = "boolean"
	case Integer:
		typ = "integer"
	case Number:
		// NaN, Infinity and -Infinity have no JSON number.
		s["type"] = []any{"number", "string"}
		if nullable {
			s["type"] = []any{"number", "string", "null"}
		}
		return s
	case Array:
		typ = "array"
		el := Type{Kind: String}
		if t.Elem != nil {
			el = *t.Elem
		}
		s["items"] = el.Schema(true) // arrays may hold NULLs
	case Bytea:
		typ = "string"
		s["contentEncoding"] = "base64"
	default:
		typ = "string"
		if t.Format != "" {
			s["format"] = t.Format
		}
		if len(t.Enum) > 0 {
			e := make([]any, 0, len(t.Enum)+1)
			for _, l := range t.Enum {
				e = append(e, l)
			}
			if nullable {
				e = append(e, nil)
			}
			s["enum"] = e
		}
	}
	if nullable {
		s["type"] = []any{typ, "null"}
	} else {
		s["type"] = typ
	}
	return s
}

// AppendValue appends the JSON form of a value in PostgreSQL's text format;
// raw nil is SQL NULL.
func (t Type) AppendValue(buf, raw []byte) []byte {
	if raw == nil {
		return append(buf, "null"...)
	}
	switch t.Kind {
	case Bool:
		switch string(raw) {
		case "t":
			return append(buf, "true"...)
		case "f":
			return append(buf, "false"...)
		}
	case Integer, Number:
		if isJSONNumber(raw) {
			return append(buf, raw...)
		}
	case JSON:
		var b bytes.Buffer
		if json.Compact(&b, raw) == nil {
			return append(buf, b.Bytes()...)
		}
	case Bytea:
		if bytes.HasPrefix(raw, []byte(`\x`)) {
			dst := make([]byte, hex.DecodedLen(len(raw)-2))
			if _, err := hex.Decode(dst, raw[2:]); err == nil {
				buf = append(buf, '"')
				buf = base64.StdEncoding.AppendEncode(buf, dst)
				return append(buf, '"')
			}
		}
	case Timestamptz:
		if ts, err := time.Parse("2006-01-02 15:04:05.999999999Z07:00", string(raw)); err == nil {
			return AppendString(buf, ts.UTC().Format(time.RFC3339Nano))
		}
		if ts, err := time.Parse("2006-01-02 15:04:05.999999999Z07", string(raw)); err == nil {
			return AppendString(buf, ts.UTC().Format(time.RFC3339Nano))
		}
	case Timestamp:
		if ts, err := time.Parse("2006-01-02 15:04:05.999999999", string(raw)); err == nil {
			return AppendString(buf, ts.Format("2006-01-02T15:04:05.999999999"))
		}
	case Array:
		if v, ok := parseArray(raw, t.Delim); ok {
			el := Type{Kind: String}
			if t.Elem != nil {
				el = *t.Elem
			}
			return appendArray(buf, v, el)
		}
	}
	// Everything else, and values outside the forms above (infinity, BC
	// dates, years after 9999), as PostgreSQL writes them.
	return AppendString(buf, string(raw))
}

func isJSONNumber(b []byte) bool {
	// PostgreSQL writes integers and decimals in the JSON number grammar
	// (no '+', no leading zeros); NaN and Infinity are not JSON numbers.
	return len(b) > 0 && (b[0] == '-' || (b[0] >= '0' && b[0] <= '9')) && json.Valid(b)
}

// AppendString appends s as a JSON string (invalid UTF-8 becomes U+FFFD).
func AppendString(buf []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	buf = append(buf, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				buf = append(buf, '\\', c)
			case c == '\n':
				buf = append(buf, '\\', 'n')
			case c == '\r':
				buf = append(buf, '\\', 'r')
			case c == '\t':
				buf = append(buf, '\\', 't')
			case c < 0x20 || c == 0x7f:
				buf = append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			default:
				buf = append(buf, c)
			}
			i++
			continue
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			buf = append(buf, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			buf = append(buf, fmt.Sprintf(`\u%04x`, r)...)
		default:
			buf = append(buf, s[i:i+n]...)
		}
		i += n
	}
	return append(buf, '"')
}

// arrayValue is a parsed array: elements are []byte (nil for NULL) or
// nested []arrayValue.
type arrayValue []any

func appendArray(buf []byte, a arrayValue, el Type) []byte {
	buf = append(buf, '[')
	for i, v := range a {
		if i > 0 {
			buf = append(buf, ',')
		}
		switch x := v.(type) {
		case arrayValue:
			buf = appendArray(buf, x, el)
		case []byte:
			buf = el.AppendValue(buf, x)
		default:
			buf = append(buf, "null"...)
		}
	}
	return append(buf, ']')
}

// parseArray reads PostgreSQL's array text: an optional dimension
// decoration ("[1:3]="), then nested braces of elements separated by delim;
// an element is double-quoted (backslash escapes) or bare (NULL is SQL
// NULL).
func parseArray(raw []byte, delim byte) (arrayValue, bool) {
	s := raw
	if len(s) > 0 && s[0] == '[' {
		i := bytes.IndexByte(s, '=')
		if i < 0 {
			return nil, false
		}
		s = s[i+1:]
	}
	p := &arrayParser{s: s, delim: delim}
	v, ok := p.array(0)
	p.space()
	if !ok || p.i != len(p.s) {
		return nil, false
	}
	return v, true
}

type arrayParser struct {
	s     []byte
	i     int
	delim byte
}

func (p *arrayParser) space() {
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t' || p.s[p.i] == '\n' || p.s[p.i] == '\r') {
		p.i++
	}
}

func (p *arrayParser) array(depth int) (arrayValue, bool) {
	p.space()
	if depth > 6 || p.i >= len(p.s) || p.s[p.i] != '{' {
		return nil, false
	}
	p.i++
	out := arrayValue{}
	p.space()
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return out, true
	}
	for {
		p.space()
		if p.i >= len(p.s) {
			return nil, false
		}
		switch p.s[p.i] {
		case '{':
			sub, ok := p.array(depth + 1)
			if !ok {
				return nil, false
			}
			out = append(out, sub)
		case '"':
			p.i++
			var b []byte
			for {
				if p.i >= len(p.s) {
					return nil, false
				}
				c := p.s[p.i]
				if c == '\\' && p.i+1 < len(p.s) {
					b = append(b, p.s[p.i+1])
					p.i += 2
					continue
				}
				p.i++
				if c == '"' {
					break
				}
				b = append(b, c)
			}
			if b == nil {
				b = []byte{}
			}
			out = append(out, b)
		default:
			start := p.i
			var b []byte
			for p.i < len(p.s) && p.s[p.i] != p.delim && p.s[p.i] != '}' {
				if p.s[p.i] == '\\' && p.i+1 < len(p.s) {
					p.i++
				}
				b = append(b, p.s[p.i])
				p.i++
			}
			b = bytes.TrimRight(b, " \t\r\n")
			if p.i == start {
				return nil, false
			}
			if bytes.EqualFold(b, []byte("NULL")) {
				out = append(out, nil)
			} else {
				out = append(out, b)
			}
		}
		p.space()
		if p.i >= len(p.s) {
			return nil, false
		}
		switch p.s[p.i] {
		case p.delim:
			p.i++
		case '}':
			p.i++
			return out, true
		default:
			return nil, false
		}
	}
}
