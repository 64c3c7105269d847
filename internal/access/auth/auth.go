// Package auth authenticates the callers of cardex's gRPC services: service
// tokens with a role (discover, catalog, admin), stored as SHA-256 hashes in
// a token file and compared in constant time, and JWTs verified against a
// JWKS. A credential may also carry the caller's identity (tenant, subject,
// scopes): a discover token's binding or a JWT's claims. Then that identity,
// not the request's fields, is the caller.
package auth

import (
	"errors"
	"fmt"
	"slices"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/retriever"
)

// Role is what a service token may do.
type Role string

// The roles. Admin may do what the other two may.
const (
	// RoleDiscover: DiscoveryService (DiscoverTools, SearchTools,
	// DescribeTool, AuthorizeCall, ReportOutcome).
	RoleDiscover Role = "discover"
	// RoleCatalog: CatalogService (PutCards, GetCard, ListCards, DeleteCard).
	RoleCatalog Role = "catalog"
	// RoleAdmin: both services.
	RoleAdmin Role = "admin"
)

// Grants reports whether a credential of role r may act as need.
func (r Role) Grants(need Role) bool { return r == need || r == RoleAdmin }

// Binding is the caller a credential stands for. An empty Subject leaves
// the subject to the request (it names the end user in logs and sessions;
// it grants nothing).
type Binding struct {
	Tenant  string   `json:"tenant"`
	Subject string   `json:"subject,omitempty"`
	Scopes  []string `json:"scopes,omitempty"`
}

// Principal is an authenticated credential.
type Principal struct {
	// Name names the credential in the audit trail: the token's name,
	// "jwt:<issuer>" for a JWT, or "unauthenticated" on a service that
	// needs no credential.
	Name string
	Role Role
	// Binding, when set, is the caller; the request's caller must be
	// empty or agree with it (Resolve).
	Binding *Binding
}

// Unauthenticated is the principal of a call to a service that no
// credential protects (only allowed on loopback, or with --insecure).
var Unauthenticated = Principal{Name: "unauthenticated", Role: RoleAdmin}

// ErrMismatch: the request's caller disagrees with the credential's
// binding.
var ErrMismatch = errors.New("the request's caller does not match the credential")

// Resolve is the caller of a request made with p: the request's caller as
// given when p carries no binding; otherwise the binding, which the
// request's fields may only repeat or narrow. The tenant and a bound subject
// must be empty or equal; requested scopes must each be covered by the
// bound ones (then they are the caller's scopes: a caller may ask with
// fewer). The session id always comes from the request.
func Resolve(p Principal, req retriever.Caller) (retriever.Caller, error) {
	b := p.Binding
	if b == nil {
		return req, nil
	}
	out := retriever.Caller{Tenant: b.Tenant, Subject: b.Subject, Scopes: slices.Clone(b.Scopes), SessionID: req.SessionID}
	if req.Tenant != "" && req.Tenant != b.Tenant {
		return out, fmt.Errorf("%w: caller.tenant is %q, the credential %s is bound to tenant %q", ErrMismatch, req.Tenant, p.Name, b.Tenant)
	}
	switch {
	case b.Subject == "":
		out.Subject = req.Subject
	case req.Subject != "" && req.Subject != b.Subject:
		return out, fmt.Errorf("%w: caller.subject differs from the subject the credential %s is bound to", ErrMismatch, p.Name)
	}
	if len(req.Scopes) > 0 {
		for i, s := range req.Scopes {
			if !slices.ContainsFunc(b.Scopes, func(h string) bool { return retriever.ScopeCovers(h, s) }) {
				return out, fmt.Errorf("%w: caller.scopes[%d] %q is not covered by the scopes the credential %s is bound to", ErrMismatch, i, s, p.Name)
			}
		}
		out.Scopes = slices.Clone(req.Scopes)
	}
	return out, nil
}

// checkBinding validates a binding from a token file.
func checkBinding(b *Binding) error {
	if !cards.ValidName(b.Tenant) {
		return fmt.Errorf("caller.tenant %q must match [A-Za-z0-9_.-]{1,%d}", b.Tenant, cards.MaxNameLen)
	}
	return retriever.ValidateCaller(retriever.Caller{Tenant: b.Tenant, Subject: b.Subject, Scopes: b.Scopes})
}
