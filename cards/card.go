// Package cards defines the capability card, its validation and sanitising,
// the card file formats and the Store interface every backend implements.
//
// cards imports no other package of this module.
package cards

import (
	"encoding/json"
	"slices"
	"time"
)

// Kind says what sort of tool a card describes.
type Kind string

// The card kinds.
const (
	KindMCPTool       Kind = "mcp_tool"
	KindRESTOperation Kind = "rest_operation"
	KindSQLView       Kind = "sql_view"
	KindFunction      Kind = "function"
)

// Status is the lifecycle state of a card. Only active cards can be found,
// described or authorized.
type Status string

// The card statuses.
const (
	StatusActive  Status = "active"
	StatusPending Status = "pending"
	StatusRevoked Status = "revoked"
)

// Annotations are behaviour hints, as in MCP tool annotations. A nil pointer
// means "not stated".
type Annotations struct {
	ReadOnly    *bool `json:"read_only,omitempty"`
	Destructive *bool `json:"destructive,omitempty"`
	Idempotent  *bool `json:"idempotent,omitempty"`
	OpenWorld   *bool `json:"open_world,omitempty"`
}

// TagDeprecated marks a card whose tool its source deprecates (an OpenAPI
// operation's deprecated, an MCP description's "DEPRECATED: ..."): it
// stays findable, ranked below the tools that replace it.
const TagDeprecated = "deprecated"

// Deprecated reports whether the card carries TagDeprecated.
func (c *Card) Deprecated() bool { return slices.Contains(c.Tags, TagDeprecated) }

// Key identifies a card: (tenant, server, name).
type Key struct {
	Tenant string `json:"tenant"`
	Server string `json:"server"`
	Name   string `json:"name"`
}

// String renders the key as tenant/server/name.
func (k Key) String() string { return k.Tenant + "/" + k.Server + "/" + k.Name }

// Card is a capability card: a small description of one tool plus its full
// JSON schemas.
type Card struct {
	Tenant         string          `json:"tenant"`
	Server         string          `json:"server"`
	Name           string          `json:"name"`
	Kind           Kind            `json:"kind"`
	Summary        string          `json:"summary"`
	Description    string          `json:"description,omitempty"`
	Aliases        []string        `json:"aliases,omitempty"`
	Tags           []string        `json:"tags,omitempty"`
	WhenNotToUse   string          `json:"when_not_to_use,omitempty"`
	RequiredScopes []string        `json:"required_scopes,omitempty"`
	Status         Status          `json:"status"`
	Annotations    Annotations     `json:"annotations,omitzero"`
	InputSchema    json.RawMessage `json:"input_schema,omitempty"`
	OutputSchema   json.RawMessage `json:"output_schema,omitempty"`
	// SearchExamples are requests the tool serves (examples.go): searched
	// and embedded, never shown to an agent. ExamplesSource says who wrote
	// them and from which card text.
	SearchExamples []string        `json:"search_examples,omitempty"`
	ExamplesSource *ExamplesSource `json:"search_examples_source,omitempty"`
	// Version is monotonic per card and starts at 1. On a put it is the
	// expected current version: 0 means "no check" (create or overwrite).
	Version   int64     `json:"version,omitempty"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// Key returns the card's identity.
func (c *Card) Key() Key { return Key{Tenant: c.Tenant, Server: c.Server, Name: c.Name} }

// Clone returns a deep copy of the card.
func (c *Card) Clone() Card {
	out := *c
	out.Aliases = cloneStrings(c.Aliases)
	out.Tags = cloneStrings(c.Tags)
	out.RequiredScopes = cloneStrings(c.RequiredScopes)
	out.InputSchema = cloneBytes(c.InputSchema)
	out.OutputSchema = cloneBytes(c.OutputSchema)
	out.SearchExamples = cloneStrings(c.SearchExamples)
	out.ExamplesSource = c.ExamplesSource.clone()
	out.Annotations = Annotations{
		ReadOnly:    cloneBool(c.Annotations.ReadOnly),
		Destructive: cloneBool(c.Annotations.Destructive),
		Idempotent:  cloneBool(c.Annotations.Idempotent),
		OpenWorld:   cloneBool(c.Annotations.OpenWorld),
	}
	return out
}

// SameContent reports whether two cards carry the same content, ignoring
// Version and UpdatedAt. Both cards should be normalised.
func SameContent(a, b *Card) bool {
	x, y := a.Clone(), b.Clone()
	x.Version, y.Version = 0, 0
	x.UpdatedAt, y.UpdatedAt = time.Time{}, time.Time{}
	bx, _ := json.Marshal(x)
	by, _ := json.Marshal(y)
	return string(bx) == string(by)
}

func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return append([]string(nil), s...)
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

func cloneBool(b *bool) *bool {
	if b == nil {
		return nil
	}
	v := *b
	return &v
}
