package server_test

import (
	"context"

	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/seed0cff8200/cardex/internal/codec/apiconv"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// The routing header routes; it never grants: a call whose header names
// another tenant than its request is refused whatever the tenants hold.
func TestTenantHeaderMustAgreeWithTheRequest(t *testing.T) {
	e := newEnv(t, envOptions{cards: append(acmeCards(t), globexCards(t)...)})
	withHeader := func(t *testing.T, vs ...string) context.Context {
		ctx := rpcCtx(t)
		for _, v := range vs {
			ctx = metadata.AppendToOutgoingContext(ctx, apiconv.TenantHeader, v)
		}
		return ctx
	}
	tests := []struct {
		name    string
		headers []string
		caller  *pb.Caller
		code    codes.Code
		parts   []string
	}{
		{"no header", nil, adminCaller(), codes.OK, nil},
		{"same tenant", []string{"acme"}, adminCaller(), codes.OK, nil},
		{"another tenant", []string{"globex"}, adminCaller(), codes.InvalidArgument, []string{apiconv.TenantHeader, `"globex"`, `"acme"`}},
		{"twice", []string{"acme", "acme"}, adminCaller(), codes.InvalidArgument, []string{apiconv.TenantHeader, "once"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.disc.DiscoverTools(withHeader(t, tt.headers...), &pb.DiscoverToolsRequest{Caller: tt.caller, Query: "restart a service"})
			if tt.code == codes.OK {
				if err != nil {
					t.Fatalf("DiscoverTools: %v", err)
				}
				return
			}
			wantCode(t, err, tt.code, tt.parts...)
		})
	}
	t.Run("catalog reads and writes", func(t *testing.T) {
		_, err := e.cat.ListCards(withHeader(t, "globex"), &pb.ListCardsRequest{Tenant: "acme"})
		wantCode(t, err, codes.InvalidArgument, apiconv.TenantHeader)
		cs := acmeCards(t)[:1]
		other := globexCards(t)[:1]
		req := &pb.PutCardsRequest{Cards: []*pb.Card{apiconv.CardToProto(&cs[0], true), apiconv.CardToProto(&other[0], true)}}
		_, err = e.cat.PutCards(withHeader(t, "acme"), req)
		wantCode(t, err, codes.InvalidArgument, apiconv.TenantHeader, `"globex"`)
		if _, err := e.cat.ListCards(withHeader(t, "acme"), &pb.ListCardsRequest{Tenant: "acme"}); err != nil {
			t.Fatalf("ListCards with the right header: %v", err)
		}
	})
}
