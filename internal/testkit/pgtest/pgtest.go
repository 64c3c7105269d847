// Package pgtest gives tests a real PostgreSQL: a fresh schema, migrated,
// on the database named by CARDEX_TEST_DATABASE_URL (PostgreSQL with
// pgvector: PGlite started by scripts/test, or any other such as the
// docker-compose one), or on the native PostgreSQL (no pgvector) named by
// CARDEX_TEST_NATIVE_PG_URL for what needs real sessions (LISTEN/NOTIFY).
//
// Without the variable a test is skipped with a message, except under
// CI=true, where it fails: CI must never pass by skipping the database.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/seed0cff8200/cardex/cards/postgres"
)

// Environment variables naming the test databases.
const (
	EnvURL       = "CARDEX_TEST_DATABASE_URL"
	EnvBulkURL   = "CARDEX_TEST_BULK_DATABASE_URL"
	EnvNativeURL = "CARDEX_TEST_NATIVE_PG_URL"
)

func lookup(t testing.TB, env, what string) string {
	t.Helper()
	if u := os.Getenv(env); u != "" {
		return u
	}
	msg := fmt.Sprintf("%s is not set: this test needs %s (./scripts/test starts one)", env, what)
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true: %s", msg)
	}
	t.Skip(msg)
	return ""
}

// URL is the pgvector test database's URL (skip or fail without it).
func URL(t testing.TB) string {
	return lookup(t, EnvURL, "PostgreSQL with pgvector")
}

// BulkURL is the database for tests that load thousands of cards and build
// HNSW indexes: a PGlite of their own under scripts/test (PGlite runs one
// statement at a time, so a 25-second index build would stall every other
// test), else the same as URL.
func BulkURL(t testing.TB) string {
	if u := os.Getenv(EnvBulkURL); u != "" {
		return u
	}
	return URL(t)
}

// NativeURL is the native PostgreSQL's URL (skip or fail without it).
func NativeURL(t testing.TB) string {
	return lookup(t, EnvNativeURL, "a native PostgreSQL (real sessions, LISTEN/NOTIFY)")
}

// NewSchemaName returns a schema name no other test uses.
func NewSchemaName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "cardex_test_" + hex.EncodeToString(b[:])
}

// Options tune Open.
type Options struct {
	URL        string // default URL(t)
	Schema     string // default a new schema, dropped at the end of the test
	MigrateTo  int64  // 0: every migration; 1: every one but those of the card vectors (versions 2, 9 and 10, pgvector), for native PG without it
	NoMigrate  bool
	MaxConns   int32
	KeepSchema bool // do not drop the schema at cleanup
}

// Open returns a store on a fresh, migrated schema of the test database,
// closed and dropped when the test ends.
func Open(t testing.TB, o Options) *postgres.Store {
	t.Helper()
	if o.URL == "" {
		o.URL = URL(t)
	}
	if o.Schema == "" {
		o.Schema = NewSchemaName()
	}
	if o.MaxConns == 0 {
		o.MaxConns = 4
	}
	s, err := postgres.Open(postgres.Config{URL: o.URL, Schema: o.Schema, MaxConns: o.MaxConns})
	if err != nil {
		t.Fatalf("postgres.Open: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if !o.KeepSchema {
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			if _, err := s.Pool().Exec(ctx, fmt.Sprintf(`DROP SCHEMA IF EXISTS %q CASCADE`, o.Schema)); err != nil {
				t.Logf("drop test schema %s: %v", o.Schema, err)
			}
			_ = s.Close()
		})
	} else {
		t.Cleanup(func() { _ = s.Close() })
	}
	if o.NoMigrate {
		return s
	}
	if o.MigrateTo != 1 {
		// pgvector lives in public, so every test schema sees the type.
		if _, err := s.Pool().Exec(ctx, `CREATE EXTENSION IF NOT EXISTS vector SCHEMA public`); err != nil {
			t.Fatalf("create extension vector: %v", err)
		}
	}
	migrate := func() ([]int64, error) { return s.MigrateTo(ctx, o.MigrateTo) }
	if o.MigrateTo == 1 {
		migrate = func() ([]int64, error) { return s.MigrateExcept(ctx, 2, 9, 10) }
	}
	if _, err := migrate(); err != nil {
		t.Fatalf("migrate %s: %v", o.Schema, err)
	}
	return s
}
