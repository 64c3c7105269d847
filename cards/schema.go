package cards

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schema is a compiled JSON Schema.
type Schema struct{ s *jsonschema.Schema }

type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("external $ref %q is not allowed: schemas must be self-contained", url)
}

// CompileSchema compiles raw as JSON Schema (draft 2020-12 unless the schema
// names another draft in $schema). External references are refused.
func CompileSchema(raw []byte) (*Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(noLoader{})
	const loc = "mem:///schema.json"
	if err := c.AddResource(loc, doc); err != nil {
		return nil, err
	}
	s, err := c.Compile(loc)
	if err != nil {
		// Relative references resolve against loc: show them as written.
		msg := strings.ReplaceAll(err.Error(), loc, "schema")
		return nil, fmt.Errorf("%s", strings.ReplaceAll(msg, "mem:///", ""))
	}
	return &Schema{s: s}, nil
}

// Validate checks a JSON document against the schema. The error lists every
// violation with its location.
func (s *Schema) Validate(instance []byte) error {
	if len(bytes.TrimSpace(instance)) == 0 {
		instance = []byte("{}")
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(instance))
	if err != nil {
		return fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	if err := s.s.Validate(v); err != nil {
		return fmt.Errorf("%s", strings.ReplaceAll(err.Error(), "mem:///schema.json", "schema"))
	}
	return nil
}
