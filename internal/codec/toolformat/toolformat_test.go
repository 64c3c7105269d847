package toolformat

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
)

var (
	strictSchema = `{"additionalProperties":false,"properties":{"path":{"description":"file","type":"string"}},"required":["path"],"type":"object"}`
	looseSchema  = `{"properties":{"path":{"type":"string"},"n":{"type":"integer"}},"required":["path"],"type":"object"}`
)

func card(server, name, schema string) cards.Card {
	return cards.Card{Server: server, Name: name, Summary: "Read a file.", WhenNotToUse: "writing", InputSchema: json.RawMessage(schema)}
}

func decode(t *testing.T, b []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	return v
}

func TestDefinitionAndAnswer(t *testing.T) {
	cs := []cards.Card{card("files", "read_file", strictSchema), card("github", "repo.list", "")}
	for _, tc := range []struct {
		f        Format
		def0     string // the first tool's definition
		answerOf func(defs []any) any
	}{
		{AnthropicToolReference,
			`{"name":"files__read_file","description":"Read a file.\n\nNot for: writing","input_schema":` + strictSchema + `,"defer_loading":true}`,
			func([]any) any {
				return decode(t, []byte(`{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"tool_reference","tool_name":"files__read_file"},{"type":"tool_reference","tool_name":"`+providerOf(cs[1])+`"}]}`))
			}},
		{AnthropicTools,
			`{"name":"files__read_file","description":"Read a file.\n\nNot for: writing","input_schema":` + strictSchema + `}`,
			func(defs []any) any { return defs }},
		{OpenAIToolSearch,
			`{"type":"function","name":"files__read_file","description":"Read a file.\n\nNot for: writing","parameters":` + strictSchema + `,"strict":true,"defer_loading":true}`,
			func(defs []any) any {
				return map[string]any{"type": "tool_search_output", "call_id": "toolu_1", "execution": "client", "status": "completed", "tools": defs}
			}},
		{OpenAIFunctions,
			`{"type":"function","name":"files__read_file","description":"Read a file.\n\nNot for: writing","parameters":` + strictSchema + `,"strict":true}`,
			func(defs []any) any { return defs }},
	} {
		var raws []json.RawMessage
		var defs []any
		for i := range cs {
			raws = append(raws, Definition(tc.f, &cs[i]))
			defs = append(defs, decode(t, raws[i]))
		}
		if got, want := defs[0], decode(t, []byte(tc.def0)); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: definition %s; want %s", tc.f, raws[0], tc.def0)
		}
		// A tool without a schema gets an empty object schema, never strict.
		d1 := defs[1].(map[string]any)
		schemaKey := "input_schema"
		if strings.HasPrefix(string(tc.f), "openai") {
			schemaKey = "parameters"
			if d1["strict"] != false {
				t.Errorf("%s: strict %v for a schema-less tool", tc.f, d1["strict"])
			}
		}
		if !reflect.DeepEqual(d1[schemaKey], map[string]any{"type": "object"}) || d1["name"] != providerOf(cs[1]) {
			t.Errorf("%s: second definition %s", tc.f, raws[1])
		}
		callID := ""
		if tc.f.Search() {
			callID = "toolu_1"
		}
		ans := Answer(tc.f, cs, raws, callID)
		if got, want := decode(t, ans), tc.answerOf(defs); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: answer %s; want %v", tc.f, ans, want)
		}
	}
	if Definition(None, &cs[0]) != nil || Answer(None, cs, nil, "") != nil {
		t.Error("format None shaped something")
	}
	// An empty shortlist is an empty list, not null.
	if got := string(Answer(OpenAIFunctions, nil, nil, "")); got != "[]" {
		t.Errorf("empty answer %s; want []", got)
	}
}

func providerOf(c cards.Card) string {
	var d struct{ Name string }
	_ = json.Unmarshal(Definition(AnthropicTools, &c), &d)
	return d.Name
}

func TestStrict(t *testing.T) {
	for _, tc := range []struct {
		schema string
		want   bool
	}{
		{strictSchema, true},
		{looseSchema, false}, // optional n
		{`{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}`, false}, // additionalProperties not false
		{`{"type":"object","additionalProperties":false,"properties":{},"required":[]}`, true},
		{`{"type":"object","additionalProperties":false}`, true},
		{`{"type":"object","additionalProperties":false,"properties":{"a":{"type":"string","minLength":1}},"required":["a"]}`, false}, // unsupported keyword
		{`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","additionalProperties":false}`, false},
		{`{"type":"object","additionalProperties":false,"properties":{"o":{"type":"object","properties":{"x":{"type":"number"}},"required":["x"]}},"required":["o"]}`, false}, // nested object open
		{`{"type":"object","additionalProperties":false,"properties":{"o":{"type":["object","null"],"additionalProperties":false,"properties":{"x":{"type":"number"}},"required":["x"]}},"required":["o"]}`, true},
		{`{"type":"object","additionalProperties":false,"properties":{"l":{"type":"array","items":{"anyOf":[{"type":"string"},{"$ref":"#/$defs/n"}]}}},"required":["l"],"$defs":{"n":{"type":"number"}}}`, true},
		{`{"type":"string"}`, false},
		{`true`, false},
		{``, false},
	} {
		if got := Strict(json.RawMessage(tc.schema)); got != tc.want {
			t.Errorf("Strict(%s) = %v; want %v", tc.schema, got, tc.want)
		}
	}
}

func TestParseAndCallID(t *testing.T) {
	for _, f := range Formats {
		if got, err := Parse("format", string(f)); err != nil || got != f {
			t.Errorf("Parse(%q) = %q, %v", f, got, err)
		}
	}
	if _, err := Parse("format", "claude"); !errors.Is(err, cards.ErrInvalid) || !strings.Contains(err.Error(), "format") {
		t.Errorf("Parse(claude) = %v; want InvalidArgument naming the field", err)
	}
	for _, tc := range []struct {
		f    Format
		id   string
		want string // "" : accepted
	}{
		{AnthropicToolReference, "toolu_01A", ""},
		{OpenAIToolSearch, "call_abc", ""},
		{AnthropicToolReference, "", "is required"},
		{OpenAIToolSearch, strings.Repeat("x", MaxCallIDLen+1), "the limit is 256"},
		{OpenAIToolSearch, "a b", "must match"},
		{AnthropicTools, "toolu_1", "is only used with"},
		{None, "toolu_1", "is only used with"},
		{OpenAIFunctions, "", ""},
	} {
		err := CheckCallID(tc.f, "call_id", tc.id)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "call_id")) {
			t.Errorf("CheckCallID(%s, %q) = %v; want %q", tc.f, tc.id, err, tc.want)
		}
	}
}

// TestShapeAndParseRequest: Shape is each tool's Definition and their
// Answer, nothing for None; ParseRequest is Parse then CheckCallID.
func TestShapeAndParseRequest(t *testing.T) {
	cs := []cards.Card{
		{Server: "orders", Name: "track_shipment", Summary: "Track a parcel", InputSchema: json.RawMessage(`{"type":"object"}`)},
		{Server: "support", Name: "search", Summary: "Search tickets", InputSchema: json.RawMessage(`{"type":"object"}`)},
	}
	if defs, ans := Shape(None, cs, ""); defs != nil || ans != nil {
		t.Errorf("None: %s %s", defs, ans)
	}
	for _, f := range Formats {
		defs, ans := Shape(f, cs, "call_1")
		if len(defs) != 2 || string(defs[1]) != string(Definition(f, &cs[1])) || string(ans) != string(Answer(f, cs, defs, "call_1")) {
			t.Errorf("%s: %s %s", f, defs, ans)
		}
		if defs, ans := Shape(f, nil, "call_1"); defs == nil || string(ans) == "" {
			t.Errorf("%s of nothing: %v %s; want an empty list and an answer", f, defs, ans)
		}
	}
	for _, tc := range []struct {
		format, callID string
		want           Format
		err            string
	}{
		{"", "", None, ""},
		{"openai_functions", "", OpenAIFunctions, ""},
		{"openai_tool_search", "call_1", OpenAIToolSearch, ""},
		{"gemini", "", None, "format: "},
		{"anthropic_tool_reference", "", None, "call_id: is required"},
		{"", "call_1", None, "call_id: is only used"},
	} {
		f, err := ParseRequest(tc.format, tc.callID)
		if tc.err == "" && (err != nil || f != tc.want) || tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("ParseRequest(%q, %q) = %q, %v; want %q, %q", tc.format, tc.callID, f, err, tc.want, tc.err)
		}
	}
}
