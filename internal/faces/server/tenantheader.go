package server

import (
	"context"

	"google.golang.org/grpc/metadata"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/codec/apiconv"
)

// checkTenantHeader holds the routing header (apiconv.TenantHeader), when a
// call carries one, against the tenants the call is for: the header lets a
// proxy route by tenant, and so it must never disagree with the request it
// routes. A call without the header is not refused (a replica reached
// directly serves any tenant).
func checkTenantHeader(ctx context.Context, tenants []string) error {
	vs := metadata.ValueFromIncomingContext(ctx, apiconv.TenantHeader)
	if len(vs) == 0 {
		return nil
	}
	if len(vs) > 1 {
		return cards.Invalid(apiconv.TenantHeader, "given %d times, want once", len(vs))
	}
	for _, t := range tenants {
		if t != vs[0] {
			return cards.Invalid(apiconv.TenantHeader, "the header names tenant %q, the request tenant %q: they must agree (the header routes, it grants nothing)", vs[0], t)
		}
	}
	return nil
}
