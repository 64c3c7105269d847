package upstream

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestSQLEntry(t *testing.T) {
	path := filepath.Join(t.TempDir(), "upstreams.yaml")
	body := `upstreams:
  - server: inventory
    sql:
      database_url: "postgres://reader:${INVENTORY_PASSWORD}@db.example/inventory"
      statement_timeout: 2s
      max_rows: 50
      reserved_params: {region: eu-west-1, shard: 3, live: true}
  - server: files
    command: [files-server]
`
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	u, ok := c.Find("acme", "inventory")
	if !ok || u.SQL == nil || u.SQL.Timeout() != 2*time.Second || u.SQL.RowLimit() != 50 || u.SQL.ByteLimit() != DefaultMaxBytes || u.SQL.PoolSize() != DefaultMaxConns {
		t.Fatalf("%+v", u)
	}
	vals, err := u.SQL.ReservedValues()
	if err != nil || vals["region"] != "eu-west-1" || vals["shard"] != "3" || vals["live"] != "true" {
		t.Fatalf("reserved %v %v", vals, err)
	}
	os.Unsetenv("INVENTORY_PASSWORD")
	if _, err := u.SQL.ConnString(); err == nil || !strings.Contains(err.Error(), "INVENTORY_PASSWORD is not set") {
		t.Fatalf("missing secret: %v", err)
	}
	t.Setenv("INVENTORY_PASSWORD", "pw")
	if s, err := u.SQL.ConnString(); err != nil || s != "postgres://reader:pw@db.example/inventory" {
		t.Fatalf("%q %v", s, err)
	}
	if _, err := u.Transport(); err == nil || !strings.Contains(err.Error(), "not an MCP server") {
		t.Fatalf("an sql entry has no MCP transport: %v", err)
	}

	for _, tc := range []struct {
		name string
		u    Upstream
		want string
	}{
		{"no url", Upstream{Server: "s", SQL: &SQL{}}, "database_url is required"},
		{"with url", Upstream{Server: "s", URL: "http://x", SQL: &SQL{DatabaseURL: "postgres://x"}}, "takes no url"},
		{"with timeout", Upstream{Server: "s", Timeout: Duration(time.Second), SQL: &SQL{DatabaseURL: "postgres://x"}}, "statement_timeout"},
		{"long timeout", Upstream{Server: "s", SQL: &SQL{DatabaseURL: "postgres://x", StatementTimeout: Duration(time.Hour)}}, "statement_timeout"},
		{"rows", Upstream{Server: "s", SQL: &SQL{DatabaseURL: "postgres://x", MaxRows: MaxMaxRows + 1}}, "max_rows"},
		{"bytes", Upstream{Server: "s", SQL: &SQL{DatabaseURL: "postgres://x", MaxBytes: MaxMaxBytes + 1}}, "max_bytes"},
		{"param name", Upstream{Server: "s", SQL: &SQL{DatabaseURL: "postgres://x", Reserved: map[string]ParamValue{"a-b": "1"}}}, "not a parameter name"},
	} {
		if err := tc.u.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	_ = os.WriteFile(bad, []byte("upstreams:\n  - server: s\n    sql: {database_url: x, reserved_params: {a: [1]}}\n"), 0o600)
	if _, err := LoadConfig(bad); err == nil || !strings.Contains(err.Error(), "string, number or boolean") {
		t.Fatalf("a list as a reserved value: %v", err)
	}
}
