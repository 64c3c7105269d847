// Package apiconv converts between the protobuf API types and the plain Go
// types of cards and retriever. Protobuf types stay at the edge: this is the
// only place that knows both.
package apiconv

import (
	"bytes"
	"encoding/json"
	"slices"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/seed0cff8200/cardex/cards"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
	"github.com/seed0cff8200/cardex/retriever"
)

// CardToProto converts a card as the catalogue holds it, search examples
// and their provenance included (catalogue readers); schemas are left out
// unless withSchemas. What an agent is shown is ToolCardToProto.
func CardToProto(c *cards.Card, withSchemas bool) *pb.Card {
	out := ToolCardToProto(c, withSchemas)
	out.SearchExamples = c.SearchExamples
	if s := c.ExamplesSource; s != nil {
		out.SearchExamplesSource = &pb.ExamplesSource{Author: s.Author, Model: s.Model, PromptVersion: s.PromptVersion, CardHash: s.CardHash}
	}
	out.SearchExamplesStale = c.ExamplesStale()
	return out
}

// ToolCardToProto converts a card for an agent (discovery and describe
// answers): without its search examples, which are for search only and
// never reach an agent; schemas are left out unless withSchemas.
func ToolCardToProto(c *cards.Card, withSchemas bool) *pb.Card {
	out := &pb.Card{
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
		Version:        c.Version,
	}
	if a := c.Annotations; a != (cards.Annotations{}) {
		out.Annotations = &pb.Annotations{ReadOnly: a.ReadOnly, Destructive: a.Destructive, Idempotent: a.Idempotent, OpenWorld: a.OpenWorld}
	}
	if withSchemas {
		out.InputSchema = string(c.InputSchema)
		out.OutputSchema = string(c.OutputSchema)
	}
	if !c.UpdatedAt.IsZero() {
		out.UpdatedAt = timestamppb.New(c.UpdatedAt)
	}
	return out
}

// SameToolCard reports whether every field of the two cards that
// ToolCardToProto reads is equal, so that their conversions are equal
// (strings and schemas sharing their memory compare in constant time).
func SameToolCard(a, b *cards.Card) bool {
	return a.Tenant == b.Tenant && a.Server == b.Server && a.Name == b.Name && a.Kind == b.Kind && a.Summary == b.Summary &&
		a.Description == b.Description && slices.Equal(a.Aliases, b.Aliases) && slices.Equal(a.Tags, b.Tags) &&
		a.WhenNotToUse == b.WhenNotToUse && slices.Equal(a.RequiredScopes, b.RequiredScopes) && a.Status == b.Status &&
		a.Version == b.Version && sameFlag(a.Annotations.ReadOnly, b.Annotations.ReadOnly) &&
		sameFlag(a.Annotations.Destructive, b.Annotations.Destructive) && sameFlag(a.Annotations.Idempotent, b.Annotations.Idempotent) &&
		sameFlag(a.Annotations.OpenWorld, b.Annotations.OpenWorld) && bytes.Equal(a.InputSchema, b.InputSchema) &&
		bytes.Equal(a.OutputSchema, b.OutputSchema) && a.UpdatedAt.Equal(b.UpdatedAt)
}

func sameFlag(a, b *bool) bool { return a == b || a != nil && b != nil && *a == *b }

// CardFromProto converts an API card (schemas as JSON text).
func CardFromProto(p *pb.Card) cards.Card {
	c := cards.Card{
		Tenant:         p.GetTenant(),
		Server:         p.GetServer(),
		Name:           p.GetName(),
		Kind:           cards.Kind(p.GetKind()),
		Summary:        p.GetSummary(),
		Description:    p.GetDescription(),
		Aliases:        p.GetAliases(),
		Tags:           p.GetTags(),
		WhenNotToUse:   p.GetWhenNotToUse(),
		RequiredScopes: p.GetRequiredScopes(),
		Status:         cards.Status(p.GetStatus()),
		Version:        p.GetVersion(),
	}
	if a := p.GetAnnotations(); a != nil {
		c.Annotations = cards.Annotations{ReadOnly: a.ReadOnly, Destructive: a.Destructive, Idempotent: a.Idempotent, OpenWorld: a.OpenWorld}
	}
	if s := p.GetInputSchema(); s != "" {
		c.InputSchema = json.RawMessage(s)
	}
	if s := p.GetOutputSchema(); s != "" {
		c.OutputSchema = json.RawMessage(s)
	}
	c.SearchExamples = p.GetSearchExamples()
	if s := p.GetSearchExamplesSource(); s != nil {
		c.ExamplesSource = &cards.ExamplesSource{Author: s.GetAuthor(), Model: s.GetModel(), PromptVersion: s.GetPromptVersion(), CardHash: s.GetCardHash()}
	}
	return c
}

// CallerFromProto converts the caller of a discovery request.
func CallerFromProto(p *pb.Caller) retriever.Caller {
	return retriever.Caller{
		Tenant:    p.GetTenant(),
		Subject:   p.GetSubject(),
		Scopes:    p.GetScopes(),
		SessionID: p.GetSessionId(),
	}
}

// DiscoverRequestFromProto is what a DiscoverTools request asks the
// retriever for, for caller (the request's own caller, or the one a token
// stands for): the gRPC handler's and the console playground's request,
// field by field the same.
func DiscoverRequestFromProto(req *pb.DiscoverToolsRequest, caller retriever.Caller) retriever.Request {
	r := retriever.Request{Caller: caller, Query: req.GetQuery(), Intents: req.GetIntents(), TopK: int(req.GetTopK()), Fusion: req.GetFusion(),
		NoCompanions: req.GetNoCompanions()}
	if req.Alpha != nil {
		r.Alpha, r.AlphaSet = req.GetAlpha(), true
	}
	if req.MinConfidence != nil {
		m := req.GetMinConfidence()
		r.MinConfidence = &m
	}
	for _, ref := range req.GetAlwaysLoad() {
		r.AlwaysLoad = append(r.AlwaysLoad, cards.Key{Server: ref.GetServer(), Name: ref.GetName()})
	}
	return r
}
