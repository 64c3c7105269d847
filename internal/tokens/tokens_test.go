package tokens

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLoadAndLookup(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	body := `tokens:
  - token: plain-token-0123456789
    tenant: acme
    subject: support-bot
    scopes: [support:read, "orders:*"]
  - token_sha256: ` + HashToken("hashed-token-0123456789") + `
    tenant: globex
    subject: ops
`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	tab, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		token, tenant string
		ok            bool
	}{
		{"plain-token-0123456789", "acme", true},
		{"hashed-token-0123456789", "globex", true},
		{"plain-token-012345678", "", false},
		{"", "", false},
	} {
		id, ok := tab.Lookup(tc.token)
		if ok != tc.ok || id.Tenant != tc.tenant {
			t.Errorf("Lookup(%q) = %+v %v", tc.token, id, ok)
		}
	}
	if _, ok := tab.Anonymous(); ok {
		t.Error("anonymous access without being enabled")
	}
}

func TestNewRefuses(t *testing.T) {
	good := Entry{Token: "0123456789abcdef", Tenant: "acme", Subject: "s"}
	for _, tc := range []struct {
		name string
		f    File
		want string
	}{
		{"short token", File{Tokens: []Entry{{Token: "short", Tenant: "acme", Subject: "s"}}}, "at least 16"},
		{"no token", File{Tokens: []Entry{{Tenant: "acme", Subject: "s"}}}, "token or token_sha256 is required"},
		{"both", File{Tokens: []Entry{{Token: "0123456789abcdef", TokenSHA256: HashToken("x"), Tenant: "acme", Subject: "s"}}}, "not both"},
		{"bad hash", File{Tokens: []Entry{{TokenSHA256: "abc", Tenant: "acme", Subject: "s"}}}, "64 hex digits"},
		{"bad tenant", File{Tokens: []Entry{{Token: "0123456789abcdef", Tenant: "a b", Subject: "s"}}}, "tenant"},
		{"no subject", File{Tokens: []Entry{{Token: "0123456789abcdef", Tenant: "acme"}}}, "subject"},
		{"duplicate", File{Tokens: []Entry{good, good}}, "twice"},
		{"anonymous without tenant", File{Anonymous: &Identity{}}, "anonymous: tenant"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.f); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func TestBearerToken(t *testing.T) {
	for in, want := range map[string]string{"Bearer abc": "abc", "bearer abc": "abc", "Basic abc": "", "Bearer": "", "": "", "Bearer a b": ""} {
		if got := BearerToken(in); got != want {
			t.Errorf("BearerToken(%q) = %q, want %q", in, got, want)
		}
	}
}
