package cards

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// Schema is a compiled JSON Schema with the bound on its validation cost.
type Schema struct {
	s *jsonschema.Schema
	// cost[d] bounds the evaluations a value at depth d costs (schemaCost).
	cost []int64
}

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
// always compiles the same way. External references are refused, and so
// are documents over the work limits (MaxSchemaDepth, MaxSchemaObjects,
// MaxSchemaEvaluations; a *LimitError) and objects with duplicate keys (a
// *DuplicateKeyError): both are checked before anything is compiled.
func CompileSchema(raw []byte) (*Schema, error) { return compileSchema(raw, nil) }

// compileSchema is CompileSchema with an extra vocabulary (tests count
// evaluations with one).
func compileSchema(raw []byte, vocab *jsonschema.Vocabulary) (*Schema, error) {
	sh, err := ScanJSON(raw, MaxSchemaDepth)
	if err != nil {
		return nil, err
	}
	if sh.Objects > MaxSchemaObjects {
		return nil, &LimitError{fmt.Sprintf("has %d objects; the limit is %d", sh.Objects, MaxSchemaObjects)}
	}
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
		s, err := compileDraft(doc, d, vocab)
		if err == nil {
			return s, nil
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}

func compileDraft(doc any, draft *jsonschema.Draft, vocab *jsonschema.Vocabulary) (*Schema, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(draft)
	c.UseLoader(noLoader{})
	if vocab != nil {
		c.AssertVocabs()
		c.RegisterVocabulary(vocab)
	}
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
	cost, err := schemaCost(s)
	if err != nil {
		return nil, &LimitError{err.Error()}
	}
	if cost[MaxArgumentsDepth] > MaxSchemaEvaluations {
		return nil, &LimitError{errSchemaCost.Error()}
	}
	return &Schema{s: s, cost: cost}, nil
}

// Validate checks a JSON document against the schema. The error lists every
// violation with its location. Before anything is validated, the document
// is refused when an object holds a duplicate key (naming its path), when
// it nests deeper than MaxArgumentsDepth, or when validating it could take
// more than MaxValidationSteps evaluations.
func (s *Schema) Validate(instance []byte) error {
	if len(bytes.TrimSpace(instance)) == 0 {
		instance = []byte("{}")
	}
	sh, err := ScanJSON(instance, MaxArgumentsDepth)
	var dup *DuplicateKeyError
	var lim *LimitError
	switch {
	case errors.As(err, &dup):
		return err
	case errors.As(err, &lim):
		return fmt.Errorf("arguments %v", err)
	case err != nil:
		return fmt.Errorf("arguments are not valid JSON: %v", err)
	}
	if n := validationSteps(s.cost, sh.PerDepth); n > MaxValidationSteps {
		return fmt.Errorf("arguments are too large for this schema: validating them could take %d subschema evaluations; the limit is %d", n, MaxValidationSteps)
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
