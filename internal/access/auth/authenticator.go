package auth

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Authentication failures. The server maps the first two to
// Unauthenticated and ErrWrongRole to PermissionDenied.
var (
	ErrNoCredential      = errors.New("no credential")
	ErrUnknownCredential = errors.New("unknown or invalid credential")
	ErrWrongRole         = errors.New("wrong role")
)

// Authenticator decides who a bearer credential is. The zero value (no
// tokens, no JWT) leaves every service open.
type Authenticator struct {
	Tokens *Tokens
	// JWT, when set, accepts JWTs as discover credentials carrying the
	// caller.
	JWT *JWTVerifier
	// DB, when set, adds the tokens of the service_tokens table; then no
	// service is open, whatever the table holds.
	DB *DBTokens
}

// Open reports whether no credential can act as role: the service that
// needs it then takes calls without one. cardex serve allows that only on
// loopback addresses, or with --insecure.
func (a *Authenticator) Open(role Role) bool {
	if a == nil {
		return true
	}
	if a.Tokens.Grants(role) || a.DB != nil {
		return false
	}
	return role != RoleDiscover || a.JWT == nil
}

// Authenticate returns the principal of the bearer credential for a call
// that needs role. On an open service it is Unauthenticated whatever was
// sent.
func (a *Authenticator) Authenticate(ctx context.Context, bearer string, need Role) (Principal, error) {
	if a.Open(need) {
		return Unauthenticated, nil
	}
	if bearer == "" {
		return Principal{}, ErrNoCredential
	}
	p, ok := a.Tokens.Lookup(bearer)
	if !ok && a.DB != nil {
		p, ok = a.DB.Tokens().Lookup(bearer)
	}
	if !ok && a.JWT != nil && strings.Count(bearer, ".") == 2 {
		var err error
		if p, err = a.JWT.Verify(ctx, bearer); err != nil {
			return Principal{}, fmt.Errorf("%w: %v", ErrUnknownCredential, err)
		}
		ok = true
	}
	if !ok {
		return Principal{}, ErrUnknownCredential
	}
	if !p.Role.Grants(need) {
		return p, fmt.Errorf("%w: the credential %s has role %s; this service needs %s (or admin)", ErrWrongRole, p.Name, p.Role, need)
	}
	return p, nil
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal of the call, if authenticated.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}
