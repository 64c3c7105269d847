package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/seed0cff8200/cardex/cards"
)

// JWTConfig configures caller identity from JWTs.
type JWTConfig struct {
	// JWKS is a file path or an https URL (http only on loopback) of the
	// issuer's JSON Web Key Set.
	JWKS string
	// Issuer and Audience must match the token's iss and aud claims.
	Issuer, Audience string
	// TenantClaim names the claim that holds the tenant (default "tenant").
	TenantClaim string
	// Refresh is how often a JWKS URL is fetched again (default 10m); an
	// unknown key id also triggers a fetch, at most every 30 s.
	Refresh time.Duration
	// HTTPClient fetches a JWKS URL (default: 10 s timeout).
	HTTPClient *http.Client
	Logger     *slog.Logger
	Now        func() time.Time
}

// Accepted signature algorithms: asymmetric only (a shared HMAC secret
// would let anyone who can verify also sign).
var jwtAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

const (
	jwtLeeway       = 30 * time.Second
	maxJWTBytes     = 16 << 10
	maxJWKSBytes    = 1 << 20
	minKeyedRefetch = 30 * time.Second
)

// JWTVerifier verifies JWTs and turns their claims into a caller.
type JWTVerifier struct {
	cfg JWTConfig
	log *slog.Logger

	mu      sync.Mutex
	keys    jose.JSONWebKeySet
	fetched time.Time
}

// NewJWTVerifier loads the JWKS once (start fails when it cannot) and, for a
// URL, keeps it fresh until ctx ends.
func NewJWTVerifier(ctx context.Context, cfg JWTConfig) (*JWTVerifier, error) {
	if cfg.Issuer == "" || cfg.Audience == "" {
		return nil, errors.New("a JWKS needs --jwt-issuer and --jwt-audience: tokens are checked against both")
	}
	if cfg.TenantClaim == "" {
		cfg.TenantClaim = "tenant"
	}
	if cfg.Refresh <= 0 {
		cfg.Refresh = 10 * time.Minute
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: 10 * time.Second}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	v := &JWTVerifier{cfg: cfg, log: cfg.Logger}
	if v.log == nil {
		v.log = slog.New(slog.DiscardHandler)
	}
	if isURL(cfg.JWKS) {
		if err := checkJWKSURL(cfg.JWKS); err != nil {
			return nil, err
		}
	}
	if err := v.load(ctx); err != nil {
		return nil, err
	}
	if isURL(cfg.JWKS) {
		go v.refreshLoop(ctx)
	}
	return v, nil
}

func isURL(s string) bool { return strings.HasPrefix(s, "https://") || strings.HasPrefix(s, "http://") }

func checkJWKSURL(s string) error {
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("--jwt-jwks %q: %w", s, err)
	}
	if u.Scheme == "https" {
		return nil
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return nil
	}
	return fmt.Errorf("--jwt-jwks %q: use https (plain http only to a loopback address): the keys decide who may call", s)
}

func (v *JWTVerifier) load(ctx context.Context) error {
	var b []byte
	var err error
	if isURL(v.cfg.JWKS) {
		b, err = v.fetch(ctx)
	} else {
		b, err = os.ReadFile(v.cfg.JWKS)
	}
	if err != nil {
		return fmt.Errorf("JWKS %s: %w", v.cfg.JWKS, err)
	}
	var set jose.JSONWebKeySet
	if err := json.Unmarshal(b, &set); err != nil {
		return fmt.Errorf("JWKS %s: %w", v.cfg.JWKS, err)
	}
	var keys []jose.JSONWebKey
	for _, k := range set.Keys {
		if k.Use == "enc" || !k.Valid() || !k.IsPublic() {
			continue
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return fmt.Errorf("JWKS %s: no public signing key", v.cfg.JWKS)
	}
	v.mu.Lock()
	v.keys, v.fetched = jose.JSONWebKeySet{Keys: keys}, v.cfg.Now()
	v.mu.Unlock()
	return nil
}

func (v *JWTVerifier) fetch(ctx context.Context) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, v.cfg.JWKS, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "application/json")
	res, err := v.cfg.HTTPClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET answered %s", res.Status)
	}
	b, err := io.ReadAll(io.LimitReader(res.Body, maxJWKSBytes+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxJWKSBytes {
		return nil, fmt.Errorf("more than %d bytes", maxJWKSBytes)
	}
	return b, nil
}

func (v *JWTVerifier) refreshLoop(ctx context.Context) {
	t := time.NewTicker(v.cfg.Refresh)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := v.load(ctx); err != nil && ctx.Err() == nil {
				v.log.Warn("JWKS refresh failed; keeping the keys loaded before", "err", err)
			}
		}
	}
}

// candidates are the keys that may have signed a token with this key id
// and algorithm. An unknown key id refetches a JWKS URL (rotation), at
// most every 30 s.
func (v *JWTVerifier) candidates(ctx context.Context, kid, alg string) []jose.JSONWebKey {
	pick := func() []jose.JSONWebKey {
		v.mu.Lock()
		defer v.mu.Unlock()
		var out []jose.JSONWebKey
		for _, k := range v.keys.Keys {
			if (kid == "" || k.KeyID == kid) && (k.Algorithm == "" || k.Algorithm == alg) {
				out = append(out, k)
			}
		}
		return out
	}
	keys := pick()
	if len(keys) == 0 && kid != "" && isURL(v.cfg.JWKS) {
		v.mu.Lock()
		stale := v.cfg.Now().Sub(v.fetched) >= minKeyedRefetch
		v.mu.Unlock()
		if stale {
			if err := v.load(ctx); err != nil {
				v.log.Warn("JWKS fetch for an unknown key id failed", "err", err)
			}
			keys = pick()
		}
	}
	return keys
}

// ErrInvalidJWT: the token is not a valid JWT for this server. The
// message says why (signature, issuer, audience, expiry, claims) and never
// echoes the token.
var ErrInvalidJWT = errors.New("invalid JWT")

type jwtClaims struct {
	jwt.Claims
	Scope any `json:"scope"`
}

// Verify checks a compact JWS: signature by a key of the JWKS, iss, aud,
// exp (required), nbf and iat (with 30 s leeway); then the caller: sub,
// the tenant claim and the space-separated scope claim (a list of strings
// is accepted too).
func (v *JWTVerifier) Verify(ctx context.Context, raw string) (Principal, error) {
	if len(raw) > maxJWTBytes {
		return Principal{}, fmt.Errorf("%w: longer than %d bytes", ErrInvalidJWT, maxJWTBytes)
	}
	tok, err := jwt.ParseSigned(raw, jwtAlgorithms)
	if err != nil {
		return Principal{}, fmt.Errorf("%w: %v", ErrInvalidJWT, err)
	}
	if len(tok.Headers) != 1 {
		return Principal{}, fmt.Errorf("%w: want exactly one signature", ErrInvalidJWT)
	}
	h := tok.Headers[0]
	var claims jwtClaims
	var extra map[string]any
	verified := false
	for _, k := range v.candidates(ctx, h.KeyID, h.Algorithm) {
		if err := tok.Claims(k.Key, &claims, &extra); err == nil {
			verified = true
			break
		}
	}
	if !verified {
		return Principal{}, fmt.Errorf("%w: no key of the JWKS verifies its signature", ErrInvalidJWT)
	}
	if claims.Expiry == nil {
		return Principal{}, fmt.Errorf("%w: it has no exp claim; tokens must expire", ErrInvalidJWT)
	}
	err = claims.ValidateWithLeeway(jwt.Expected{Issuer: v.cfg.Issuer, AnyAudience: jwt.Audience{v.cfg.Audience}, Time: v.cfg.Now()}, jwtLeeway)
	if err != nil {
		return Principal{}, fmt.Errorf("%w: %v", ErrInvalidJWT, err)
	}
	tenant, _ := extra[v.cfg.TenantClaim].(string)
	if !cards.ValidName(tenant) {
		return Principal{}, fmt.Errorf("%w: claim %q must hold the tenant ([A-Za-z0-9_.-]{1,%d})", ErrInvalidJWT, v.cfg.TenantClaim, cards.MaxNameLen)
	}
	if claims.Subject == "" {
		return Principal{}, fmt.Errorf("%w: it has no sub claim", ErrInvalidJWT)
	}
	var scopes []string
	switch s := claims.Scope.(type) {
	case nil:
	case string:
		scopes = strings.Fields(s)
	case []any:
		for _, x := range s {
			str, ok := x.(string)
			if !ok {
				return Principal{}, fmt.Errorf("%w: claim scope must be a space-separated string or a list of strings", ErrInvalidJWT)
			}
			scopes = append(scopes, str)
		}
	default:
		return Principal{}, fmt.Errorf("%w: claim scope must be a space-separated string or a list of strings", ErrInvalidJWT)
	}
	b := &Binding{Tenant: tenant, Subject: claims.Subject, Scopes: scopes}
	if err := checkBinding(b); err != nil {
		return Principal{}, fmt.Errorf("%w: %v", ErrInvalidJWT, err)
	}
	return Principal{Name: "jwt:" + v.cfg.Issuer, Role: RoleDiscover, Binding: b}, nil
}
