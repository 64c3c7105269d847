package cards

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// nested wraps {} in depth levels of one keyword: {"not":{"not":{}}}.
func nested(keyword string, depth int) string {
	open, shut := `{"`+keyword+`":`, `}`
	switch keyword {
	case "properties":
		open, shut = `{"type":"object","properties":{"a":`, `}}`
	case "allOf":
		open, shut = `{"allOf":[`, `]}`
	}
	return strings.Repeat(open, depth) + `{}` + strings.Repeat(shut, depth)
}

// refBomb is n definitions, each referring twice to the next: validating
// one value evaluates 2^n subschemas.
func refBomb(n int) string {
	var defs []string
	for i := range n {
		defs = append(defs, fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1))
	}
	defs = append(defs, fmt.Sprintf(`"d%d":{"type":"object"}`, n))
	return `{"$defs":{` + strings.Join(defs, ",") + `},"$ref":"#/$defs/d0"}`
}

// Recursive schemas that real tools use: their cost grows with the depth
// of the arguments, not exponentially.
const (
	anyJSONValue = `{"$defs":{"v":{"anyOf":[{"type":["string","number","boolean","null"]},` +
		`{"type":"array","items":{"$ref":"#/$defs/v"}},{"type":"object","additionalProperties":{"$ref":"#/$defs/v"}}]}},"$ref":"#/$defs/v"}`
	filterTree = `{"$defs":{"f":{"type":"object","properties":{"field":{"type":"string"},"eq":{},` +
		`"and":{"type":"array","items":{"$ref":"#/$defs/f"}},"or":{"type":"array","items":{"$ref":"#/$defs/f"}},"not":{"$ref":"#/$defs/f"}}}},` +
		`"type":"object","properties":{"filter":{"$ref":"#/$defs/f"}},"required":["filter"]}`
)

func TestSchemaLimits(t *testing.T) {
	flat := `{"allOf":[` + strings.TrimSuffix(strings.Repeat(`{},`, MaxSchemaObjects), ",") + `]}`
	for _, tc := range []struct {
		name, schema string
		want         string // "" accepts
	}{
		// The review's findings: thousands of nested not / items.
		{"6000 nested not", nested("not", 6000), "nests more than 64 levels deep; the limit is 64"},
		{"5000 nested items", nested("items", 5000), "nests more than 64 levels deep; the limit is 64"},
		{"65 levels", nested("not", 65), "nests more than 64 levels deep"},
		{"64 levels", nested("not", 63), ""},
		{"nested properties at the limit", nested("properties", 31), ""},
		{"too many objects", flat, fmt.Sprintf("has %d objects; the limit is %d", MaxSchemaObjects+1, MaxSchemaObjects)},
		{"ref fan-out", refBomb(20), "more than 100000 subschema evaluations"},
		{"small ref fan-out", refBomb(8), ""},
		{"ref to itself in place", `{"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"}`, "infinite loop"},
		{"anyOf back to itself", `{"$defs":{"a":{"anyOf":[{"type":"string"},{"$ref":"#/$defs/a"}]}},"$ref":"#/$defs/a"}`, "infinite loop"},
		{"recursion through a child", `{"properties":{"next":{"$ref":"#"}}}`, ""},
		{"any JSON value", anyJSONValue, ""},
		{"filter tree", filterTree, ""},
		{"duplicate key", `{"type":"object","properties":{"a":{"type":"string","type":"number"}}}`, `at '/properties/a/type': duplicate key "type"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := normalizeSchema("input_schema", []byte(tc.schema))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted; want an error containing %q", tc.want)
			}
			if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), "input_schema: ") || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q: want an invalid input_schema containing %q", err, tc.want)
			}
		})
	}
}

func TestValidateLimits(t *testing.T) {
	wide := `{"type":"array","items":{"anyOf":[` + strings.TrimSuffix(strings.Repeat(`{"const":1},`, 1000), ",") + `]}}`
	for _, tc := range []struct {
		name, schema, args string
		want               string // "" accepts
	}{
		{"duplicate key", `{"type":"object","properties":{"order_id":{"type":"string"}}}`, `{"order_id":1,"order_id":"ORD-1"}`, `at '/order_id': duplicate key "order_id"`},
		{"nested duplicate", `{}`, `{"a":[{"b":1},{"b":1,"b":2}]}`, `at '/a/1/b': duplicate key "b"`},
		{"deep arguments", `{}`, strings.Repeat(`[`, 65) + strings.Repeat(`]`, 65), "nests more than 64 levels deep"},
		{"arguments at the depth limit", `{}`, strings.Repeat(`[`, 64) + strings.Repeat(`]`, 64), ""},
		{"too much work", wide, `[` + strings.TrimSuffix(strings.Repeat(`1,`, 1000), ",") + `]`, "validating them could take 1002001 subschema evaluations; the limit is 1000000"},
		{"work under the limit", wide, `[` + strings.TrimSuffix(strings.Repeat(`1,`, 990), ",") + `]`, ""},
		{"deep value of a recursive schema", anyJSONValue, strings.Repeat(`{"a":`, 60) + `1` + strings.Repeat(`}`, 60), ""},
		// Numbers whose exact value is dear to compute (the validator reads
		// them as big rationals: 1e999999 is a million-digit integer) are
		// refused before validation, by named limits.
		{"huge exponent", `{"type":"array","items":{"type":"integer"}}`, `[1,1e999999]`, "at '/1': the number's exponent is 999999; the limit is ±400"},
		{"huge negative exponent", `{"type":"array","items":{"type":"number"}}`, `[1E-999999]`, "at '/0': the number's exponent is -999999; the limit is ±400"},
		{"long number", `{}`, `{"n":0.` + strings.Repeat("1", 200) + `}`, "at '/n': a number of 202 characters; the limit is 100"},
		{"beyond float64", `{}`, `{"n":1e400}`, "at '/n': number 1e400 is out of the range of a float64"},
		{"numbers within the limits", `{"type":"array","items":{"type":"number"}}`, `[1e308,-1e-400,0.` + strings.Repeat("5", 90) + `,12345678901234567890]`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := CompileSchema([]byte(tc.schema))
			if err != nil {
				t.Fatal(err)
			}
			err = s.Validate([]byte(tc.args))
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v; want one containing %q", err, tc.want)
			}
		})
	}
}

// countingVocab counts subschema evaluations: its extension is compiled
// into every schema object, and the validator calls it once per
// evaluation that gets that far (not after a failed type check, nor for
// boolean schemas), so the count is at most the true number.
func countingVocab(n *atomic.Int64) *jsonschema.Vocabulary {
	return &jsonschema.Vocabulary{
		URL: "urn:cardex:test:count",
		Compile: func(*jsonschema.CompilerContext, map[string]any) (jsonschema.SchemaExt, error) {
			return counter{n}, nil
		},
	}
}

type counter struct{ n *atomic.Int64 }

func (c counter) Validate(*jsonschema.ValidatorContext, any) { c.n.Add(1) }

// checkBound validates args against schema with evaluations counted and
// fails when the count exceeds the bound Validate enforces.
func checkBound(t *testing.T, schema, args []byte) int64 {
	t.Helper()
	var n atomic.Int64
	s, err := compileSchema(schema, countingVocab(&n))
	if err != nil {
		return 0
	}
	sh, err := ScanJSON(args, MaxArgumentsDepth)
	if err != nil {
		return 0
	}
	bound := validationSteps(s.cost, sh.PerDepth)
	if bound > MaxValidationSteps {
		return 0
	}
	_ = s.Validate(args)
	if got := n.Load(); got > bound {
		t.Fatalf("%d evaluations counted; the bound was %d\nschema: %s\nargs: %s", got, bound, schema, args)
	}
	return n.Load()
}

func TestValidationBound(t *testing.T) {
	for _, tc := range []struct{ schema, args string }{
		{refBomb(8), `{}`},
		{anyJSONValue, `{"a":[1,{"b":[2,3,{"c":null}]}],"d":"x"}`},
		{filterTree, `{"filter":{"and":[{"field":"a","eq":1},{"or":[{"field":"b"},{"not":{"field":"c"}}]}]}}`},
		{`{"type":"object","properties":{"a":{"allOf":[{"minimum":1},{"maximum":5}]}},"patternProperties":{"^a":{"type":"integer"}}}`, `{"a":3,"ab":4}`},
		{`{"prefixItems":[{"type":"string"},{"anyOf":[{"type":"integer"},{"type":"null"}]}],"items":{"not":{"type":"object"}},"contains":{"const":1}}`, `["x",1,2,3]`},
		{`{"$schema":"http://json-schema.org/draft-07/schema#","definitions":{"n":{"properties":{"k":{"$ref":"#/definitions/n"}},"dependencies":{"k":{"required":["v"]}}}},"$ref":"#/definitions/n"}`, `{"k":{"k":{"v":1},"v":2}}`},
	} {
		if n := checkBound(t, []byte(tc.schema), []byte(tc.args)); n == 0 {
			t.Errorf("no evaluation counted for %s", tc.schema)
		}
	}
	// The counter sees the fan-out: 2^8 leaves at least.
	if n := checkBound(t, []byte(refBomb(8)), []byte(`{}`)); n < 1<<8 {
		t.Errorf("refBomb(8): %d evaluations counted, want at least %d", n, 1<<8)
	}
}

// TestNormalizeBatchStopsWhenCancelled: a batch whose caller went away is
// not compiled to the end.
func TestNormalizeBatchStopsWhenCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	cs := []Card{{Tenant: "a", Server: "s", Name: "n", Summary: "x", InputSchema: []byte(nested("not", 60))}}
	if _, err := NormalizeBatch(ctx, cs); !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled batch: %v, want context.Canceled", err)
	}
	if _, err := NormalizeBatch(context.Background(), cs); err != nil {
		t.Fatal(err)
	}
}
