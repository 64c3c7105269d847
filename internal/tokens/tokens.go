// Package tokens maps bearer tokens to callers (tenant, subject, scopes) for
// the agent-facing surfaces: the MCP front at /mcp and the gRPC
// ExecutionService. The mapping is a YAML or JSON file kept by the operator.
package tokens

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/seed0cff8200/cardex/cards"
)

// Identity is who a token stands for.
type Identity struct {
	Tenant  string   `json:"tenant"`
	Subject string   `json:"subject"`
	Scopes  []string `json:"scopes"`
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
		id := Identity{Tenant: e.Tenant, Subject: e.Subject, Scopes: e.Scopes}
		if err := check(id); err != nil {
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
		t.byHash[h] = id
	}
	if f.Anonymous != nil {
		a := *f.Anonymous
		if a.Subject == "" {
			a.Subject = "anonymous"
		}
		if err := check(a); err != nil {
			return nil, fmt.Errorf("anonymous: %w", err)
		}
		t.anonymous = &a
	}
	return t, nil
}

func check(id Identity) error {
	if !cards.ValidName(id.Tenant) {
		return errors.New("tenant is required and must match [A-Za-z0-9_.-]{1,128}")
	}
	if strings.TrimSpace(id.Subject) == "" {
		return errors.New("subject is required (it names the caller in the audit log, hashed)")
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
