package cards

import (
	"bufio"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestCompileDialects: a schema that names its draft in $schema (with or
// without the trailing "#" that zod-to-json-schema and many MCP servers
// emit) compiles in that draft; one that names none compiles in the first
// of 2020-12, draft-07 and draft-04 that accepts it, and validates by that
// draft's rules.
func TestCompileDialects(t *testing.T) {
	cases := []struct {
		name, schema string
		valid        []string
		invalid      []string
	}{
		{"2020-12 with #", `{"$schema":"https://json-schema.org/draft/2020-12/schema#","type":"object","properties":{"n":{"type":"integer"}}}`,
			[]string{`{"n":1}`}, []string{`{"n":"x"}`}},
		{"2020-12", `{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","prefixItems":[{"type":"string"}]}`,
			[]string{`{}`}, []string{`[]`}},
		{"2019-09 with #", `{"$schema":"https://json-schema.org/draft/2019-09/schema#","type":"object"}`,
			[]string{`{}`}, []string{`1`}},
		{"draft-07 with #", `{"$schema":"http://json-schema.org/draft-07/schema#","type":"array","items":[{"type":"string"},{"type":"integer"}]}`,
			[]string{`["a",1]`}, []string{`[1,"a"]`}},
		{"draft-07 without #", `{"$schema":"http://json-schema.org/draft-07/schema","type":"object","required":["a"]}`,
			[]string{`{"a":1}`}, []string{`{}`}},
		{"unnamed draft-07 tuple items", `{"type":"object","properties":{"h":{"type":"array","items":{"type":"array","items":[{"type":"string"},{"type":"string"}]}}}}`,
			[]string{`{"h":[["a","b"]]}`}, []string{`{"h":[[1,"b"]]}`}},
		{"unnamed draft-04 boolean exclusiveMinimum", `{"type":"object","properties":{"p":{"type":"integer","exclusiveMinimum":true,"minimum":0}}}`,
			[]string{`{"p":1}`}, []string{`{"p":0}`}},
		{"unnamed 2020-12", `{"type":"object","properties":{"p":{"type":"integer","exclusiveMinimum":0}}}`,
			[]string{`{"p":1}`}, []string{`{"p":0}`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, err := CompileSchema([]byte(c.schema))
			if err != nil {
				t.Fatalf("compile: %v", err)
			}
			for _, v := range c.valid {
				if err := s.Validate([]byte(v)); err != nil {
					t.Errorf("%s: %v, want valid", v, err)
				}
			}
			for _, v := range c.invalid {
				if err := s.Validate([]byte(v)); err == nil {
					t.Errorf("%s: valid, want a violation", v)
				}
			}
		})
	}
	// A schema broken in every dialect reports 2020-12's error.
	_, err := CompileSchema([]byte(`{"type":"object","properties":{"p":{"type":7}}}`))
	if err == nil || !strings.Contains(err.Error(), "2020-12") {
		t.Errorf("broken schema: %v, want the 2020-12 error", err)
	}
	// A schema naming 2020-12 is not re-read as an older draft.
	if _, err := CompileSchema([]byte(`{"$schema":"https://json-schema.org/draft/2020-12/schema","items":[{"type":"string"}]}`)); err == nil {
		t.Error("2020-12 schema with array items compiled; the named draft must decide")
	}
}

// TestRealWorldSchemas compiles every input schema of the shared evaluation
// datasets (real MCP servers' published schemas): none may be refused.
func TestRealWorldSchemas(t *testing.T) {
	dir := filepath.Join("..", "..", "shared", "eval")
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("CI") == "true" || !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s: %v (CI needs shared/ beside the clone)", dir, err)
		}
		t.Skipf("%s not here; CI fails instead of skipping", dir)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*", "tools.jsonl"))
	if len(files) == 0 {
		t.Fatalf("no tools.jsonl under %s", dir)
	}
	n := 0
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			var row struct {
				Name        string          `json:"name"`
				InputSchema json.RawMessage `json:"input_schema"`
			}
			if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(row.InputSchema) == 0 || string(row.InputSchema) == "null" {
				continue
			}
			n++
			if _, err := CompileSchema(row.InputSchema); err != nil {
				t.Errorf("%s %s: %v", filepath.Base(filepath.Dir(f)), row.Name, err)
			}
		}
		fh.Close()
	}
	if n < 700 {
		t.Errorf("compiled %d schemas; the datasets hold more than 700", n)
	}
}
