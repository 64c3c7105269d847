// Package cardjson is the one JSON shape of a capability card wherever
// cardex prints or returns one outside the gRPC API: the CLI's -o json, MCP
// describe_tool, and `cardex import -o json`. It is the card file format —
// the field names of a card file, schemas as JSON objects, the version a
// number — so a card printed by `cardex cards get -o json` can be applied
// again as it is.
package cardjson

import (
	"encoding/json"
	"time"

	"github.com/seed0cff8200/cardex/cards"
)

// Card is a card as JSON. Empty fields are left out.
type Card struct {
	Tenant         string                `json:"tenant,omitempty"`
	Server         string                `json:"server"`
	Name           string                `json:"name"`
	Kind           string                `json:"kind,omitempty"`
	Summary        string                `json:"summary"`
	Description    string                `json:"description,omitempty"`
	Aliases        []string              `json:"aliases,omitempty"`
	Tags           []string              `json:"tags,omitempty"`
	WhenNotToUse   string                `json:"when_not_to_use,omitempty"`
	RequiredScopes []string              `json:"required_scopes,omitempty"`
	Status         string                `json:"status,omitempty"`
	Annotations    cards.Annotations     `json:"annotations,omitzero"`
	InputSchema    json.RawMessage       `json:"input_schema,omitempty"`
	OutputSchema   json.RawMessage       `json:"output_schema,omitempty"`
	SearchExamples []string              `json:"search_examples,omitempty"`
	ExamplesSource *cards.ExamplesSource `json:"search_examples_source,omitempty"`
	Version        int64                 `json:"version,omitempty"`
	UpdatedAt      time.Time             `json:"updated_at,omitzero"`
}

// From is every field of a card.
func From(c *cards.Card) Card {
	return Card{
		Tenant:         c.Tenant,
		Server:         c.Server,
		Name:           c.Name,
		Kind:           string(c.Kind),
		Summary:        c.Summary,
		Description:    c.Description,
		Aliases:        c.Aliases,
		Tags:           c.Tags,
		WhenNotToUse:   c.WhenNotToUse,
		RequiredScopes: c.RequiredScopes,
		Status:         string(c.Status),
		Annotations:    c.Annotations,
		InputSchema:    schema(c.InputSchema),
		OutputSchema:   schema(c.OutputSchema),
		SearchExamples: c.SearchExamples,
		ExamplesSource: c.ExamplesSource,
		Version:        c.Version,
		UpdatedAt:      c.UpdatedAt,
	}
}

// ForModel is what a model is shown of a card it may use (MCP
// describe_tool): the same shape without the fields that are the platform
// team's business — tenant, status, aliases, tags, required scopes, time —
// and without the search examples, which are for search only.
func ForModel(c *cards.Card) Card {
	out := From(c)
	out.Tenant, out.Status, out.Aliases, out.Tags, out.RequiredScopes, out.UpdatedAt = "", "", nil, nil, nil, time.Time{}
	out.SearchExamples, out.ExamplesSource = nil, nil
	return out
}

// schema is a schema as JSON, or nothing when it is not valid JSON (which a
// normalised card never has): a RawMessage must be valid to be marshalled.
func schema(s json.RawMessage) json.RawMessage {
	if len(s) == 0 || !json.Valid(s) {
		return nil
	}
	return s
}
