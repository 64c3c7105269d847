package server

import (
	"encoding/json"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/seed0cff8200/cardex/cards"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
	"github.com/seed0cff8200/cardex/retriever"
)

// Protobuf types stay at the edge: these functions are the only place that
// converts between them and the plain Go types.

func cardToProto(c *cards.Card, withSchemas bool) *pb.Card {
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

func cardFromProto(p *pb.Card) cards.Card {
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
	return c
}

func callerFromProto(p *pb.Caller) retriever.Caller {
	return retriever.Caller{
		Tenant:    p.GetTenant(),
		Subject:   p.GetSubject(),
		Scopes:    p.GetScopes(),
		SessionID: p.GetSessionId(),
	}
}
