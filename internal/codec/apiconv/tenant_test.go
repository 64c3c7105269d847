package apiconv_test

import (
	"slices"
	"testing"

	"github.com/seed0cff8200/cardex/internal/codec/apiconv"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

func TestRequestTenants(t *testing.T) {
	tests := []struct {
		name string
		req  any
		want []string
	}{
		{"discovery", &pb.DiscoverToolsRequest{Caller: &pb.Caller{Tenant: "acme"}}, []string{"acme"}},
		{"discovery without caller", &pb.DescribeToolRequest{}, nil},
		{"catalog read", &pb.ListCardsRequest{Tenant: "globex"}, []string{"globex"}},
		{"catalog delete", &pb.DeleteServerRequest{Tenant: "globex"}, []string{"globex"}},
		{"put, two tenants, each once", &pb.PutCardsRequest{Cards: []*pb.Card{{Tenant: "a"}, {Tenant: "b"}, {Tenant: "a"}}}, []string{"a", "b"}},
		{"put servers", &pb.PutServersRequest{Servers: []*pb.ServerInfo{{Tenant: "a"}}}, []string{"a"}},
		{"execution: the token's tenant", &pb.CallToolRequest{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := apiconv.RequestTenants(tt.req); !slices.Equal(got, tt.want) {
				t.Errorf("RequestTenants = %q, want %q", got, tt.want)
			}
		})
	}
}
