package docs_test

import (
	"reflect"
	"strings"
	"testing"
)

// The comparer must fail on output that is not what the page documents,
// or the documented examples would prove nothing.
func TestCompare(t *testing.T) {
	printed := `#  TOOL                             FUSED   CONF
1  billing/request_refund_approval  1.0000  0.59
2  orders/get_order                 0.7834  0.15

5 of 18 authorized tools; ~654 tokens instead of ~2544 for the whole authorized catalogue
discovery_id 2a84f80f-5dd9-4d24-a63e-affb548bd2a4 (full schemas: -o json)   `
	tests := []struct {
		name string
		want string
		ok   bool
	}{
		{"exact", `#  TOOL                             FUSED   CONF
1  billing/request_refund_approval  1.0000  0.59
2  orders/get_order                 0.7834  0.15

5 of 18 authorized tools; ~654 tokens instead of ~2544 for the whole authorized catalogue
discovery_id {id} (full schemas: -o json)`, true},
		{"a wrong score", `#  TOOL                             FUSED   CONF
1  billing/request_refund_approval  1.0000  0.59
2  orders/get_order                 0.7835  0.15

5 of 18 authorized tools; ~654 tokens instead of ~2544 for the whole authorized catalogue
discovery_id {id} (full schemas: -o json)`, false},
		{"a wrong count", `...
5 of 53 authorized tools; ~654 tokens instead of ~2544 for the whole authorized catalogue
discovery_id {id} (full schemas: -o json)`, false},
		{"a line too few", `#  TOOL                             FUSED   CONF
1  billing/request_refund_approval  1.0000  0.59

5 of 18 authorized tools; ~654 tokens instead of ~2544 for the whole authorized catalogue
discovery_id {id} (full schemas: -o json)`, false},
		{"a line too many", `#  TOOL                             FUSED   CONF
1  billing/request_refund_approval  1.0000  0.59
2  orders/get_order                 0.7834  0.15
3  billing/calculate_proration      0.6829  0.06

5 of 18 authorized tools; ~654 tokens instead of ~2544 for the whole authorized catalogue
discovery_id {id} (full schemas: -o json)`, false},
		{"ellipsis lines and text", `#  TOOL  ...
...
5 of 18 authorized tools; ... for the whole authorized catalogue
discovery_id {id} (full schemas: -o json)`, true},
		{"table padding is free", `#  TOOL  FUSED  CONF
1  billing/request_refund_approval  1.0000  0.59
2  orders/get_order  0.7834  0.15

5 of {num} authorized tools; ~{num} tokens instead of ~{num} for the whole authorized catalogue
discovery_id {id} (full schemas: -o json)`, true},
		{"one space is not padding", `#  TOOL                             FUSED   CONF
1 billing/request_refund_approval  1.0000  0.59
...`, false},
		{"an id is not any text", `...
discovery_id {id} (full schemas: -o json) trailing`, false},
		{"a number is not any text", `...
5 of {num} authorized tools; ~{num} tokens instead of ~{num} for the whole {num} catalogue
...`, false},
		{"a wrong last line", `...
discovery_id {id}`, false},
	}
	got := normalize(printed)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want, _, err := expected(strings.Split(tt.want, "\n"))
			if err != nil {
				t.Fatal(err)
			}
			if ok := matches(want, got); ok != tt.ok {
				t.Errorf("matches = %v, want %v\n%s", ok, tt.ok, diff(want, got))
			}
		})
	}
}

func TestPlaceholders(t *testing.T) {
	tests := []struct {
		want, got string
		ok        bool
	}{
		{"{time}  x", "2026-12-01T19:49:28Z  x", true},
		{"{time}", "2026-12-01T19:49:33.423555694Z", true},
		{"{time}", "yesterday", false},
		{"{dur}", "9.21ms", true},
		{"{dur}", "1m2.5s", true},
		{"{dur}", "850µs", true},
		{"{dur}", "fast", false},
		{"{num}", "31,631", true},
		{"{num}", "0.3", true},
		{"{num}", "x", false},
		{"{hex}", "44d14ea54be284cd", true},
		{"{hex}", "XYZ", false},
		{"{token}", "No9Fx9qMnx3W4NUecnYp9c6azPqnvsjoU_0g5JsL8Cc", true},
		{"{token}", "two words", false},
		{"a.b", "axb", false}, // the rest is literal
		{"(exit)", "(exit)", true},
	}
	for _, tt := range tests {
		if ok := matches([]string{tt.want}, []string{tt.got}); ok != tt.ok {
			t.Errorf("%q against %q: %v, want %v", tt.want, tt.got, ok, tt.ok)
		}
	}
}

func TestDiffShowsWhatDiffers(t *testing.T) {
	want := []string{"a", "...", "c  {num}", "d"}
	got := []string{"a", "b", "c  2", "e"}
	d := diff(want, got)
	for _, line := range []string{"  a\n", "  ...\n", "+ b\n", "  c  2\n", "- d\n", "+ e\n"} {
		if !strings.Contains(d, line) {
			t.Errorf("diff lacks %q:\n%s", line, d)
		}
	}
}

func TestParse(t *testing.T) {
	page := "# A page\n" + // 1
		"\n" + // 2
		"<!-- doctest: serve --agent-tokens t.yaml -->\n" + // 3
		"<!-- doctest: run ./cardex cards apply -f examples/ -->\n" + // 4
		"```sh doctest\n" + // 5
		"./cardex describe x \\\n" + // 6
		"  --tenant acme\n" + // 7
		"# cardex: tool \"x\": not found  (exit 1)\n" + // 8
		"cat > a.yaml <<'YAML'\n" + // 9
		"# not output\n" + // 10
		"YAML\n" + // 11
		"\n" + // 12
		"# a comment\n" + // 13
		"./cardex servers list --tenant acme\n" + // 14
		"```\n" + // 15
		"\n" + // 16
		"```output\n" + // 17
		"NAME  VERSION\n" + // 18
		"\n" + // 19
		"```\n" + // 20
		"```sh\n" + // 21
		"./cardex not run\n" + // 22
		"# not compared\n" + // 23
		"```\n" + // 24
		"<!-- doctest: database -->\n" + // 25
		"<!-- doctest: eventually -->\n" + // 26
		"```sh doctest\n" + // 27
		"curl -s x/metrics\n" + // 28
		"# g 1\n" + // 29
		"./cardex health\n" + // 30
		"```\n" + // 31
		"```sh doctest\n" + // 32
		"./cardex version\n" + // 33
		"```\n" // 34
	steps, err := parse(page)
	if err != nil {
		t.Fatal(err)
	}
	want := []step{
		{line: 3, kind: stepServe, command: "--agent-tokens t.yaml"},
		{line: 4, kind: stepCommand, command: "./cardex cards apply -f examples/", hidden: true},
		{line: 6, kind: stepCommand, command: "./cardex describe x \\\n  --tenant acme", want: []string{`cardex: tool "x": not found`}, exit: 1},
		{line: 9, kind: stepCommand, command: "cat > a.yaml <<'YAML'\n# not output\nYAML"},
		{line: 14, kind: stepCommand, command: "./cardex servers list --tenant acme", want: []string{"NAME  VERSION"}},
		{line: 25, kind: stepDatabase},
		{line: 28, kind: stepCommand, command: "curl -s x/metrics", want: []string{"g 1"}, eventually: true},
		{line: 30, kind: stepCommand, command: "./cardex health", eventually: true},
		{line: 33, kind: stepCommand, command: "./cardex version"},
	}
	if !reflect.DeepEqual(steps, want) {
		t.Errorf("parse:\n got %+v\nwant %+v", steps, want)
	}
}

func TestParseRefusesMalformedMarkers(t *testing.T) {
	for name, page := range map[string]string{
		"output without doctest":   "```output\nx\n```\n",
		"output after other text":  "```sh doctest\n./cardex version\n```\ntext\n```output\nx\n```\n",
		"output twice":             "```sh doctest\n./cardex version\n# v\n```\n```output\nx\n```\n",
		"unknown directive":        "<!-- doctest: launch -->\n",
		"run without a command":    "<!-- doctest: run -->\n",
		"directive on two lines":   "<!-- doctest: serve\n--insecure -->\n",
		"doctest of another shell": "```bash doctest\nls\n```\n",
		"empty doctest block":      "```sh doctest\n# nothing\n```\n",
		"unclosed block":           "```sh doctest\nls\n",
		"eventually without block": "```sh doctest\nls\n```\n<!-- doctest: eventually -->\n",
	} {
		if _, err := parse(page); err == nil {
			t.Errorf("%s: parsed without an error", name)
		}
	}
}
