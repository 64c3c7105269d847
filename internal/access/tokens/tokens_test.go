package tokens

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
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
		{"unknown disclosure", File{Tokens: []Entry{with(good, func(e *Entry) { e.Disclosure = "all" })}}, `tokens[0]: disclosure "all": use progressive`},
		{"pins in full mode", File{Tokens: []Entry{with(good, func(e *Entry) { e.Disclosure = Full; e.AlwaysLoad = []string{"files/read_file"} })}}, "always_load is for progressive disclosure"},
		{"six pins", File{Tokens: []Entry{with(good, func(e *Entry) { e.AlwaysLoad = []string{"a/1", "a/2", "a/3", "a/4", "a/5", "a/6"} })}}, "always_load has 6 tools; the limit is 5"},
		{"pin without server", File{Tokens: []Entry{with(good, func(e *Entry) { e.AlwaysLoad = []string{"read_file"} })}}, `always_load[0] "read_file": write SERVER/NAME`},
		{"pin with a bad name", File{Tokens: []Entry{with(good, func(e *Entry) { e.AlwaysLoad = []string{"files/read file"} })}}, "write SERVER/NAME"},
		{"pin without a qualified name", File{Tokens: []Entry{with(good, func(e *Entry) { e.AlwaysLoad = []string{"my__files/read_file"} })}}, "no qualified name my__files__read_file"},
		{"pin twice", File{Tokens: []Entry{with(good, func(e *Entry) { e.AlwaysLoad = []string{"files/a", "files/a"} })}}, `always_load[1] "files/a" is listed twice`},
		{"anonymous pins in full mode", File{Anonymous: &Identity{Tenant: "acme", Disclosure: Full, AlwaysLoad: []string{"files/a"}}}, "anonymous: always_load is for progressive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := New(tc.f); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

func with(e Entry, f func(*Entry)) Entry {
	f(&e)
	return e
}

func TestDisclosure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens.yaml")
	body := `tokens:
  - token: pinned-token-0123456789
    tenant: acme
    subject: support-bot
    scopes: [files:read]
    always_load: [files/read_file, disk/stat]
  - token: full-token-0123456789
    tenant: acme
    subject: small-agent
    disclosure: full
anonymous: {tenant: acme, scopes: [docs:read], disclosure: full}
`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	tab, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := tab.Lookup("pinned-token-0123456789")
	if p.Disclosure != Progressive || p.Key != HashToken("pinned-token-0123456789") || len(p.Pins()) != 2 ||
		p.Pins()[1] != (cards.Key{Tenant: "acme", Server: "disk", Name: "stat"}) {
		t.Fatalf("pinned token: %+v, pins %v", p, p.Pins())
	}
	f, _ := tab.Lookup("full-token-0123456789")
	if f.Disclosure != Full || len(f.Pins()) != 0 || f.Key == p.Key {
		t.Fatalf("full token: %+v", f)
	}
	a, _ := tab.Anonymous()
	if a.Disclosure != Full || a.Key != AnonymousKey {
		t.Fatalf("anonymous: %+v", a)
	}
	// The key is the process's, never the file's.
	if err := os.WriteFile(path, []byte("tokens:\n  - {token: pinned-token-0123456789, tenant: acme, subject: s, key: x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); err == nil || !strings.Contains(err.Error(), "key") {
		t.Fatalf("a key in the file: %v", err)
	}
}

func TestBearerToken(t *testing.T) {
	for in, want := range map[string]string{"Bearer abc": "abc", "bearer abc": "abc", "Basic abc": "", "Bearer": "", "": "", "Bearer a b": ""} {
		if got := BearerToken(in); got != want {
			t.Errorf("BearerToken(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAuthenticate(t *testing.T) {
	bot := []Entry{{Token: "plain-token-0123456789", Tenant: "acme", Subject: "bot"}}
	closed, err := New(File{Tokens: bot})
	if err != nil {
		t.Fatal(err)
	}
	open, err := New(File{Tokens: bot, Anonymous: &Identity{Tenant: "acme", Subject: "anyone"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		table   *Table
		header  string
		subject string
		ok      bool
	}{
		{closed, "Bearer plain-token-0123456789", "bot", true},
		{closed, "bearer plain-token-0123456789", "bot", true},
		{closed, "Bearer wrong-token-0123456789", "", false},
		{closed, "plain-token-0123456789", "", false}, // no scheme
		{closed, "", "", false},
		{open, "", "anyone", true},
		{open, "Bearer wrong-token-0123456789", "", false}, // a wrong token is not anonymous
		{nil, "Bearer plain-token-0123456789", "", false},
	} {
		id, ok := tc.table.Authenticate(tc.header)
		if ok != tc.ok || id.Subject != tc.subject {
			t.Errorf("Authenticate(%q) = %+v %v, want subject %q %v", tc.header, id, ok, tc.subject, tc.ok)
		}
	}
}

func TestIdentityInContext(t *testing.T) {
	if _, ok := FromContext(t.Context()); ok {
		t.Error("an identity in a context that was given none")
	}
	want := Identity{Tenant: "acme", Subject: "bot", Scopes: []string{"orders:read"}}
	got, ok := FromContext(NewContext(t.Context(), want))
	if !ok || got.Tenant != want.Tenant || got.Subject != want.Subject || !slices.Equal(got.Scopes, want.Scopes) {
		t.Errorf("FromContext = %+v %v, want %+v", got, ok, want)
	}
}
