package auth_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/internal/access/auth"
	"github.com/seed0cff8200/cardex/internal/access/tokens"
	"github.com/seed0cff8200/cardex/internal/testkit/pgtest"
)

// TestDBTokens: tokens kept in PostgreSQL (a real one, see pgtest) are
// stored hashed, accepted once read, refused once deleted and re-read; and
// with the table in use no service is open, even when it is empty.
func TestDBTokens(t *testing.T) {
	st := pgtest.Open(t, pgtest.Options{})
	ctx := context.Background()
	db, err := auth.NewDBTokens(ctx, st.Pool(), st.Schema())
	if err != nil {
		t.Fatal(err)
	}
	a := &auth.Authenticator{DB: db}
	if a.Open(auth.RoleDiscover) || a.Open(auth.RoleCatalog) {
		t.Fatal("an empty service_tokens table opened a service")
	}
	if _, err := a.Authenticate(ctx, "", auth.RoleCatalog); !errors.Is(err, auth.ErrNoCredential) {
		t.Fatalf("no token: %v", err)
	}
	const admin, bot = "db-admin-token-0123456789", "db-bot-token-0123456789"
	for _, e := range []auth.TokenEntry{
		{Name: "ops", Role: auth.RoleAdmin, TokenSHA256: tokens.HashToken(admin)},
		{Name: "bot", Role: auth.RoleDiscover, TokenSHA256: tokens.HashToken(bot), Caller: &auth.Binding{Tenant: "acme", Scopes: []string{"orders:read"}}},
	} {
		if err := auth.PutDBToken(ctx, st.Pool(), st.Schema(), e); err != nil {
			t.Fatal(err)
		}
	}
	if err := auth.PutDBToken(ctx, st.Pool(), st.Schema(), auth.TokenEntry{Name: "ops", Role: auth.RoleCatalog, TokenSHA256: tokens.HashToken("x")}); err == nil || !strings.Contains(err.Error(), "already") {
		t.Errorf("a second ops: %v", err)
	}
	if err := auth.PutDBToken(ctx, st.Pool(), st.Schema(), auth.TokenEntry{Name: "bad", Role: "root", TokenSHA256: tokens.HashToken("y")}); err == nil {
		t.Error("role root accepted")
	}
	var stored string
	if err := st.Pool().QueryRow(ctx, `SELECT string_agg(token_sha256, ',') FROM `+st.Schema()+`.service_tokens`).Scan(&stored); err != nil || strings.Contains(stored, admin) {
		t.Fatalf("stored %q, %v", stored, err)
	}
	// Not yet re-read: unknown.
	if _, err := a.Authenticate(ctx, admin, auth.RoleCatalog); !errors.Is(err, auth.ErrUnknownCredential) {
		t.Fatalf("before the re-read: %v", err)
	}
	if err := db.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if p, err := a.Authenticate(ctx, admin, auth.RoleCatalog); err != nil || p.Name != "ops" {
		t.Fatalf("admin from the database: %v %v", p, err)
	}
	p, err := a.Authenticate(ctx, bot, auth.RoleDiscover)
	if err != nil || p.Binding == nil || p.Binding.Tenant != "acme" || p.Binding.Scopes[0] != "orders:read" {
		t.Fatalf("bound token from the database: %+v %v", p, err)
	}
	if ok, err := auth.DeleteDBToken(ctx, st.Pool(), st.Schema(), "ops"); !ok || err != nil {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if err := db.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(ctx, admin, auth.RoleCatalog); !errors.Is(err, auth.ErrUnknownCredential) {
		t.Fatalf("a deleted token: %v", err)
	}
	if ok, _ := auth.DeleteDBToken(ctx, st.Pool(), st.Schema(), "ops"); ok {
		t.Error("deleted twice")
	}
}
