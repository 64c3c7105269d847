package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Inventory loads the README's example database (examples/sql/inventory.sql)
// into a schema of its own on the database at url and returns the schema's
// name; the schema is dropped when the test ends. The file names its schema
// "inventory" only as "CREATE SCHEMA inventory" and "inventory." prefixes,
// which are renamed, so tests sharing a database do not collide.
func Inventory(t testing.TB, url string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	var body []byte
	for {
		body, err = os.ReadFile(filepath.Join(dir, "examples", "sql", "inventory.sql"))
		if err == nil {
			break
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("examples/sql/inventory.sql not found above the test directory")
		}
		dir = parent
	}
	var b [5]byte
	_, _ = rand.Read(b[:])
	schema := "inv_" + hex.EncodeToString(b[:])
	sql := strings.ReplaceAll(string(body), "CREATE SCHEMA inventory", "CREATE SCHEMA "+schema)
	sql = strings.ReplaceAll(sql, "inventory.", schema+".")
	Exec(t, url, sql)
	t.Cleanup(func() {
		if err := runSQL(url, "DROP SCHEMA IF EXISTS "+schema+" CASCADE"); err != nil {
			t.Logf("drop %s: %v", schema, err)
		}
	})
	return schema
}

// Exec runs SQL (several statements allowed) on the database at url.
func Exec(t testing.TB, url, sql string) {
	t.Helper()
	if err := runSQL(url, sql); err != nil {
		t.Fatalf("%.80s...: %v", sql, err)
	}
}

func runSQL(url, sql string) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	// The simple protocol runs a script of several statements.
	_, err = c.PgConn().Exec(ctx, sql).ReadAll()
	return err
}
