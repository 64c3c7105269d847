package sqlquery_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/seed0cff8200/cardex/internal/execution/sqlquery"
	"github.com/seed0cff8200/cardex/internal/execution/upstream"
	"github.com/seed0cff8200/cardex/internal/testkit/pgtest"
)

// BenchmarkQuery: one query through the gateway's executor (read-only
// transaction, cursor, normalisation to JSON, rollback) on the native
// PostgreSQL: a one-row lookup by key, and 1,000 rows of eight columns.
func BenchmarkQuery(b *testing.B) {
	url := pgtest.NativeURL(b)
	s := pgtest.Inventory(b, url)
	p := sqlquery.New(upstream.Config{Upstreams: []upstream.Upstream{{Server: "inv", SQL: &upstream.SQL{DatabaseURL: url}}}}, nil)
	defer p.Close()
	for _, bc := range []struct{ name, sql string }{
		{"one_row", `SELECT * FROM ` + s + `.service_owners WHERE service = :s`},
		{"1000_rows", `SELECT g AS id, r.* FROM generate_series(1, 1000) g, ` + s + `.running_releases r WHERE r.service = :s AND r.environment = 'production'`},
	} {
		args, _ := json.Marshal(map[string]any{"sql": bc.sql, "params": map[string]any{"s": "checkout"}})
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				res, err := p.Query(context.Background(), "acme", "inv", args)
				if err != nil || !res.Complete {
					b.Fatal(err, res.IncompleteReason)
				}
			}
		})
		// The same statement read directly with pgx (no transaction, no
		// cursor, values decoded to Go, not JSON), for comparison.
		b.Run(bc.name+"_pgx_direct", func(b *testing.B) {
			c, err := pgx.Connect(context.Background(), url)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close(context.Background())
			st, err := sqlquery.Parse(bc.sql)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				rows, err := c.Query(context.Background(), st.SQL, "checkout")
				if err != nil {
					b.Fatal(err)
				}
				for rows.Next() {
					if _, err := rows.Values(); err != nil {
						b.Fatal(err)
					}
				}
				rows.Close()
			}
		})
	}
}
