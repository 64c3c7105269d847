// Package tokens maps bearer tokens to callers (tenant, subject, scopes) for
// the agent-facing surfaces: the MCP front at /mcp and the gRPC
// ExecutionService. The mapping is a YAML or JSON file kept by the operator.
package tokens

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/codec/toolname"
)

// Disclosure modes: what the MCP front's tools/list shows a token.
const (
	// Progressive (the default): the three meta-tools, then the token's
	// pinned tools (AlwaysLoad) that it may use.
	Progressive = "progressive"
	// Full: every tool the token may use.
	Full = "full"
)

// MaxAlwaysLoad bounds a token's pins.
const MaxAlwaysLoad = 5

// Identity is who a token stands for, and what tools/list shows it.
type Identity struct {
	Tenant  string   `json:"tenant"`
	Subject string   `json:"subject"`
	Scopes  []string `json:"scopes"`
	// Disclosure is Progressive or Full ("" in the file means Progressive).
	Disclosure string `json:"disclosure,omitempty"`
	// AlwaysLoad are pinned tools as SERVER/NAME, listed in progressive
	// mode when the token may use them; at most MaxAlwaysLoad.
	AlwaysLoad []string `json:"always_load,omitempty"`
	// Key names the token inside the process (the hex SHA-256 of the token,
	// or "anonymous"); it is never read from the file.
	Key string `json:"-"`
}

// Pins are AlwaysLoad as (server, name) pairs, in order.
func (id Identity) Pins() []cards.Key {
	out := make([]cards.Key, 0, len(id.AlwaysLoad))
	for _, p := range id.AlwaysLoad {
		server, name, _ := strings.Cut(p, "/")
		out = append(out, cards.Key{Tenant: id.Tenant, Server: server, Name: name})
	}
	return out
}

// Entry is one token of the file. Exactly one of Token (the token itself) and
// TokenSHA256 (hex SHA-256 of the token, so the file need not hold secrets)
// is set.
type Entry struct {
	Token       string   `json:"token,omitempty"`
	TokenSHA256 string   `json:"token_sha256,omitempty"`
	Tenant      string   `json:"tenant"`
	Subject     string   `json:"subject"`
	Scopes      []string `json:"scopes,omitempty"`
	Disclosure  string   `json:"disclosure,omitempty"`
	AlwaysLoad  []string `json:"always_load,omitempty"`
}

// File is the token file.
type File struct {
	Tokens []Entry `json:"tokens"`
	// Anonymous, when set, is the identity of requests that carry no token.
	// Absent (the default) means no anonymous access.
	Anonymous *Identity `json:"anonymous,omitempty"`
}

// Table answers token lookups. The zero value knows no token.
type Table struct {
	byHash    map[string]Identity
	anonymous *Identity
}

// Load reads and checks a token file (YAML or JSON; unknown fields are errors).
func Load(path string) (*Table, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f File
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t, err := New(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// New checks a token file's content and builds the table.
func New(f File) (*Table, error) {
	t := &Table{byHash: map[string]Identity{}}
	for i, e := range f.Tokens {
		id := Identity{Tenant: e.Tenant, Subject: e.Subject, Scopes: e.Scopes, Disclosure: e.Disclosure, AlwaysLoad: e.AlwaysLoad}
		if err := check(&id); err != nil {
			return nil, fmt.Errorf("tokens[%d]: %w", i, err)
		}
		var h string
		switch {
		case e.Token != "" && e.TokenSHA256 != "":
			return nil, fmt.Errorf("tokens[%d]: set token or token_sha256, not both", i)
		case e.Token != "":
			if len(e.Token) < 16 {
				return nil, fmt.Errorf("tokens[%d]: token is %d characters; at least 16 are required", i, len(e.Token))
			}
			h = HashToken(e.Token)
		case e.TokenSHA256 != "":
			raw, err := hex.DecodeString(e.TokenSHA256)
			if err != nil || len(raw) != sha256.Size {
				return nil, fmt.Errorf("tokens[%d]: token_sha256 must be 64 hex digits", i)
			}
			h = strings.ToLower(e.TokenSHA256)
		default:
			return nil, fmt.Errorf("tokens[%d]: token or token_sha256 is required", i)
		}
		if _, dup := t.byHash[h]; dup {
			return nil, fmt.Errorf("tokens[%d]: the same token is listed twice", i)
		}
		id.Key = h
		t.byHash[h] = id
	}
	if f.Anonymous != nil {
		a := *f.Anonymous
		if a.Subject == "" {
			a.Subject = "anonymous"
		}
		if err := check(&a); err != nil {
			return nil, fmt.Errorf("anonymous: %w", err)
		}
		a.Key = AnonymousKey
		t.anonymous = &a
	}
	return t, nil
}

// AnonymousKey is the Key of the anonymous identity.
const AnonymousKey = "anonymous"

// check validates an identity and normalises its disclosure mode.
func check(id *Identity) error {
	if !cards.ValidName(id.Tenant) {
		return errors.New("tenant is required and must match [A-Za-z0-9_.-]{1,128}")
	}
	if strings.TrimSpace(id.Subject) == "" {
		return errors.New("subject is required (it names the caller in the audit log, hashed)")
	}
	switch id.Disclosure {
	case "":
		id.Disclosure = Progressive
	case Progressive, Full:
	default:
		return fmt.Errorf("disclosure %q: use %s (the default: the meta-tools and the pinned tools) or %s (every tool the token may use)", id.Disclosure, Progressive, Full)
	}
	if len(id.AlwaysLoad) > 0 && id.Disclosure == Full {
		return errors.New("always_load is for progressive disclosure; in full mode every tool the token may use is listed already")
	}
	if len(id.AlwaysLoad) > MaxAlwaysLoad {
		return fmt.Errorf("always_load has %d tools; the limit is %d", len(id.AlwaysLoad), MaxAlwaysLoad)
	}
	seen := map[string]bool{}
	for i, p := range id.AlwaysLoad {
		server, name, ok := strings.Cut(p, "/")
		if !ok || !cards.ValidName(server) || !cards.ValidName(name) {
			return fmt.Errorf("always_load[%d] %q: write SERVER/NAME, each matching [A-Za-z0-9_.-]{1,128}", i, p)
		}
		if _, ok := toolname.Qualify(server, name); !ok {
			return fmt.Errorf("always_load[%d] %q has no qualified name %s%s%s to be listed under (the server must not hold %q or end in \"_\", must not be \"cardex\", and the whole must fit in 128 characters)",
				i, p, server, toolname.Sep, name, toolname.Sep)
		}
		if seen[p] {
			return fmt.Errorf("always_load[%d] %q is listed twice", i, p)
		}
		seen[p] = true
	}
	return nil
}

// HashToken is the hex SHA-256 of a token, as token_sha256 holds it.
func HashToken(token string) string {
	sum := sha256.Sum256([]byte(token))
	return hex.EncodeToString(sum[:])
}

// Lookup returns the identity of a presented token.
func (t *Table) Lookup(token string) (Identity, bool) {
	if t == nil || token == "" {
		return Identity{}, false
	}
	id, ok := t.byHash[HashToken(token)]
	return id, ok
}

// Authenticate returns the identity of a request's Authorization header
// value: its bearer token's, or the anonymous identity (if enabled) when the
// value is empty.
func (t *Table) Authenticate(header string) (Identity, bool) {
	if header == "" {
		return t.Anonymous()
	}
	return t.Lookup(BearerToken(header))
}

type identityKey struct{}

// NewContext returns ctx carrying the identity an authenticator found, so
// that the handler after it need not look the token up again.
func NewContext(ctx context.Context, id Identity) context.Context {
	return context.WithValue(ctx, identityKey{}, id)
}

// FromContext returns the identity NewContext put in ctx.
func FromContext(ctx context.Context) (Identity, bool) {
	id, ok := ctx.Value(identityKey{}).(Identity)
	return id, ok
}

// Anonymous returns the identity of token-less requests, if enabled.
func (t *Table) Anonymous() (Identity, bool) {
	if t == nil || t.anonymous == nil {
		return Identity{}, false
	}
	return *t.anonymous, true
}

// Len is the number of tokens.
func (t *Table) Len() int {
	if t == nil {
		return 0
	}
	return len(t.byHash)
}

// BearerToken extracts TOKEN from an "Authorization: Bearer TOKEN" value
// (scheme case-insensitive); "" when absent or malformed.
func BearerToken(header string) string {
	f := strings.Fields(header)
	if len(f) != 2 || !strings.EqualFold(f[0], "bearer") {
		return ""
	}
	return f[1]
}
