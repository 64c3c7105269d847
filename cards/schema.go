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

// fallbackDrafts are the dialects tried, in order, for a schema that names
// none in $schema: 2020-12 first (the MCP default), then the older drafts
// that real servers still emit without saying so (zod-to-json-schema's
// draft-07 tuple "items": [...]; draft-04's boolean exclusiveMinimum).
var fallbackDrafts = []*jsonschema.Draft{jsonschema.Draft2020, jsonschema.Draft7, jsonschema.Draft4}

// CompileSchema compiles raw as JSON Schema: in the draft its $schema names
// (with or without a trailing "#"), or, when it names none, in the first of
// draft 2020-12, draft-07 and draft-04 that accepts it (the error is then
// 2020-12's). The choice depends on the schema alone, so the same schema
// always compiles the same way. External references are refused.
func CompileSchema(raw []byte) (*Schema, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, err
	}
	drafts := fallbackDrafts
	if m, ok := doc.(map[string]any); ok {
		if _, named := m["$schema"]; named {
			drafts = drafts[:1] // the compiler follows $schema itself
		}
	}
	var first error
	for _, d := range drafts {
		s, err := compileDraft(doc, d)
		if err == nil {
			return s, nil
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}

func compileDraft(doc any, draft *jsonschema.Draft) (*Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(draft)
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
