package cards

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// valid returns a minimal valid card.
func valid() Card {
	return Card{Tenant: "acme", Server: "billing", Name: "refund", Summary: "Refund a payment"}
}

// schemaOfSize returns a schema object of exactly n bytes in canonical form.
func schemaOfSize(t *testing.T, n int) json.RawMessage {
	t.Helper()
	const frame = `{"description":""}`
	s := json.RawMessage(`{"description":"` + strings.Repeat("x", n-len(frame)) + `"}`)
	if len(s) != n {
		t.Fatalf("schemaOfSize: %d bytes, want %d", len(s), n)
	}
	return s
}

func TestNormalizeRejects(t *testing.T) {
	compileErr := func() string {
		_, err := CompileSchema([]byte(`{"type":12}`))
		if err == nil {
			t.Fatal("CompileSchema accepted type 12")
		}
		return err.Error()
	}()
	tests := []struct {
		name  string
		edit  func(c *Card)
		field string
		msg   []string // fragments the message must contain
	}{
		{"no tenant", func(c *Card) { c.Tenant = "  " }, "tenant", []string{"required"}},
		{"tenant with space", func(c *Card) { c.Tenant = "ac me" }, "tenant", []string{"[A-Za-z0-9_.-]{1,128}"}},
		{"tenant too long", func(c *Card) { c.Tenant = strings.Repeat("t", 129) }, "tenant", []string{"128"}},
		{"no server", func(c *Card) { c.Server = "" }, "server", []string{"required"}},
		{"server with slash", func(c *Card) { c.Server = "billing/v2" }, "server", []string{"[A-Za-z0-9_.-]{1,128}"}},
		{"server with NUL", func(c *Card) { c.Server = "bill\x00ing" }, "server", []string{"must match"}},
		{"no name", func(c *Card) { c.Name = "" }, "name", []string{"required"}},
		{"name with space", func(c *Card) { c.Name = "refund payment" }, "name", []string{"must match"}},
		{"name non-ASCII", func(c *Card) { c.Name = "réfund" }, "name", []string{"must match"}},
		{"name with colon", func(c *Card) { c.Name = "billing:refund" }, "name", []string{"must match"}},
		{"name too long", func(c *Card) { c.Name = strings.Repeat("n", 129) }, "name", []string{"128"}},
		{"reserved prefix", func(c *Card) { c.Name = "cardex__search_tools" }, "name", []string{"cardex__", "reserved"}},
		{"reserved prefix any case", func(c *Card) { c.Name = "Cardex__x" }, "name", []string{"reserved"}},
		{"bad kind", func(c *Card) { c.Kind = "lambda" }, "kind", []string{`"lambda"`, "mcp_tool"}},
		{"bad status", func(c *Card) { c.Status = "deleted" }, "status", []string{`"deleted"`, "active"}},
		{"no summary", func(c *Card) { c.Summary = "" }, "summary", []string{"required"}},
		{"summary only invisible", func(c *Card) { c.Summary = "\u200b\u202e \n\x00" }, "summary", []string{"required"}},
		{"summary 501 code points", func(c *Card) { c.Summary = strings.Repeat("é", 501) }, "summary", []string{"501", "500"}},
		{"description too long", func(c *Card) { c.Description = strings.Repeat("d", 4001) }, "description", []string{"4001", "4000"}},
		{"when_not_to_use too long", func(c *Card) { c.WhenNotToUse = strings.Repeat("w", 1001) }, "when_not_to_use", []string{"1000"}},
		{"33 aliases", func(c *Card) { c.Aliases = numbered("alias", 33) }, "aliases", []string{"33", "32"}},
		{"alias 201 chars", func(c *Card) { c.Aliases = []string{"ok", strings.Repeat("a", 201)} }, "aliases[1]", []string{"201", "200"}},
		{"33 tags", func(c *Card) { c.Tags = numbered("tag", 33) }, "tags", []string{"33", "32"}},
		{"tag 65 chars", func(c *Card) { c.Tags = []string{strings.Repeat("t", 65)} }, "tags[0]", []string{"65", "64"}},
		{"33 scopes", func(c *Card) { c.RequiredScopes = numbered("s:", 33) }, "required_scopes", []string{"33", "32"}},
		{"scope with space", func(c *Card) { c.RequiredScopes = []string{"billing:read", "billing read"} }, "required_scopes[1]", []string{"must match"}},
		{"wildcard scope", func(c *Card) { c.RequiredScopes = []string{"billing:*"} }, "required_scopes[0]", []string{"wildcard"}},
		{"star scope", func(c *Card) { c.RequiredScopes = []string{"*"} }, "required_scopes[0]", []string{"wildcard"}},
		{"schema over 64 KiB", func(c *Card) { c.InputSchema = schemaOfSize(t, MaxSchemaBytes+1) }, "input_schema", []string{"65537", "65536"}},
		{"schema over 64 KiB after compaction", func(c *Card) {
			c.OutputSchema = append(append(json.RawMessage("{  "), schemaOfSize(t, MaxSchemaBytes+1)[1:]...), "  "...)
		}, "output_schema", []string{"65536"}},
		{"schema huge raw", func(c *Card) { c.InputSchema = json.RawMessage("{" + strings.Repeat(" ", 5*MaxSchemaBytes) + "}") }, "input_schema", []string{"327682 bytes", "65536"}},
		{"schema not JSON", func(c *Card) { c.InputSchema = json.RawMessage(`{type: object}`) }, "input_schema", []string{"not valid JSON"}},
		{"schema trailing brace", func(c *Card) { c.InputSchema = json.RawMessage(`{"type":"object"}}`) }, "input_schema", []string{"not valid JSON"}},
		{"schema trailing value", func(c *Card) { c.InputSchema = json.RawMessage(`{} {}`) }, "input_schema", []string{"not valid JSON"}},
		{"schema is an array", func(c *Card) { c.InputSchema = json.RawMessage(`[{"type":"object"}]`) }, "input_schema", []string{"object"}},
		{"schema is a string", func(c *Card) { c.OutputSchema = json.RawMessage(`"object"`) }, "output_schema", []string{"object"}},
		{"schema does not compile", func(c *Card) { c.InputSchema = json.RawMessage(`{"type": 12}`) }, "input_schema", []string{"does not compile", compileErr}},
		{"output schema does not compile", func(c *Card) { c.OutputSchema = json.RawMessage(`{"minimum":"zero"}`) }, "output_schema", []string{"does not compile"}},
		{"schema external ref", func(c *Card) { c.InputSchema = json.RawMessage(`{"$ref":"https://example.com/s.json"}`) }, "input_schema", []string{"external $ref", "https://example.com/s.json"}},
		{"negative version", func(c *Card) { c.Version = -1 }, "version", []string{"-1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.edit(&c)
			err := Normalize(&c)
			if err == nil {
				t.Fatalf("Normalize accepted the card")
			}
			if !errors.Is(err, ErrInvalid) {
				t.Errorf("errors.Is(%v, ErrInvalid) = false", err)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("error %v (%T) is not a *FieldError", err, err)
			}
			if fe.Field != tc.field {
				t.Errorf("field = %q, want %q (error %v)", fe.Field, tc.field, err)
			}
			for _, m := range tc.msg {
				if !strings.Contains(fe.Msg, m) {
					t.Errorf("message %q lacks %q", fe.Msg, m)
				}
			}
			if !strings.HasPrefix(err.Error(), tc.field+": ") {
				t.Errorf("Error() = %q, want it to start with the field", err)
			}
		})
	}
}

func numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strings.Repeat("x", i+1)
	}
	return out
}

func TestNormalizeAcceptsLimits(t *testing.T) {
	tests := []struct {
		name string
		edit func(c *Card)
	}{
		{"name 128", func(c *Card) { c.Name = strings.Repeat("n", 128) }},
		{"name charset", func(c *Card) { c.Name = "Get.User_v2-beta" }},
		{"cardex without double underscore", func(c *Card) { c.Name = "cardex_search" }},
		{"prefix not at start", func(c *Card) { c.Name = "my_cardex__x" }},
		{"summary 500 code points", func(c *Card) { c.Summary = strings.Repeat("é", 500) }},
		{"32 aliases", func(c *Card) { c.Aliases = numbered("a", 32) }},
		{"33 aliases with a duplicate", func(c *Card) { c.Aliases = append(numbered("a", 32), "AX") }},
		{"33 aliases with an empty one", func(c *Card) { c.Aliases = append(numbered("a", 32), " \u200b") }},
		{"alias 200", func(c *Card) { c.Aliases = []string{strings.Repeat("a", 200)} }},
		{"schema 64 KiB", func(c *Card) { c.InputSchema = schemaOfSize(t, MaxSchemaBytes) }},
		{"schema true", func(c *Card) { c.InputSchema = json.RawMessage(`true`) }},
		{"schema null", func(c *Card) { c.InputSchema = json.RawMessage(` null `) }},
		{"schema draft-07", func(c *Card) {
			c.InputSchema = json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object"}`)
		}},
		{"schema internal ref", func(c *Card) {
			c.InputSchema = json.RawMessage(`{"$defs":{"id":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/id"}}}`)
		}},
		{"scope charset", func(c *Card) { c.RequiredScopes = []string{"https://api.example.com/billing.read", "a_b-c:d"} }},
		{"every kind", func(c *Card) { c.Kind = KindSQLView }},
		{"status revoked", func(c *Card) { c.Status = StatusRevoked }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.edit(&c)
			if err := Normalize(&c); err != nil {
				t.Fatalf("Normalize: %v", err)
			}
		})
	}
}

func TestNormalizeRewrites(t *testing.T) {
	in := Card{
		Tenant:         " acme ",
		Server:         "\tbilling",
		Name:           "refund ",
		Summary:        "  Refund\u200b a\u00a0\u202epayment\u202c\r\n\tto the\x1b customer\ufeff ",
		Description:    "Line one.\nLine\u2066 two.\u2069",
		WhenNotToUse:   "Not for\u200d subscriptions.",
		Aliases:        []string{"give back", "", "Give Back", "reverse\u200b charge", " \u200e "},
		Tags:           []string{"Payments", "money", "MONEY", "", "billing"},
		RequiredScopes: []string{" billing:write", "billing:read", "billing:write "},
		InputSchema:    json.RawMessage("{\n  \"type\": \"object\",\n  \"properties\": {\"b\": {\"maximum\": 1.0e2}, \"a\": {}}\n}"),
	}
	c := in.Clone()
	if err := Normalize(&c); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		field     string
		got, want any
	}{
		{"tenant", c.Tenant, "acme"},
		{"server", c.Server, "billing"},
		{"name", c.Name, "refund"},
		{"summary", c.Summary, "Refund a payment to the customer"},
		{"description", c.Description, "Line one. Line two."},
		{"when_not_to_use", c.WhenNotToUse, "Not for subscriptions."},
		{"aliases", c.Aliases, []string{"give back", "reverse charge"}},
		{"tags", c.Tags, []string{"billing", "money", "payments"}},
		{"required_scopes", c.RequiredScopes, []string{"billing:read", "billing:write"}},
		{"kind", c.Kind, KindFunction},
		{"status", c.Status, StatusActive},
		{"input_schema", string(c.InputSchema), `{"properties":{"a":{},"b":{"maximum":1.0e2}},"type":"object"}`},
	}
	for _, ch := range checks {
		if g, w := jsonString(ch.got), jsonString(ch.want); g != w {
			t.Errorf("%s = %s, want %s", ch.field, g, w)
		}
	}
	if c.OutputSchema != nil {
		t.Errorf("output_schema = %q, want nil", c.OutputSchema)
	}
	// Normalising is idempotent.
	again := c.Clone()
	if err := Normalize(&again); err != nil {
		t.Fatal(err)
	}
	if jsonString(again) != jsonString(c) {
		t.Errorf("second Normalize changed the card:\n %s\n %s", jsonString(c), jsonString(again))
	}
	// Empty lists become nil.
	e := valid()
	e.Aliases, e.Tags, e.RequiredScopes = []string{""}, []string{}, []string{}
	if err := Normalize(&e); err != nil {
		t.Fatal(err)
	}
	if e.Aliases != nil || e.Tags != nil || e.RequiredScopes != nil {
		t.Errorf("empty lists not nil: %#v %#v %#v", e.Aliases, e.Tags, e.RequiredScopes)
	}
}

func jsonString(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func TestSanitize(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain text", "plain text"},
		{"  trim  me  ", "trim me"},
		{"new\nline\r\ntab\tend", "new line tab end"},
		{"bell\x07 esc\x1b[31m del\x7f nul\x00", "bell esc[31m del nul"},
		{"c1\u0085 next", "c1 next"},
		{"zero\u200bwidth\u200c non\u200djoiner\ufeff word\u2060joiner", "zerowidth nonjoiner wordjoiner"},
		{"bidi \u202aa\u202b b\u202c c\u202d d\u202e e", "bidi a b c d e"},
		{"isolates \u2066x\u2067y\u2068z\u2069", "isolates xyz"},
		{"marks \u200eleft\u200f right", "marks left right"},
		{"soft\u00adhyphen", "softhyphen"},
		{"nbsp\u00a0and\u3000ideographic", "nbsp and ideographic"},
		{"invalid \xff utf8", "invalid utf8"},
		{"keeps émoji 🚚 and 中文", "keeps émoji 🚚 and 中文"},
		{"\u200b", ""},
	}
	for _, tc := range tests {
		if got := Sanitize(tc.in); got != tc.want {
			t.Errorf("Sanitize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestCut(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 5, "short"},
		{"longer", 5, "long…"},
		{"émoji 🚚 truck", 8, "émoji 🚚…"}, // code points, never bytes
		{"中文中文中文", 3, "中文…"},
		{"", 1, ""},
		{"ab", 1, "…"},
	}
	for _, tc := range tests {
		if got := Cut(tc.in, tc.n); got != tc.want || utf8.RuneCountInString(got) > tc.n || !utf8.ValidString(got) {
			t.Errorf("Cut(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func TestCutAtWord(t *testing.T) {
	tests := []struct {
		in   string
		n    int
		want string
	}{
		{"short", 5, "short"},
		{"find the order of a customer", 20, "find the order of…"}, // the last space is in the last quarter
		{"find theorderofacustomer", 20, "find theorderofacus…"},   // it is not: cut as Cut does
		{"émoji 🚚 truck arrives", 16, "émoji 🚚 truck…"},            // code points, never bytes
		{"ab", 1, "…"},
	}
	for _, tc := range tests {
		if got := CutAtWord(tc.in, tc.n); got != tc.want || utf8.RuneCountInString(got) > tc.n || !utf8.ValidString(got) {
			t.Errorf("CutAtWord(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
		}
	}
}

func TestValidName(t *testing.T) {
	for s, want := range map[string]bool{
		"a": true, "get_user.v2-beta": true, strings.Repeat("x", 128): true,
		"": false, strings.Repeat("x", 129): false, "a b": false, "a/b": false, "a:b": false, "é": false, "a\x00b": false,
	} {
		if got := ValidName(s); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestCanonicalJSON(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"sorted keys", `{"b":1,"a":2,"c":{"z":1,"y":[{"k":1,"j":2}]}}`, `{"a":2,"b":1,"c":{"y":[{"j":2,"k":1}],"z":1}}`},
		{"compact", "{ \"a\" : [ 1 , 2 ] ,\n\t\"b\" : null }", `{"a":[1,2],"b":null}`},
		{"numbers kept as written", `{"a":1.0e2,"b":1E-7,"c":-0.0,"d":100,"e":1.50}`, `{"a":1.0e2,"b":1E-7,"c":-0.0,"d":100,"e":1.50}`},
		{"big integers", `{"n":123456789012345678901234567890,"m":-9007199254740993}`, `{"m":-9007199254740993,"n":123456789012345678901234567890}`},
		{"no HTML escaping", `{"d":"<b>a & b</b>"}`, `{"d":"<b>a & b</b>"}`},
		{"unicode escapes decoded", `{"d":"caf\u00e9 \"q\" \\"}`, `{"d":"café \"q\" \\"}`},
		{"array order kept", `[3,1,2]`, `[3,1,2]`},
		{"scalars", ` true `, `true`},
		{"trailing whitespace", "{}\n\n", `{}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := CanonicalJSON([]byte(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
	for _, bad := range []string{``, `{`, `{"a":}`, `{} {}`, `{}}`, `[1]]`, `{} x`, `nul`} {
		if got, err := CanonicalJSON([]byte(bad)); err == nil {
			t.Errorf("CanonicalJSON(%q) = %q, want an error", bad, got)
		}
	}
}

func TestCompileAndValidate(t *testing.T) {
	s, err := CompileSchema([]byte(`{
		"type": "object",
		"required": ["order_id"],
		"properties": {
			"order_id": {"type": "string", "pattern": "^ord_"},
			"quantity": {"type": "integer", "minimum": 1}
		},
		"additionalProperties": false
	}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args string
		ok   bool
		msg  []string
	}{
		{"valid", `{"order_id":"ord_1","quantity":2}`, true, nil},
		{"valid minimal", `{"order_id":"ord_1"}`, true, nil},
		{"missing required", `{"quantity":2}`, false, []string{"order_id"}},
		{"empty means {}", ``, false, []string{"order_id"}},
		{"wrong type", `{"order_id":12}`, false, []string{"order_id", "string"}},
		{"pattern", `{"order_id":"x"}`, false, []string{"order_id"}},
		{"minimum", `{"order_id":"ord_1","quantity":0}`, false, []string{"quantity"}},
		{"additional property", `{"order_id":"ord_1","extra":true}`, false, []string{"extra"}},
		{"two violations", `{"order_id":5,"quantity":0}`, false, []string{"order_id", "quantity"}},
		{"not JSON", `{order_id:1}`, false, []string{"not valid JSON"}},
		{"not an object", `[1]`, false, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := s.Validate([]byte(tc.args))
			if tc.ok {
				if err != nil {
					t.Fatalf("Validate: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Validate accepted the arguments")
			}
			for _, m := range tc.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q lacks %q", err, m)
				}
			}
			if strings.Contains(err.Error(), "mem:///") {
				t.Errorf("error %q leaks the internal schema URL", err)
			}
		})
	}

	// An empty argument document passes a schema without required fields.
	open, err := CompileSchema([]byte(`{"type":"object"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := open.Validate(nil); err != nil {
		t.Errorf("Validate(nil) against an open schema: %v", err)
	}

	for _, bad := range []struct{ schema, msg string }{
		{`{"type":"objekt"}`, "/type"},
		{`{"$ref":"other.json"}`, "external $ref"},
		{`{"properties":{"a":{"$ref":"#/$defs/missing"}}}`, "missing"},
		{`not json`, ""},
	} {
		_, err := CompileSchema([]byte(bad.schema))
		if err == nil {
			t.Errorf("CompileSchema(%s) succeeded", bad.schema)
			continue
		}
		if !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("CompileSchema(%s) = %q, want it to mention %q", bad.schema, err, bad.msg)
		}
		if strings.Contains(err.Error(), "mem:///") {
			t.Errorf("CompileSchema(%s) = %q leaks the internal schema URL", bad.schema, err)
		}
	}
}

func TestParseFile(t *testing.T) {
	tests := []struct {
		name    string
		file    string
		data    string
		want    []string // server/name of each card
		wantErr string
	}{
		{"yaml one card", "c.yaml", `
tenant: acme
server: billing
name: refund
summary: Refund a payment
aliases: [give money back]
annotations: {destructive: true}
input_schema:
  type: object
  properties:
    amount: {type: number}
`, []string{"billing/refund"}, ""},
		{"yaml list", "c.yml", `
- {tenant: acme, server: billing, name: refund, summary: Refund}
- tenant: acme
  server: shipping
  name: track
  summary: Track a parcel
`, []string{"billing/refund", "shipping/track"}, ""},
		{"json one card", "c.json", `{"tenant":"acme","server":"s","name":"n","summary":"x","input_schema":{"type":"object"}}`, []string{"s/n"}, ""},
		{"json list upper-case extension", "C.JSON", `[{"tenant":"acme","server":"s","name":"a","summary":"x"},{"tenant":"acme","server":"s","name":"b","summary":"y"}]`, []string{"s/a", "s/b"}, ""},
		{"json in a yaml file", "c.yaml", `{"tenant":"acme","server":"s","name":"n","summary":"x"}`, []string{"s/n"}, ""},
		{"empty", "c.yaml", "\n# nothing here\n", nil, ""},
		{"search examples", "c.yaml", `
tenant: acme
server: shipping
name: track
summary: Track a parcel
search_examples: [where is my parcel, has order 1234 shipped]
search_examples_source: {author: model, model: m1, prompt_version: v1}
`, []string{"shipping/track"}, ""},
		{"unknown field of search_examples_source", "bad.yaml", "tenant: t\nserver: s\nname: a\nsummary: x\nsearch_examples_source:\n  author: person\n  by: me\n",
			nil, "bad.yaml:7: search_examples_source.by: unknown field"},
		{"unknown field yaml", "bad.yaml", "tenant: acme\nserver: s\nname: refund\nsumary: typo\n", nil, `unknown field "sumary"`},
		{"unknown field json", "bad.json", `{"name":"n","scopes":["a"]}`, nil, `unknown field "scopes"`},
		{"yaml in a json file", "bad.json", "name: n\n", nil, "bad.json"},
		{"bad yaml", "bad.yaml", "name: [unclosed\n", nil, "bad.yaml"},
		{"scalar", "bad.yaml", "just a string\n", nil, "bad.yaml:1: a card is a mapping of fields"},
		{"yaml 1.1 booleans are words", "c.yaml", "tenant: acme\nserver: s\nname: n\nsummary: x\ntags: [yes, no, on, off, y]\n", []string{"s/n"}, ""},
		{"several documents", "c.yaml", "{tenant: t, server: s, name: a, summary: x}\n---\n- {tenant: t, server: s, name: b, summary: y}\n---\n", []string{"s/a", "s/b"}, ""},
		{"boolean where a string goes", "bad.yaml", "- {tenant: t, server: s, name: a, summary: x}\n- tenant: t\n  server: s\n  name: b\n  summary: x\n  tags:\n    - ok\n    - true\n",
			nil, "bad.yaml:8: tags[1]: want a string, got a boolean (true); write it in quotes to mean the text"},
		{"number where a boolean goes", "bad.yaml", "tenant: t\nserver: s\nname: a\nsummary: x\nannotations:\n  read_only: 1\n",
			nil, "bad.yaml:6: annotations.read_only: want a boolean (true or false), got a number (1)"},
		{"string version", "bad.json", "{\"tenant\": \"t\",\n \"version\": \"3\"}", nil, `bad.json:2: version: want a whole number, got a string ("3")`},
		{"unknown annotation", "bad.yaml", "tenant: t\nannotations: {readonly: true}\n", nil, "bad.yaml:2: annotations.readonly: unknown field"},
		{"unknown field has its line", "bad.yaml", "tenant: t\n\nsumary: x\n", nil, `bad.yaml:3: unknown field "sumary"`},
		{"duplicate key yaml", "bad.yaml", "tenant: t\nname: a\nname: b\n", nil, "bad.yaml:3: name: appears twice in one mapping (first on line 2)"},
		{"duplicate key json", "bad.json", "{\"name\": \"a\",\n\"name\": \"b\"}", nil, "bad.json:2: name: appears twice in one object (first on line 1)"},
		{"json syntax", "bad.json", "{\"name\": \"a\",\n\n\"x\" 1}", nil, "bad.json:3: invalid character"},
		{"yaml syntax", "bad.yaml", "tenant: t\nname: [a, b\nsummary: x\n", nil, "bad.yaml:"},
		{"not a JSON number", "bad.yaml", "tenant: t\nversion: .inf\n", nil, `bad.yaml:2: ".inf" is not a number JSON can hold`},
		{"hex number", "c.yaml", "tenant: t\nserver: s\nname: n\nsummary: x\ninput_schema: {type: object, maxProperties: 0x10}\n", []string{"s/n"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseFile(tc.file, []byte(tc.data))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				if !strings.Contains(err.Error(), tc.file) || strings.Contains(err.Error(), "json: ") {
					t.Errorf("err %q does not name the file, or speaks of json:", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, c := range got {
				names = append(names, c.Server+"/"+c.Name)
			}
			if !slices.Equal(names, tc.want) {
				t.Errorf("cards = %v, want %v", names, tc.want)
			}
		})
	}

	// Every field decodes, and a YAML schema becomes JSON that normalises.
	cs, err := ParseFile("c.yaml", []byte(tests[0].data))
	if err != nil {
		t.Fatal(err)
	}
	c := cs[0]
	if c.Tenant != "acme" || c.Summary != "Refund a payment" || len(c.Aliases) != 1 ||
		c.Annotations.Destructive == nil || !*c.Annotations.Destructive || c.Annotations.ReadOnly != nil {
		t.Errorf("decoded card = %+v", c)
	}
	if err := Normalize(&c); err != nil {
		t.Fatal(err)
	}
	if want := `{"properties":{"amount":{"type":"number"}},"type":"object"}`; string(c.InputSchema) != want {
		t.Errorf("input_schema = %s, want %s", c.InputSchema, want)
	}

	if _, err := ParseFile("big.yaml", make([]byte, MaxFileBytes+1)); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Errorf("oversized file: %v", err)
	}
}

func TestLoadPath(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"b.yaml":                 "- {tenant: t, server: s, name: b1, summary: x}\n- {tenant: t, server: s, name: b2, summary: x}\n",
		"a.json":                 `{"tenant":"t","server":"s","name":"a","summary":"x"}`,
		"sub/c.yml":              "{tenant: t, server: s, name: c, summary: x}\n",
		"sub/deeper/d.YAML":      "{tenant: t, server: s, name: d, summary: x}\n",
		"dir.yaml/e.yaml":        "{tenant: t, server: s, name: e, summary: x}\n",
		"README.md":              "not a card",
		"sub/notes.txt":          "name: nope",
		"sub/empty.yaml":         "",
		"z-last/really-last.yml": "{tenant: t, server: s, name: z, summary: x}\n",
	}
	for name, data := range files {
		p := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	cs, sources, err := LoadPath(root)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range cs {
		names = append(names, c.Name)
	}
	if want := []string{"a", "b1", "b2", "e", "c", "d", "z"}; !slices.Equal(names, want) {
		t.Errorf("names = %v, want %v", names, want)
	}
	wantSources := []string{"a.json#1", "b.yaml#1", "b.yaml#2", "dir.yaml/e.yaml#1", "sub/c.yml#1", "sub/deeper/d.YAML#1", "z-last/really-last.yml#1"}
	if len(sources) != len(wantSources) {
		t.Fatalf("sources = %v", sources)
	}
	for i, w := range wantSources {
		if want := filepath.Join(root, filepath.FromSlash(w)); sources[i] != want {
			t.Errorf("sources[%d] = %q, want %q", i, sources[i], want)
		}
	}

	// One file.
	cs, sources, err = LoadPath(filepath.Join(root, "b.yaml"))
	if err != nil || len(cs) != 2 || sources[1] != filepath.Join(root, "b.yaml")+"#2" {
		t.Errorf("LoadPath(file) = %d cards, %v, %v", len(cs), sources, err)
	}
	// A missing path and a broken file are errors naming the path.
	if _, _, err := LoadPath(filepath.Join(root, "missing")); err == nil {
		t.Error("LoadPath(missing) succeeded")
	}
	bad := filepath.Join(root, "sub", "broken.yaml")
	if err := os.WriteFile(bad, []byte("tenant: t\nbogus: 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := LoadPath(root); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("LoadPath with a broken file = %v, want an error naming %s", err, bad)
	}
}

func TestCloneAndSameContent(t *testing.T) {
	yes := true
	a := valid()
	a.Aliases = []string{"x"}
	a.InputSchema = json.RawMessage(`{"type":"object"}`)
	a.Annotations.ReadOnly = &yes
	b := a.Clone()
	b.Aliases[0] = "changed"
	b.InputSchema[2] = 'X'
	*b.Annotations.ReadOnly = false
	if a.Aliases[0] != "x" || a.InputSchema[2] != 't' || !*a.Annotations.ReadOnly {
		t.Fatalf("Clone shares memory with the original: %+v", a)
	}

	c := a.Clone()
	c.Version, c.UpdatedAt = 9, time.Now()
	if !SameContent(&a, &c) {
		t.Error("SameContent depends on Version/UpdatedAt")
	}
	for name, edit := range map[string]func(c *Card){
		"summary":     func(c *Card) { c.Summary += "!" },
		"annotation":  func(c *Card) { c.Annotations.OpenWorld = &yes },
		"schema":      func(c *Card) { c.InputSchema = json.RawMessage(`{"type":"string"}`) },
		"status":      func(c *Card) { c.Status = StatusRevoked },
		"aliases":     func(c *Card) { c.Aliases = nil },
		"read_only":   func(c *Card) { f := false; c.Annotations.ReadOnly = &f },
		"description": func(c *Card) { c.Description = "more" },
	} {
		d := a.Clone()
		edit(&d)
		if SameContent(&a, &d) {
			t.Errorf("SameContent ignores a change of %s", name)
		}
	}
	if k := a.Key(); k.String() != "acme/billing/refund" {
		t.Errorf("Key().String() = %q", k.String())
	}
}

func TestFieldError(t *testing.T) {
	e := Invalid("summary", "is %d characters; the limit is %d", 501, 500)
	if e.Error() != "summary: is 501 characters; the limit is 500" || !errors.Is(e, ErrInvalid) {
		t.Errorf("Invalid = %q", e)
	}
	e.Item = "cards[3] billing/refund"
	if e.Error() != "cards[3] billing/refund: summary: is 501 characters; the limit is 500" {
		t.Errorf("with item = %q", e)
	}
}

func TestParseEntriesServers(t *testing.T) {
	data := `
- kind: server
  tenant: acme
  name: billing
  title: Billing API
  description: Invoices, payments and refunds.
- {tenant: acme, server: billing, name: refund, summary: Refund a payment}
- {kind: server, tenant: acme, name: orders, version: 3}
`
	cs, ss, err := ParseEntries("mixed.yaml", []byte(data))
	if err != nil {
		t.Fatal(err)
	}
	if len(cs) != 1 || cs[0].Name != "refund" {
		t.Errorf("cards = %+v", cs)
	}
	want := []ServerInfo{
		{Tenant: "acme", Name: "billing", Title: "Billing API", Description: "Invoices, payments and refunds."},
		{Tenant: "acme", Name: "orders", Version: 3},
	}
	if !slices.Equal(ss, want) {
		t.Errorf("servers = %+v, want %+v", ss, want)
	}
	// ParseFile keeps the cards only.
	if cs, err := ParseFile("mixed.yaml", []byte(data)); err != nil || len(cs) != 1 {
		t.Errorf("ParseFile = %d cards, %v", len(cs), err)
	}
	for _, tc := range []struct{ data, want string }{
		{"{kind: server, tenant: acme, name: x, summary: cards have summaries}", `mixed.yaml:1: unknown field "summary"`},
		{"- {kind: server, tenant: acme, name: x}\n- {kind: server, tenant: acme, name: y, aliases: [a]}", `mixed.yaml:2: unknown field "aliases"`},
		{"- {tenant: acme, server: s, name: x, summary: s, title: no}", `mixed.yaml:1: unknown field "title"`},
	} {
		if _, _, err := ParseEntries("mixed.yaml", []byte(tc.data)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseEntries(%q) = %v, want %q", tc.data, err, tc.want)
		}
	}

	// LoadEntries keeps each entry's source.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.yaml"), []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "b.json"), []byte(`[{"kind":"server","tenant":"acme","name":"z"}]`), 0o644); err != nil {
		t.Fatal(err)
	}
	e, err := LoadEntries(dir)
	if err != nil {
		t.Fatal(err)
	}
	src := func(f string, i int) string { return filepath.Join(dir, f) + "#" + strconv.Itoa(i) }
	if !slices.Equal(e.CardSources, []string{src("a.yaml", 2)}) ||
		!slices.Equal(e.ServerSources, []string{src("a.yaml", 1), src("a.yaml", 3), src("b.json", 1)}) || len(e.Servers) != 3 {
		t.Errorf("LoadEntries = %+v", e)
	}
	if cs, sources, err := LoadPath(dir); err != nil || len(cs) != 1 || sources[0] != src("a.yaml", 2) {
		t.Errorf("LoadPath = %v, %v, %v", cs, sources, err)
	}
}

// The examples' basis hash follows the text examples are written from, and
// nothing else.
func TestExamplesBasisHash(t *testing.T) {
	base := valid()
	base.InputSchema = json.RawMessage(`{"type":"object","properties":{"order":{"type":"object","description":"The order","properties":{"id":{"type":"string"}}}}}`)
	h := base.ExamplesBasisHash()
	if len(h) != 32 || h != base.ExamplesBasisHash() {
		t.Fatalf("hash %q is not stable hex of 32", h)
	}
	tests := []struct {
		name    string
		edit    func(c *Card)
		changes bool
	}{
		{"summary", func(c *Card) { c.Summary += "!" }, true},
		{"description", func(c *Card) { c.Description = "More." }, true},
		{"server", func(c *Card) { c.Server = "other" }, true},
		{"name", func(c *Card) { c.Name = "other" }, true},
		{"when_not_to_use", func(c *Card) { c.WhenNotToUse = "Not for x." }, true},
		{"parameter description", func(c *Card) {
			c.InputSchema = json.RawMessage(`{"type":"object","properties":{"order":{"type":"object","description":"An order","properties":{"id":{"type":"string"}}}}}`)
		}, true},
		{"nested parameter", func(c *Card) {
			c.InputSchema = json.RawMessage(`{"type":"object","properties":{"order":{"type":"object","description":"The order","properties":{"ref":{"type":"string"}}}}}`)
		}, true},
		{"parameter type only", func(c *Card) {
			c.InputSchema = json.RawMessage(`{"type":"object","properties":{"order":{"type":"object","description":"The order","properties":{"id":{"type":"integer"}}}}}`)
		}, false},
		{"examples", func(c *Card) {
			c.SearchExamples = []string{"x"}
			c.ExamplesSource = &ExamplesSource{Author: AuthorPerson}
		}, false},
		{"aliases, tags, scopes, status, version", func(c *Card) {
			c.Aliases, c.Tags, c.RequiredScopes, c.Status, c.Version = []string{"a"}, []string{"t"}, []string{"s:r"}, StatusRevoked, 7
		}, false},
		{"tenant", func(c *Card) { c.Tenant = "globex" }, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := base.Clone()
			tc.edit(&c)
			if got := c.ExamplesBasisHash() != h; got != tc.changes {
				t.Errorf("hash changed = %v, want %v", got, tc.changes)
			}
		})
	}
	// Stale: examples present and written from other text.
	c := base.Clone()
	if c.ExamplesStale() {
		t.Error("a card without examples is not stale")
	}
	c.SearchExamples = []string{"x"}
	c.ExamplesSource = &ExamplesSource{Author: AuthorModel, Model: "m", CardHash: h}
	if c.ExamplesStale() {
		t.Error("fresh examples are stale")
	}
	c.Summary = "Changed"
	if !c.ExamplesStale() {
		t.Error("examples of the old summary are not stale")
	}
}
