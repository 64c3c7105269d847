package toolformat

import (
	"encoding/json"
	"slices"
)

// strictKeywords are the schema keywords OpenAI's strict mode (structured
// outputs) supports. A schema with any other keyword is sent with strict
// false, never rewritten.
var strictKeywords = map[string]bool{
	"type": true, "properties": true, "required": true, "additionalProperties": true, "items": true,
	"enum": true, "const": true, "anyOf": true, "$ref": true, "$defs": true, "description": true,
	"pattern": true, "format": true, "minimum": true, "maximum": true, "exclusiveMinimum": true,
	"exclusiveMaximum": true, "multipleOf": true, "minItems": true, "maxItems": true,
}

// maxStrictDepth bounds the walk (a normalised card's schema is far
// shallower; cards.MaxSchemaDepth).
const maxStrictDepth = 64

// Strict reports whether an input schema already meets OpenAI's strict
// mode, so strict: true can be sent without changing the tool's contract:
// the root is an object schema; every object schema lists every property
// in required and sets additionalProperties to false; and only supported
// keywords appear. Optional parameters make a schema non-strict: forcing
// them to be given would change what the tool means.
func Strict(schema json.RawMessage) bool {
	var root map[string]any
	if json.Unmarshal(schema, &root) != nil || root["type"] != "object" {
		return false
	}
	return strictNode(root, 0)
}

func strictNode(v any, depth int) bool {
	if depth > maxStrictDepth {
		return false
	}
	m, ok := v.(map[string]any)
	if !ok {
		return false
	}
	for k := range m {
		if !strictKeywords[k] {
			return false
		}
	}
	if isObject(m["type"]) {
		if m["additionalProperties"] != false {
			return false
		}
		props, _ := m["properties"].(map[string]any)
		req, _ := m["required"].([]any)
		if len(req) != len(props) {
			return false
		}
		for name, p := range props {
			if !slices.Contains(req, any(name)) || !strictNode(p, depth+1) {
				return false
			}
		}
	}
	if it, ok := m["items"]; ok && !strictNode(it, depth+1) {
		return false
	}
	if defs, ok := m["$defs"].(map[string]any); ok {
		for _, d := range defs {
			if !strictNode(d, depth+1) {
				return false
			}
		}
	}
	if any_, ok := m["anyOf"].([]any); ok {
		for _, s := range any_ {
			if !strictNode(s, depth+1) {
				return false
			}
		}
	}
	return true
}

// isObject reports whether a type keyword admits objects.
func isObject(t any) bool {
	switch t := t.(type) {
	case string:
		return t == "object"
	case []any:
		return slices.Contains(t, any("object"))
	}
	return false
}
