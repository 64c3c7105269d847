package apiconv

import (
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/seed0cff8200/cardex/cards"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// ServerInfoToProto converts a server entry.
func ServerInfoToProto(s *cards.ServerInfo) *pb.ServerInfo {
	out := &pb.ServerInfo{Tenant: s.Tenant, Name: s.Name, Title: s.Title, Description: s.Description, Version: s.Version}
	if !s.UpdatedAt.IsZero() {
		out.UpdatedAt = timestamppb.New(s.UpdatedAt)
	}
	return out
}

// ServerInfoFromProto converts an API server entry (UpdatedAt is the
// store's to set).
func ServerInfoFromProto(p *pb.ServerInfo) cards.ServerInfo {
	return cards.ServerInfo{Tenant: p.GetTenant(), Name: p.GetName(), Title: p.GetTitle(), Description: p.GetDescription(), Version: p.GetVersion()}
}
