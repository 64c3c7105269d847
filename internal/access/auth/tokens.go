package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/seed0cff8200/cardex/cards"
)

// TokenEntry is one service token of the token file. The file holds the
// token's SHA-256, never the token.
type TokenEntry struct {
	// Name names the token in the audit trail ([A-Za-z0-9_.-]{1,128}).
	Name        string `json:"name"`
	Role        Role   `json:"role"`
	TokenSHA256 string `json:"token_sha256"`
	// Caller binds a discover token to one caller (see Resolve).
	Caller *Binding `json:"caller,omitempty"`
}

// TokenFile is the service token file (YAML or JSON).
type TokenFile struct {
	Tokens []TokenEntry `json:"tokens"`
}

// MinTokenLen is the shortest token cardex hands out (`cardex token new`
// makes 43-character ones); tokens are compared by hash, so they must be
// long and random.
const MinTokenLen = 16

type storedToken struct {
	hash [sha256.Size]byte
	p    Principal
}

// Tokens is a set of service tokens. The zero value holds none.
type Tokens struct {
	list []storedToken
}

// LoadTokens reads a service token file (unknown fields are errors).
func LoadTokens(path string) (*Tokens, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f TokenFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t, err := NewTokens(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// NewTokens checks a token file's content.
func NewTokens(f TokenFile) (*Tokens, error) {
	t := &Tokens{}
	names := map[string]bool{}
	for i, e := range f.Tokens {
		at := fmt.Sprintf("tokens[%d]", i)
		if !cards.ValidName(e.Name) {
			return nil, fmt.Errorf("%s: name %q is required and must match [A-Za-z0-9_.-]{1,%d}", at, e.Name, cards.MaxNameLen)
		}
		if names[e.Name] {
			return nil, fmt.Errorf("%s: the name %q is used twice", at, e.Name)
		}
		names[e.Name] = true
		switch e.Role {
		case RoleDiscover, RoleCatalog, RoleAdmin:
		default:
			return nil, fmt.Errorf("%s (%s): role %q is not one of discover, catalog, admin", at, e.Name, e.Role)
		}
		raw, err := hex.DecodeString(e.TokenSHA256)
		if err != nil || len(raw) != sha256.Size {
			return nil, fmt.Errorf("%s (%s): token_sha256 must be 64 hex digits (the SHA-256 of the token; `cardex token new` prints it)", at, e.Name)
		}
		p := Principal{Name: e.Name, Role: e.Role}
		if e.Caller != nil {
			if e.Role != RoleDiscover {
				return nil, fmt.Errorf("%s (%s): only discover tokens carry a caller", at, e.Name)
			}
			if err := checkBinding(e.Caller); err != nil {
				return nil, fmt.Errorf("%s (%s): %w", at, e.Name, err)
			}
			b := *e.Caller
			p.Binding = &b
		}
		st := storedToken{p: p}
		copy(st.hash[:], raw)
		for _, o := range t.list {
			if o.hash == st.hash {
				return nil, fmt.Errorf("%s (%s): the same token is listed as %q too", at, e.Name, o.p.Name)
			}
		}
		t.list = append(t.list, st)
	}
	return t, nil
}

// AddToken adds a token given in clear (the legacy --catalog-token-file).
func (t *Tokens) AddToken(name string, role Role, token string) {
	t.list = append(t.list, storedToken{hash: sha256.Sum256([]byte(token)), p: Principal{Name: name, Role: role}})
}

// Lookup finds the principal of a presented token. It compares the token's
// hash with every stored hash in constant time, and looks at all of them
// whatever matches, so the time taken says nothing about which token, if
// any, matched.
func (t *Tokens) Lookup(token string) (Principal, bool) {
	if t == nil || token == "" {
		return Principal{}, false
	}
	h := sha256.Sum256([]byte(token))
	found := -1
	for i := range t.list {
		if subtle.ConstantTimeCompare(h[:], t.list[i].hash[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Principal{}, false
	}
	return t.list[found].p, true
}

// Grants reports whether some token may act as role.
func (t *Tokens) Grants(role Role) bool {
	if t == nil {
		return false
	}
	for _, s := range t.list {
		if s.p.Role.Grants(role) {
			return true
		}
	}
	return false
}

// Len is the number of tokens.
func (t *Tokens) Len() int {
	if t == nil {
		return 0
	}
	return len(t.list)
}

// Unbound lists the discover tokens that take the caller from the request.
func (t *Tokens) Unbound() []string {
	var out []string
	if t == nil {
		return out
	}
	for _, s := range t.list {
		if s.p.Role == RoleDiscover && s.p.Binding == nil {
			out = append(out, s.p.Name)
		}
	}
	return out
}
