package auth

import (
	"context"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/seed0cff8200/cardex/internal/access/tokens"
	"github.com/seed0cff8200/cardex/retriever"
)

func TestTokenFile(t *testing.T) {
	h := tokens.HashToken("a-token-of-sixteen-or-more")
	for _, tc := range []struct {
		name string
		file TokenFile
		want string // "" accepts
	}{
		{"ok", TokenFile{Tokens: []TokenEntry{{Name: "a", Role: RoleAdmin, TokenSHA256: h}}}, ""},
		{"bound", TokenFile{Tokens: []TokenEntry{{Name: "a", Role: RoleDiscover, TokenSHA256: h, Caller: &Binding{Tenant: "acme", Scopes: []string{"x:*"}}}}}, ""},
		{"no name", TokenFile{Tokens: []TokenEntry{{Role: RoleAdmin, TokenSHA256: h}}}, "name"},
		{"bad role", TokenFile{Tokens: []TokenEntry{{Name: "a", Role: "root", TokenSHA256: h}}}, `role "root" is not one of discover, catalog, admin`},
		{"raw token", TokenFile{Tokens: []TokenEntry{{Name: "a", Role: RoleAdmin, TokenSHA256: "secret"}}}, "token_sha256 must be 64 hex digits"},
		{"same name", TokenFile{Tokens: []TokenEntry{{Name: "a", Role: RoleAdmin, TokenSHA256: h}, {Name: "a", Role: RoleCatalog, TokenSHA256: tokens.HashToken("x")}}}, "used twice"},
		{"same token", TokenFile{Tokens: []TokenEntry{{Name: "a", Role: RoleAdmin, TokenSHA256: h}, {Name: "b", Role: RoleCatalog, TokenSHA256: h}}}, "the same token"},
		{"bound catalog", TokenFile{Tokens: []TokenEntry{{Name: "a", Role: RoleCatalog, TokenSHA256: h, Caller: &Binding{Tenant: "acme"}}}}, "only discover tokens"},
		{"bound to no tenant", TokenFile{Tokens: []TokenEntry{{Name: "a", Role: RoleDiscover, TokenSHA256: h, Caller: &Binding{}}}}, "caller.tenant"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewTokens(tc.file)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
	// From a file, YAML, unknown fields refused.
	dir := t.TempDir()
	p := filepath.Join(dir, "t.yaml")
	os.WriteFile(p, []byte("tokens:\n  - {name: ops, role: admin, token_sha256: "+h+"}\n"), 0o600)
	if toks, err := LoadTokens(p); err != nil || toks.Len() != 1 {
		t.Fatalf("LoadTokens: %v", err)
	}
	os.WriteFile(p, []byte("tokens:\n  - {name: ops, role: admin, token: x, token_sha256: "+h+"}\n"), 0o600)
	if _, err := LoadTokens(p); err == nil {
		t.Error("an unknown field (token) was accepted")
	}
}

func TestLookupAndRoles(t *testing.T) {
	toks, err := NewTokens(TokenFile{Tokens: []TokenEntry{
		{Name: "d", Role: RoleDiscover, TokenSHA256: tokens.HashToken("discover-0123456789")},
		{Name: "c", Role: RoleCatalog, TokenSHA256: tokens.HashToken("catalog-0123456789")},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		token string
		name  string
	}{{"discover-0123456789", "d"}, {"catalog-0123456789", "c"}, {"catalog-012345678", ""}, {"catalog-0123456789 ", ""}, {"", ""}} {
		p, ok := toks.Lookup(tc.token)
		if ok != (tc.name != "") || p.Name != tc.name {
			t.Errorf("Lookup(%q) = %v %v, want %q", tc.token, p, ok, tc.name)
		}
	}
	a := &Authenticator{Tokens: toks}
	if a.Open(RoleDiscover) || a.Open(RoleCatalog) {
		t.Error("a service with a token of its role is open")
	}
	if !(&Authenticator{}).Open(RoleDiscover) || !(*Authenticator)(nil).Open(RoleCatalog) {
		t.Error("no credential configured: services must be open")
	}
	ctx := context.Background()
	if _, err := a.Authenticate(ctx, "catalog-0123456789", RoleDiscover); !errors.Is(err, ErrWrongRole) {
		t.Errorf("catalog token for discover: %v", err)
	}
	if _, err := a.Authenticate(ctx, "", RoleDiscover); !errors.Is(err, ErrNoCredential) {
		t.Errorf("no token: %v", err)
	}
	if _, err := a.Authenticate(ctx, "nope", RoleDiscover); !errors.Is(err, ErrUnknownCredential) {
		t.Errorf("unknown token: %v", err)
	}
	if p, err := a.Authenticate(ctx, "discover-0123456789", RoleDiscover); err != nil || p.Name != "d" {
		t.Errorf("discover token: %v %v", p, err)
	}
	if !RoleAdmin.Grants(RoleCatalog) || !RoleAdmin.Grants(RoleDiscover) || RoleDiscover.Grants(RoleCatalog) || RoleCatalog.Grants(RoleAdmin) {
		t.Error("role grants")
	}
}

func TestResolve(t *testing.T) {
	bound := Principal{Name: "bot", Role: RoleDiscover, Binding: &Binding{Tenant: "acme", Scopes: []string{"billing:*", "orders:read"}}}
	subj := Principal{Name: "alice", Role: RoleDiscover, Binding: &Binding{Tenant: "acme", Subject: "alice", Scopes: []string{"orders:read"}}}
	for _, tc := range []struct {
		name string
		p    Principal
		req  retriever.Caller
		want retriever.Caller
		err  string
	}{
		{"unbound trusts the request", Principal{Name: "orch"}, retriever.Caller{Tenant: "x", Scopes: []string{"*"}}, retriever.Caller{Tenant: "x", Scopes: []string{"*"}}, ""},
		{"empty request", bound, retriever.Caller{SessionID: "s"}, retriever.Caller{Tenant: "acme", Scopes: []string{"billing:*", "orders:read"}, SessionID: "s"}, ""},
		{"subject from the request when unbound", bound, retriever.Caller{Subject: "u"}, retriever.Caller{Tenant: "acme", Subject: "u", Scopes: []string{"billing:*", "orders:read"}}, ""},
		{"narrowed", bound, retriever.Caller{Tenant: "acme", Scopes: []string{"billing:read"}}, retriever.Caller{Tenant: "acme", Scopes: []string{"billing:read"}}, ""},
		{"widened", bound, retriever.Caller{Scopes: []string{"*"}}, retriever.Caller{}, "caller.scopes[0]"},
		{"wildcard beyond", bound, retriever.Caller{Scopes: []string{"orders:*"}}, retriever.Caller{}, "caller.scopes[0]"},
		{"other tenant", bound, retriever.Caller{Tenant: "globex"}, retriever.Caller{}, "caller.tenant"},
		{"bound subject", subj, retriever.Caller{}, retriever.Caller{Tenant: "acme", Subject: "alice", Scopes: []string{"orders:read"}}, ""},
		{"other subject", subj, retriever.Caller{Subject: "bob"}, retriever.Caller{}, "caller.subject"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Resolve(tc.p, tc.req)
			if tc.err != "" {
				if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want a mismatch naming %s", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Tenant != tc.want.Tenant || got.Subject != tc.want.Subject || got.SessionID != tc.want.SessionID || !slices.Equal(got.Scopes, tc.want.Scopes) {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

// issuer signs JWTs with several keys and serves its JWKS over HTTP on
// loopback; rotate adds a key.
type issuer struct {
	mu      sync.Mutex
	keys    []jose.JSONWebKey
	signers map[string]jose.Signer
	fetches atomic.Int64
	srv     *httptest.Server
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	is := &issuer{signers: map[string]jose.Signer{}}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	_, edKey, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is.add(t, "rsa", jose.RS256, rsaKey, &rsaKey.PublicKey)
	is.add(t, "ps", jose.PS256, rsaKey, &rsaKey.PublicKey)
	is.add(t, "ec", jose.ES384, ecKey, &ecKey.PublicKey)
	is.add(t, "ed", jose.EdDSA, edKey, edKey.Public())
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		is.fetches.Add(1)
		is.mu.Lock()
		defer is.mu.Unlock()
		_ = json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: is.keys})
	}))
	t.Cleanup(is.srv.Close)
	return is
}

func (is *issuer) add(t *testing.T, kid string, alg jose.SignatureAlgorithm, priv, pub any) {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: priv}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", kid))
	if err != nil {
		t.Fatal(err)
	}
	is.mu.Lock()
	defer is.mu.Unlock()
	is.keys = append(is.keys, jose.JSONWebKey{Key: pub, KeyID: kid, Algorithm: string(alg), Use: "sig"})
	is.signers[kid] = s
}

func (is *issuer) sign(t *testing.T, kid string, c jwt.Claims, extra map[string]any) string {
	t.Helper()
	is.mu.Lock()
	s := is.signers[kid]
	is.mu.Unlock()
	tok, err := jwt.Signed(s).Claims(c).Claims(extra).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestJWT(t *testing.T) {
	is := newIssuer(t)
	now := time.Now()
	v, err := NewJWTVerifier(t.Context(), JWTConfig{JWKS: is.srv.URL, Issuer: "https://idp", Audience: "cardex", Now: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	good := jwt.Claims{Issuer: "https://idp", Audience: jwt.Audience{"cardex", "other"}, Subject: "alice", Expiry: jwt.NewNumericDate(now.Add(time.Hour))}
	claims := map[string]any{"tenant": "acme", "scope": "orders:read billing:*"}
	ctx := context.Background()
	for _, kid := range []string{"rsa", "ps", "ec", "ed"} {
		p, err := v.Verify(ctx, is.sign(t, kid, good, claims))
		if err != nil {
			t.Fatalf("%s: %v", kid, err)
		}
		if b := p.Binding; p.Role != RoleDiscover || b.Tenant != "acme" || b.Subject != "alice" || !slices.Equal(b.Scopes, []string{"orders:read", "billing:*"}) {
			t.Errorf("%s: principal %+v %+v", kid, p, b)
		}
	}
	with := func(f func(c *jwt.Claims)) jwt.Claims { c := good; f(&c); return c }
	for _, tc := range []struct {
		name   string
		token  string
		reason string
	}{
		{"expired", is.sign(t, "ec", with(func(c *jwt.Claims) { c.Expiry = jwt.NewNumericDate(now.Add(-time.Minute)) }), claims), "expired"},
		{"no exp", is.sign(t, "ec", with(func(c *jwt.Claims) { c.Expiry = nil }), claims), "no exp"},
		{"not yet", is.sign(t, "ec", with(func(c *jwt.Claims) { c.NotBefore = jwt.NewNumericDate(now.Add(time.Hour)) }), claims), "not valid yet"},
		{"issuer", is.sign(t, "ec", with(func(c *jwt.Claims) { c.Issuer = "https://evil" }), claims), "issuer"},
		{"audience", is.sign(t, "ec", with(func(c *jwt.Claims) { c.Audience = jwt.Audience{"someone-else"} }), claims), "audience"},
		{"no tenant", is.sign(t, "ec", good, map[string]any{"scope": "x"}), `claim "tenant"`},
		{"bad scope", is.sign(t, "ec", good, map[string]any{"tenant": "acme", "scope": 7}), "claim scope"},
		{"no sub", is.sign(t, "ec", with(func(c *jwt.Claims) { c.Subject = "" }), claims), "no sub"},
		{"tampered", tamper(is.sign(t, "ec", good, claims)), "signature"},
		{"not a JWT", "a.b.c", "invalid JWT"},
		{"alg none", "eyJhbGciOiJub25lIn0.eyJzdWIiOiJhbGljZSJ9.", "invalid JWT"},
		{"HS256", hs256(t, good, claims), "invalid JWT"},
	} {
		_, err := v.Verify(ctx, tc.token)
		if !errors.Is(err, ErrInvalidJWT) || !strings.Contains(err.Error(), tc.reason) {
			t.Errorf("%s: %v, want an invalid JWT about %q", tc.name, err, tc.reason)
		}
	}
	// A scope list is accepted too.
	if p, err := v.Verify(ctx, is.sign(t, "ec", good, map[string]any{"tenant": "acme", "scope": []any{"a", "b"}})); err != nil || !slices.Equal(p.Binding.Scopes, []string{"a", "b"}) {
		t.Errorf("scope list: %v %v", p, err)
	}

	// Rotation: a token signed by a key the verifier has not seen makes it
	// fetch the JWKS again (at most every 30 s).
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	is.add(t, "new", jose.ES256, ecKey, &ecKey.PublicKey)
	fresh := is.sign(t, "new", good, claims)
	if _, err := v.Verify(ctx, fresh); err == nil {
		t.Fatal("verified with a key fetched less than 30 s ago")
	}
	now = now.Add(31 * time.Second)
	before := is.fetches.Load()
	if _, err := v.Verify(ctx, fresh); err != nil {
		t.Fatalf("after rotation: %v", err)
	}
	if is.fetches.Load() != before+1 {
		t.Errorf("%d JWKS fetches for one unknown key id", is.fetches.Load()-before)
	}
}

func tamper(tok string) string {
	parts := strings.Split(tok, ".")
	var c map[string]any
	b, _ := base64.RawURLEncoding.DecodeString(parts[1])
	_ = json.Unmarshal(b, &c)
	c["scope"] = "*"
	nb, _ := json.Marshal(c)
	parts[1] = base64.RawURLEncoding.EncodeToString(nb)
	return strings.Join(parts, ".")
}

func hs256(t *testing.T, c jwt.Claims, extra map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.HS256, Key: []byte("a-shared-secret-of-32-bytes-long")}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(c).Claims(extra).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestJWKSFileAndConfig(t *testing.T) {
	is := newIssuer(t)
	dir := t.TempDir()
	p := filepath.Join(dir, "jwks.json")
	is.mu.Lock()
	b, _ := json.Marshal(jose.JSONWebKeySet{Keys: is.keys})
	is.mu.Unlock()
	os.WriteFile(p, b, 0o600)
	v, err := NewJWTVerifier(t.Context(), JWTConfig{JWKS: p, Issuer: "i", Audience: "a", TenantClaim: "org"})
	if err != nil {
		t.Fatal(err)
	}
	tok := is.sign(t, "ed", jwt.Claims{Issuer: "i", Audience: jwt.Audience{"a"}, Subject: "s", Expiry: jwt.NewNumericDate(time.Now().Add(time.Minute))}, map[string]any{"org": "acme"})
	if p, err := v.Verify(context.Background(), tok); err != nil || p.Binding.Tenant != "acme" {
		t.Errorf("from a file, tenant claim org: %v %v", p, err)
	}
	for _, cfg := range []JWTConfig{
		{JWKS: p, Audience: "a"},
		{JWKS: p, Issuer: "i"},
		{JWKS: "http://idp.example/jwks.json", Issuer: "i", Audience: "a"},
		{JWKS: filepath.Join(dir, "missing.json"), Issuer: "i", Audience: "a"},
	} {
		if _, err := NewJWTVerifier(t.Context(), cfg); err == nil {
			t.Errorf("%+v accepted", cfg)
		}
	}
}
