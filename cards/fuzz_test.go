package cards

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

// Fuzz targets of the card rules. `go test` runs their seed corpora
// (testdata/fuzz and the f.Add seeds) as regression tests; scripts/fuzz
// fuzzes each for a few seconds in CI.

func FuzzSanitize(f *testing.F) {
	for _, s := range []string{"", "plain text", "a\u200bb\u202ec\u2066d", "tab\tand\nnewline\r\n", " \u00a0 lead and trail \u3000", "\xff\xfeinvalid", "e\u0301 combining", "\x00\x1f\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := Sanitize(s)
		if again := Sanitize(out); again != out {
			t.Fatalf("not idempotent: %q → %q → %q", s, out, again)
		}
		if !utf8.ValidString(out) {
			t.Fatalf("invalid UTF-8 out of %q: %q", s, out)
		}
		if strings.TrimSpace(out) != out || strings.Contains(out, "  ") {
			t.Fatalf("whitespace not collapsed: %q", out)
		}
		for _, r := range out {
			if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || (unicode.IsSpace(r) && r != ' ') {
				t.Fatalf("%q kept %U", out, r)
			}
		}
	})
}

func FuzzNormalize(f *testing.F) {
	f.Add([]byte(`{"tenant":"acme","server":"orders","name":"get_order","summary":"Show one order.","input_schema":{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}}`))
	f.Add([]byte(`{"tenant":"acme","server":"s","name":"cardex__x","summary":"x"}`))
	f.Add([]byte(`{"tenant":"acme","server":"s","name":"n","summary":"a\u200b\u202e b","aliases":["A","a"," "],"tags":["X","x"],"required_scopes":["b:r","a:r","a:r"]}`))
	f.Add([]byte(`{"tenant":"a","server":"s","name":"n","summary":"x","input_schema":{"a":1,"a":2}}`))
	f.Add([]byte(`{"tenant":"a","server":"s","name":"n","summary":"x","input_schema":true,"output_schema":{"$ref":"#/$defs/x"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c Card
		if json.Unmarshal(data, &c) != nil {
			return
		}
		err := Normalize(&c)
		if err != nil {
			var fe *FieldError
			if !errors.As(err, &fe) || !errors.Is(err, ErrInvalid) || fe.Field == "" || fe.Msg == "" {
				t.Fatalf("error %v is not a FieldError naming a field", err)
			}
			return
		}
		// A normalised card is valid and normalises to itself.
		again := c.Clone()
		if err := Normalize(&again); err != nil {
			t.Fatalf("a normalised card fails Normalize: %v\n%+v", err, c)
		}
		if !SameContent(&c, &again) || !bytes.Equal(c.InputSchema, again.InputSchema) || !bytes.Equal(c.OutputSchema, again.OutputSchema) {
			t.Fatalf("Normalize is not idempotent:\n%+v\n%+v", c, again)
		}
		for _, s := range append([]string{c.Summary, c.Description, c.WhenNotToUse}, append(c.Aliases, c.Tags...)...) {
			if Sanitize(s) != s {
				t.Fatalf("unsanitised text kept: %q", s)
			}
		}
		if !ValidName(c.Tenant) || !ValidName(c.Server) || !ValidName(c.Name) || len(c.InputSchema) > MaxSchemaBytes {
			t.Fatalf("a rule is not enforced: %+v", c)
		}
	})
}

func FuzzParseFile(f *testing.F) {
	f.Add(true, []byte("- tenant: acme\n  server: orders\n  name: get_order\n  summary: Show one order.\n  input_schema: {type: object}\n"))
	f.Add(true, []byte("tenant: acme\nserver: s\nname: n\nsummary: x\nunknown: 1\n"))
	f.Add(true, []byte("a: &a [*a, *a]\nb: &b [*a, *a]\n"))
	f.Add(false, []byte(`[{"tenant":"acme","server":"s","name":"n","summary":"x"}]`))
	f.Add(false, []byte(`{"tenant":"acme"} {"x":1}`))
	f.Fuzz(func(t *testing.T, yaml bool, data []byte) {
		name := "cards.json"
		if yaml {
			name = "cards.yaml"
		}
		start := time.Now()
		cs, err := ParseFile(name, data)
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("ParseFile of %d bytes took %v", len(data), d)
		}
		if err != nil {
			if !strings.HasPrefix(err.Error(), name) {
				t.Fatalf("error %q does not name the file", err)
			}
			return
		}
		for i := range cs {
			c := cs[i].Clone()
			_ = Normalize(&c) // must not panic
		}
	})
}

// FuzzSchema compiles a schema and validates a document against it: the
// work limits refuse what would be too dear, and what they accept stays
// within the bound that Validate enforces (counted with an extension that
// sees every evaluation) and within a time bound per input.
func FuzzSchema(f *testing.F) {
	for _, s := range [][2]string{
		{`{"type":"object","properties":{"order_id":{"type":"string","pattern":"^ORD-[0-9]+$"}},"required":["order_id"],"additionalProperties":false}`, `{"order_id":"ORD-1"}`},
		{refBomb(6), `{}`},
		{anyJSONValue, `[1,{"a":[null,true,"x"]}]`},
		{filterTree, `{"filter":{"or":[{"field":"a"},{"and":[{"not":{"field":"b"}}]}]}}`},
		{`{"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, `1`},
		{`{"prefixItems":[{"const":1}],"items":false,"contains":{"type":"integer"},"minContains":1,"uniqueItems":true}`, `[1,1]`},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","items":[{"type":"string"}],"additionalItems":{"$ref":"#"}}`, `["a",["b"]]`},
		{`{"$dynamicAnchor":"n","type":"object","properties":{"c":{"$dynamicRef":"#n"}}}`, `{"c":{"c":{}}}`},
		{`{"dependentSchemas":{"a":{"required":["b"]}},"patternProperties":{"^a":{"type":"number"},"a$":{"minimum":0}}}`, `{"a":1,"b":2}`},
		{`{"a":1,"a":2}`, `{}`},
	} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, schema, doc []byte) {
		if len(schema) > 4*MaxSchemaBytes || len(doc) > 1<<16 {
			return
		}
		start := time.Now()
		_, nerr := normalizeSchema("input_schema", schema)
		if nerr != nil && !errors.Is(nerr, ErrInvalid) {
			t.Fatalf("normalizeSchema: %v is not an invalid-argument error", nerr)
		}
		checkBound(t, schema, doc)
		if d := time.Since(start); d > 10*time.Second {
			t.Fatalf("compiling and validating took %v\nschema: %s\ndoc: %s", d, schema, doc)
		}
	})
}

// FuzzValidateArguments validates arbitrary arguments against schemas that
// real tools use (a flat object, a recursive JSON value, a filter tree,
// numeric bounds): Validate counts no more evaluations than the bound it
// enforces and takes bounded time, and what it accepts is one JSON value
// that encoding/json reads, with no repeated key and numbers within the
// number limits — the value validated is the value forwarded.
func FuzzValidateArguments(f *testing.F) {
	schemas := []string{
		`{"type":"object","properties":{"order_id":{"type":"string","pattern":"^ORD-[0-9]+$"},"limit":{"type":"integer","minimum":1,"maximum":100}},"required":["order_id"],"additionalProperties":false}`,
		anyJSONValue,
		filterTree,
		`{"type":"object","properties":{"n":{"type":"number","multipleOf":0.01,"exclusiveMaximum":1e300},"xs":{"type":"array","items":{"type":"integer"},"uniqueItems":true}}}`,
	}
	counters := make([]atomic.Int64, len(schemas))
	compiled := make([]*Schema, len(schemas))
	for i, src := range schemas {
		s, err := compileSchema([]byte(src), countingVocab(&counters[i]))
		if err != nil {
			f.Fatal(err)
		}
		compiled[i] = s
	}
	for _, a := range []string{`{"order_id":"ORD-1","limit":5}`, `{"order_id":1,"order_id":"ORD-1"}`, `{"n":1e999999}`, `{"n":1e-999999}`,
		`{"xs":[1,1.0,1e0]}`, `{"filter":{"or":[{"field":"a","eq":[1,{"b":null}]}]}}`, `{"n":` + strings.Repeat("9", 310) + `}`, ``, `[`, `{"n":0.30000000000000004}`} {
		for i := range schemas {
			f.Add(uint8(i), []byte(a))
		}
	}
	var mu sync.Mutex // the counters are per schema, shared by the fuzzing goroutine's calls
	f.Fuzz(func(t *testing.T, which uint8, args []byte) {
		if len(args) > 1<<16 {
			return
		}
		i := int(which) % len(schemas)
		mu.Lock()
		defer mu.Unlock()
		counters[i].Store(0)
		start := time.Now()
		err := compiled[i].Validate(args)
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("validating %d bytes took %v", len(args), d)
		}
		if sh, serr := ScanJSON(args, MaxArgumentsDepth); serr == nil {
			if bound := validationSteps(compiled[i].cost, sh.PerDepth); bound <= MaxValidationSteps && counters[i].Load() > bound {
				t.Fatalf("%d evaluations counted; the bound was %d\nargs: %s", counters[i].Load(), bound, args)
			}
		}
		if err != nil || len(bytes.TrimSpace(args)) == 0 {
			return
		}
		var v any
		if json.Unmarshal(args, &v) != nil {
			t.Fatalf("accepted what encoding/json refuses: %q", args)
		}
		if _, serr := ScanJSON(args, MaxArgumentsDepth); serr != nil {
			t.Fatalf("accepted what ScanJSON refuses (%v): %q", serr, args)
		}
	})
}

// FuzzScanJSON checks ScanJSON against an independent reading: the
// decoder's token stream counts every key, a decoded map keeps one per
// name, so the two differ exactly when some object repeats a key. What
// encoding/json refuses, ScanJSON refuses (a number beyond a float64, such
// as a 310-digit integer, is no value to either); what it accepts, ScanJSON
// accepts unless a number breaks the number limits.
func FuzzScanJSON(f *testing.F) {
	for _, s := range []string{`{"order_id":1,"order_id":"ORD-1"}`, `{"a":[{"b":1},{"b":2,"b":3}]}`, `[[[]]]`, `{"a~/":{"a~/":1}}`, `1 2`, `{"a":1}`, `"\u00e9"`, `{"":0,"":1}`,
		"1" + strings.Repeat("0", 309), `[1e-999999]`, `{"n":0.` + strings.Repeat("1", 120) + `}`, `-1.5E+308`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if json.Unmarshal(data, &v) != nil {
			if _, err := ScanJSON(data, 1<<10); err == nil {
				t.Fatalf("ScanJSON accepted what encoding/json refuses: %q", data)
			}
			return
		}
		keys, depth := tokenKeys(t, data)
		if depth > 1<<10 {
			return
		}
		sh, err := ScanJSON(data, 1<<10)
		var dup *DuplicateKeyError
		switch unique := mapKeys(v); {
		case keys != unique && !errors.As(err, &dup):
			t.Fatalf("%q repeats a key (%d keys, %d distinct) but ScanJSON said %v", data, keys, unique, err)
		case keys == unique && err != nil && !(errors.As(err, new(*LimitError)) && overNumberLimits(t, data)):
			t.Fatalf("%q: %v", data, err)
		case err == nil && sh.Depth != depth:
			t.Fatalf("%q: depth %d, want %d", data, sh.Depth, depth)
		}
	})
}

func tokenKeys(t *testing.T, data []byte) (keys, depth int) {
	dec := json.NewDecoder(bytes.NewReader(data))
	type frame struct{ object, key bool }
	var stack []frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return keys, depth
		}
		if err != nil {
			t.Fatalf("token stream of valid JSON: %v", err)
		}
		if n := len(stack); n > 0 && stack[n-1].object {
			if d, ok := tok.(json.Delim); !(ok && d == '}') && !stack[n-1].key {
				keys++
				stack[n-1].key = true
				continue
			}
			stack[n-1].key = false
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				stack = append(stack, frame{object: d == '{'})
				depth = max(depth, len(stack))
			default:
				stack = stack[:len(stack)-1]
			}
		}
	}
}

// overNumberLimits reports whether a valid document holds a number longer
// than MaxNumberLen or with an exponent beyond ±MaxNumberExponent.
func overNumberLimits(t *testing.T, data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return false
		}
		if err != nil {
			t.Fatalf("token stream of valid JSON: %v", err)
		}
		n, ok := tok.(json.Number)
		if !ok {
			continue
		}
		if len(n) > MaxNumberLen {
			return true
		}
		if _, exp, ok := strings.Cut(strings.ToLower(string(n)), "e"); ok {
			if x, err := strconv.Atoi(exp); err != nil || x > MaxNumberExponent || x < -MaxNumberExponent {
				return true
			}
		}
	}
}

func mapKeys(v any) int {
	switch x := v.(type) {
	case map[string]any:
		n := len(x)
		for _, y := range x {
			n += mapKeys(y)
		}
		return n
	case []any:
		n := 0
		for _, y := range x {
			n += mapKeys(y)
		}
		return n
	}
	return 0
}
