package server_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/seed0cff8200/cardex/cards"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

func serversReq(ss ...*pb.ServerInfo) *pb.PutServersRequest {
	return &pb.PutServersRequest{Servers: ss}
}

func listServerNames(t *testing.T, e *env, tenant string) []string {
	t.Helper()
	res, err := e.cat.ListServers(rpcCtx(t), &pb.ListServersRequest{Tenant: tenant})
	if err != nil {
		t.Fatalf("ListServers(%s): %v", tenant, err)
	}
	var out []string
	for _, s := range res.GetServers() {
		out = append(out, s.GetName())
	}
	return out
}

func TestServerEntriesThroughCatalogService(t *testing.T) {
	e := newEnv(t, envOptions{})
	res, err := e.cat.PutServers(rpcCtx(t), serversReq(
		&pb.ServerInfo{Tenant: "acme", Name: "orders", Title: "Orders\u200b API", Description: "Orders,\n returns and shipping."},
		&pb.ServerInfo{Tenant: "acme", Name: "billing", Title: "Billing"},
		&pb.ServerInfo{Tenant: "globex", Name: "orders", Title: "Globex orders"},
	))
	if err != nil {
		t.Fatalf("PutServers: %v", err)
	}
	var got []string
	for _, r := range res.GetResults() {
		got = append(got, r.GetTenant()+"/"+r.GetServer()+"/"+r.GetName()+" "+r.GetOutcome())
		if r.GetVersion() != 1 {
			t.Errorf("result %v: version %d, want 1", r, r.GetVersion())
		}
	}
	if want := []string{"acme/orders/ created", "acme/billing/ created", "globex/orders/ created"}; !slices.Equal(got, want) {
		t.Errorf("results = %v, want %v", got, want)
	}
	if names := listServerNames(t, e, "acme"); !slices.Equal(names, []string{"billing", "orders"}) {
		t.Errorf("ListServers(acme) = %v", names)
	}
	one, err := e.cat.ListServers(rpcCtx(t), &pb.ListServersRequest{Tenant: "acme", Name: "orders"})
	if err != nil || len(one.GetServers()) != 1 {
		t.Fatalf("ListServers(acme, orders) = %v, %v", one, err)
	}
	if s := one.GetServers()[0]; s.GetTitle() != "Orders API" || s.GetDescription() != "Orders, returns and shipping." ||
		s.GetVersion() != 1 || s.GetUpdatedAt() == nil {
		t.Errorf("stored entry = %v; want it sanitised, with version and updated_at", s)
	}

	// Unchanged, then updated with the expected version, then a stale one.
	res, err = e.cat.PutServers(rpcCtx(t), serversReq(&pb.ServerInfo{Tenant: "acme", Name: "billing", Title: "Billing"}))
	if err != nil || res.GetResults()[0].GetOutcome() != "unchanged" {
		t.Errorf("same entry again = %v, %v; want unchanged", res, err)
	}
	res, err = e.cat.PutServers(rpcCtx(t), serversReq(&pb.ServerInfo{Tenant: "acme", Name: "billing", Title: "Billing and invoices", Version: 1}))
	if err != nil || res.GetResults()[0].GetOutcome() != "updated" || res.GetResults()[0].GetVersion() != 2 {
		t.Errorf("update = %v, %v; want updated version 2", res, err)
	}
	_, err = e.cat.PutServers(rpcCtx(t), serversReq(&pb.ServerInfo{Tenant: "acme", Name: "billing", Title: "lost", Version: 1}))
	wantCode(t, err, codes.Aborted, "billing", "1", "2")

	// Delete: a stale version is Aborted, then it goes; a second delete is
	// NotFound, and so is ListServers for it. Cards of the server stay.
	e.put(t, simpleCard("acme", "billing", "get_invoice"))
	_, err = e.cat.DeleteServer(rpcCtx(t), &pb.DeleteServerRequest{Tenant: "acme", Name: "billing", ExpectedVersion: 1})
	wantCode(t, err, codes.Aborted)
	if _, err := e.cat.DeleteServer(rpcCtx(t), &pb.DeleteServerRequest{Tenant: "acme", Name: "billing", ExpectedVersion: 2}); err != nil {
		t.Fatalf("DeleteServer: %v", err)
	}
	_, err = e.cat.DeleteServer(rpcCtx(t), &pb.DeleteServerRequest{Tenant: "acme", Name: "billing"})
	wantCode(t, err, codes.NotFound, "billing")
	_, err = e.cat.ListServers(rpcCtx(t), &pb.ListServersRequest{Tenant: "acme", Name: "billing"})
	wantCode(t, err, codes.NotFound, "billing")
	if names := listServerNames(t, e, "acme"); !slices.Equal(names, []string{"orders"}) {
		t.Errorf("after delete, ListServers(acme) = %v", names)
	}
	if _, err := e.cat.GetCard(rpcCtx(t), &pb.GetCardRequest{Tenant: "acme", Server: "billing", Name: "get_invoice"}); err != nil {
		t.Errorf("the server's card after DeleteServer: %v", err)
	}
	// Another tenant's entries are untouched and unseen.
	if names := listServerNames(t, e, "globex"); !slices.Equal(names, []string{"orders"}) {
		t.Errorf("ListServers(globex) = %v", names)
	}
	if names := listServerNames(t, e, "initech"); len(names) != 0 {
		t.Errorf("ListServers(initech) = %v", names)
	}
}

func TestServerEntryErrors(t *testing.T) {
	e := newEnv(t, envOptions{})
	many := make([]*pb.ServerInfo, 1001)
	for i := range many {
		many[i] = &pb.ServerInfo{Tenant: "acme", Name: "s" + strings.Repeat("x", i%100)}
	}
	cases := []struct {
		name  string
		call  func(ctx context.Context) error
		code  codes.Code
		parts []string
	}{
		{"PutServers empty", func(ctx context.Context) error { _, err := e.cat.PutServers(ctx, serversReq()); return err },
			codes.InvalidArgument, []string{"servers", "1000"}},
		{"PutServers over the limit", func(ctx context.Context) error { _, err := e.cat.PutServers(ctx, serversReq(many...)); return err },
			codes.InvalidArgument, []string{"servers", "1001", "1000"}},
		{"PutServers long title", func(ctx context.Context) error {
			_, err := e.cat.PutServers(ctx, serversReq(&pb.ServerInfo{Tenant: "acme", Name: "ok"},
				&pb.ServerInfo{Tenant: "acme", Name: "long", Title: strings.Repeat("t", cards.MaxSummaryLen+1)}))
			return err
		}, codes.InvalidArgument, []string{"servers[1]", "title", "500"}},
		{"PutServers long description", func(ctx context.Context) error {
			_, err := e.cat.PutServers(ctx, serversReq(&pb.ServerInfo{Tenant: "acme", Name: "long", Description: strings.Repeat("d", cards.MaxDescriptionLen+1)}))
			return err
		}, codes.InvalidArgument, []string{"servers[0]", "description", "4000"}},
		{"PutServers bad name", func(ctx context.Context) error {
			_, err := e.cat.PutServers(ctx, serversReq(&pb.ServerInfo{Tenant: "acme", Name: "a b"}))
			return err
		}, codes.InvalidArgument, []string{"servers[0]", "name", "128"}},
		{"PutServers no tenant", func(ctx context.Context) error {
			_, err := e.cat.PutServers(ctx, serversReq(&pb.ServerInfo{Name: "x"}))
			return err
		}, codes.InvalidArgument, []string{"tenant", "required"}},
		{"PutServers duplicate", func(ctx context.Context) error {
			_, err := e.cat.PutServers(ctx, serversReq(&pb.ServerInfo{Tenant: "acme", Name: "x"}, &pb.ServerInfo{Tenant: "acme", Name: "x"}))
			return err
		}, codes.InvalidArgument, []string{"servers[1]", "servers[0]"}},
		{"PutServers version of a missing entry", func(ctx context.Context) error {
			_, err := e.cat.PutServers(ctx, serversReq(&pb.ServerInfo{Tenant: "acme", Name: "ghost", Version: 4}))
			return err
		}, codes.Aborted, []string{"ghost", "4"}},
		{"ListServers no tenant", func(ctx context.Context) error {
			_, err := e.cat.ListServers(ctx, &pb.ListServersRequest{})
			return err
		}, codes.InvalidArgument, []string{"tenant", "required"}},
		{"ListServers bad name", func(ctx context.Context) error {
			_, err := e.cat.ListServers(ctx, &pb.ListServersRequest{Tenant: "acme", Name: "a/b"})
			return err
		}, codes.InvalidArgument, []string{"name", "128"}},
		{"DeleteServer no name", func(ctx context.Context) error {
			_, err := e.cat.DeleteServer(ctx, &pb.DeleteServerRequest{Tenant: "acme"})
			return err
		}, codes.InvalidArgument, []string{"name", "required"}},
		{"DeleteServer negative version", func(ctx context.Context) error {
			_, err := e.cat.DeleteServer(ctx, &pb.DeleteServerRequest{Tenant: "acme", Name: "x", ExpectedVersion: -1})
			return err
		}, codes.InvalidArgument, []string{"expected_version"}},
		{"DeleteServer missing", func(ctx context.Context) error {
			_, err := e.cat.DeleteServer(ctx, &pb.DeleteServerRequest{Tenant: "acme", Name: "nope"})
			return err
		}, codes.NotFound, []string{"nope"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantCode(t, tc.call(rpcCtx(t)), tc.code, tc.parts...)
		})
	}
	// Nothing of the failed batches was written.
	if names := listServerNames(t, e, "acme"); len(names) != 0 {
		t.Errorf("failed puts wrote %v", names)
	}
}

func TestServerEntryRPCsNeedTheCatalogToken(t *testing.T) {
	const token = "s3cret-token"
	e := newEnv(t, envOptions{token: token})
	withAuth := func(v string) context.Context {
		return metadata.AppendToOutgoingContext(rpcCtx(t), "authorization", v)
	}
	calls := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"PutServers", func(ctx context.Context) error {
			_, err := e.cat.PutServers(ctx, serversReq(&pb.ServerInfo{Tenant: "acme", Name: "tools", Title: "Tools"}))
			return err
		}},
		{"ListServers", func(ctx context.Context) error {
			_, err := e.cat.ListServers(ctx, &pb.ListServersRequest{Tenant: "acme"})
			return err
		}},
		{"DeleteServer", func(ctx context.Context) error {
			_, err := e.cat.DeleteServer(ctx, &pb.DeleteServerRequest{Tenant: "acme", Name: "tools"})
			return err
		}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			wantCode(t, c.call(rpcCtx(t)), codes.Unauthenticated, "role catalog")
			wantCode(t, c.call(withAuth("Bearer wrong")), codes.Unauthenticated)
			if err := c.call(withAuth("Bearer " + token)); err != nil {
				t.Errorf("%s with the token: %v", c.name, err)
			}
		})
	}
}
