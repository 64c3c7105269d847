package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/access/audittrail"
	"github.com/seed0cff8200/cardex/internal/codec/apiconv"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// The CatalogService's server-entry RPCs. Like every CatalogService call
// they need the catalog token when the server has one (catalogAuth).

func (s *catalog) PutServers(ctx context.Context, req *pb.PutServersRequest) (*pb.PutServersResponse, error) {
	res, err := put(ctx, s, "PutServers", batchNames{field: "servers", plural: "server entries", counted: "entries"},
		req.GetServers(), apiconv.ServerInfoFromProto, s.store.PutServers)
	if err != nil {
		return nil, err
	}
	out := &pb.PutServersResponse{}
	for _, r := range res {
		out.Results = append(out.Results, &pb.PutResult{Tenant: r.Key.Tenant, Server: r.Key.Server, Version: r.Version, Outcome: string(r.Outcome)})
	}
	return out, nil
}

// serverRef checks a (tenant, name) pair of a request.
func serverRef(tenant, name string, nameRequired bool) error {
	for _, f := range []struct{ field, v string }{{"tenant", tenant}, {"name", name}} {
		if f.v == "" {
			if f.field == "name" && !nameRequired {
				continue
			}
			return cards.Invalid(f.field, "is required")
		}
		if !cards.ValidName(f.v) {
			return cards.Invalid(f.field, "must match [A-Za-z0-9_.-]{1,%d}", cards.MaxNameLen)
		}
	}
	return nil
}

func (s *catalog) ListServers(ctx context.Context, req *pb.ListServersRequest) (*pb.ListServersResponse, error) {
	if err := serverRef(req.GetTenant(), req.GetName(), false); err != nil {
		return nil, toStatus(s.log, "ListServers", err)
	}
	var list []cards.ServerInfo
	if req.GetName() != "" {
		si, err := s.store.GetServer(ctx, req.GetTenant(), req.GetName())
		if err != nil {
			if errors.Is(err, cards.ErrNotFound) {
				err = fmt.Errorf("server %s: %w", req.GetName(), cards.ErrNotFound)
			}
			return nil, toStatus(s.log, "ListServers", err)
		}
		list = []cards.ServerInfo{si}
	} else {
		var err error
		if list, err = s.store.Servers(ctx, req.GetTenant()); err != nil {
			return nil, toStatus(s.log, "ListServers", err)
		}
	}
	out := &pb.ListServersResponse{}
	for i := range list {
		out.Servers = append(out.Servers, apiconv.ServerInfoToProto(&list[i]))
	}
	return out, nil
}

func (s *catalog) DeleteServer(ctx context.Context, req *pb.DeleteServerRequest) (*pb.DeleteServerResponse, error) {
	if err := serverRef(req.GetTenant(), req.GetName(), true); err != nil {
		return nil, toStatus(s.log, "DeleteServer", err)
	}
	if req.GetExpectedVersion() < 0 {
		return nil, toStatus(s.log, "DeleteServer", cards.Invalid("expected_version", "must be 0 (no check) or the current version"))
	}
	// The version deleted, for the audit trail (as DeleteCard).
	before := req.GetExpectedVersion()
	if before == 0 {
		if si, err := s.store.GetServer(ctx, req.GetTenant(), req.GetName()); err == nil {
			before = si.Version
		}
	}
	entry := audittrail.Entry{Method: "DeleteServer", Tenant: req.GetTenant(), Server: req.GetName(), BeforeVersion: before}
	if err := s.store.DeleteServer(ctx, req.GetTenant(), req.GetName(), req.GetExpectedVersion()); err != nil {
		err = toStatus(s.log, "DeleteServer", err)
		entry.Outcome, entry.Detail = "failed", err.Error()
		s.audit(ctx, entry)
		return nil, err
	}
	entry.Outcome = "deleted"
	s.audit(ctx, entry)
	s.refresh(ctx)
	return &pb.DeleteServerResponse{}, nil
}
