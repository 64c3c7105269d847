package apiconv

import (
	"slices"

	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// TenantHeader is the request header (gRPC metadata, HTTP header) that
// carries the tenant a call is for, so that a proxy can route by it
// (hash on it) without reading the body. The server checks it against the
// tenants the request itself names: it routes, it never grants.
const TenantHeader = "x-cardex-tenant"

// RequestTenants lists the tenants a request names, each once, in order of
// first appearance: the caller's tenant of a DiscoveryService request, the
// tenant field of a CatalogService read or delete, the cards' or server
// entries' tenants of a put. Requests that name none (ExecutionService
// calls, whose tenant is their token's) give nil.
func RequestTenants(req any) []string {
	var ts []string
	add := func(t string) {
		if !slices.Contains(ts, t) {
			ts = append(ts, t)
		}
	}
	switch r := req.(type) {
	case interface{ GetCaller() *pb.Caller }:
		if c := r.GetCaller(); c != nil {
			add(c.GetTenant())
		}
	case interface{ GetTenant() string }:
		add(r.GetTenant())
	case *pb.PutCardsRequest:
		for _, c := range r.GetCards() {
			add(c.GetTenant())
		}
	case *pb.PutServersRequest:
		for _, s := range r.GetServers() {
			add(s.GetTenant())
		}
	}
	return ts
}
