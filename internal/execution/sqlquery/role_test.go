package sqlquery_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/seed0cff8200/cardex/internal/execution/sqlquery"
	"github.com/seed0cff8200/cardex/internal/execution/upstream"
	"github.com/seed0cff8200/cardex/internal/testkit/pgtest"
)

func checkRole(t *testing.T, url string) []sqlquery.RoleFinding {
	t.Helper()
	ctx := context.Background()
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	fs, err := sqlquery.CheckRole(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	return fs
}

// TestRoleSetup: on PostgreSQL 15 an ordinary role, granted nothing but
// SELECT on the views, may write WAL that survives the rollback
// (pg_logical_emit_message), end or cancel the queries of other sessions of
// its role (pg_terminate_backend, pg_cancel_backend) and read their
// statements (pg_stat_activity), all through the query card. CheckRole
// finds each of them and says what to revoke; once an administrator has
// run that, the role is fit and the gateway's queries are refused by the
// database.
func TestRoleSetup(t *testing.T) {
	url := pgtest.NativeURL(t)
	if fs := checkRole(t, url); len(fs) != 1 || !strings.Contains(fs[0].What, "is a superuser") {
		t.Fatalf("the test's superuser: %v", fs)
	}
	s := schema(t, url, `CREATE TABLE S.t (a int); INSERT INTO S.t VALUES (1);`)
	role := s + "_reader"
	pgtest.Exec(t, url, `CREATE ROLE `+role+` LOGIN; GRANT USAGE ON SCHEMA `+s+` TO `+role+`; GRANT SELECT ON `+s+`.t TO `+role)
	t.Cleanup(func() { pgtest.Exec(t, url, `DROP OWNED BY `+role+`; DROP ROLE `+role) })
	readerURL := strings.Replace(url, "postgres://postgres@", "postgres://"+role+"@", 1)
	p := pools(t, readerURL, upstream.SQL{MaxConns: 2})

	// What the role may do through the query card, before.
	var lsn1, lsn2 string
	for _, sql := range []string{
		"SELECT pg_current_wal_lsn()::text AS lsn",
		"SELECT pg_logical_emit_message(false, 'cardex-test', repeat('x', 100000))::text AS lsn",
		"SELECT count(*) AS n FROM pg_stat_activity WHERE usename = current_user",
		"SELECT pg_cancel_backend(0) AS c",
	} {
		res, err := query(t, p, argsJSON(sql, nil))
		if err != nil {
			t.Fatalf("before the revokes, %s: %v", sql, err)
		}
		if strings.Contains(sql, "wal_lsn") {
			lsn1 = string(res.Rows)
		}
		if strings.Contains(sql, "emit") {
			lsn2 = string(res.Rows)
		}
	}
	if lsn1 == "" || lsn2 == "" || lsn1 == lsn2 {
		t.Fatalf("pg_logical_emit_message wrote nothing: %s %s", lsn1, lsn2)
	}

	fs := checkRole(t, readerURL)
	var what, fixes []string
	for _, f := range fs {
		if f.Role != role {
			t.Errorf("finding of role %q, want %q", f.Role, role)
		}
		what = append(what, f.What)
		fixes = append(fixes, f.Fix)
	}
	for _, want := range []string{
		"REVOKE EXECUTE ON FUNCTION pg_catalog.pg_logical_emit_message(boolean,text,text) FROM PUBLIC;",
		"REVOKE EXECUTE ON FUNCTION pg_catalog.pg_logical_emit_message(boolean,text,bytea) FROM PUBLIC;",
		"REVOKE EXECUTE ON FUNCTION pg_catalog.pg_terminate_backend(integer,bigint) FROM PUBLIC;",
		"REVOKE EXECUTE ON FUNCTION pg_catalog.pg_cancel_backend(integer) FROM PUBLIC;",
		"REVOKE EXECUTE ON FUNCTION pg_catalog.pg_stat_get_activity(integer) FROM PUBLIC;",
		"REVOKE SELECT ON pg_catalog.pg_stat_activity FROM PUBLIC;",
	} {
		if !slices.Contains(fixes, want) {
			t.Errorf("no finding fixed by %s:\n%s", want, strings.Join(what, "\n"))
		}
	}
	if len(fs) != 6 {
		t.Errorf("%d findings, want 6:\n%s", len(fs), strings.Join(what, "\n"))
	}
	// A predefined role that signals is found too.
	pgtest.Exec(t, url, `GRANT pg_signal_backend TO `+role)
	if fs := checkRole(t, readerURL); !slices.ContainsFunc(fs, func(f sqlquery.RoleFinding) bool { return f.Fix == "REVOKE pg_signal_backend FROM "+`"`+role+`";` }) {
		t.Errorf("pg_signal_backend membership not found: %v", fs)
	}
	pgtest.Exec(t, url, `REVOKE pg_signal_backend FROM `+role)

	// The administrator runs the fixes (undone at the end: the test
	// database is shared).
	pgtest.Exec(t, url, strings.Join(fixes, "\n"))
	t.Cleanup(func() {
		pgtest.Exec(t, url, strings.NewReplacer("REVOKE", "GRANT", " FROM PUBLIC", " TO PUBLIC").Replace(strings.Join(fixes, "\n")))
	})
	if fs := checkRole(t, readerURL); len(fs) != 0 {
		t.Fatalf("after the fixes: %v", fs)
	}
	for _, sql := range []string{
		"SELECT pg_logical_emit_message(false, 'cardex-test', 'x')::text AS lsn",
		"SELECT pg_terminate_backend(pid) AS t FROM pg_stat_activity",
		"SELECT pg_cancel_backend(0) AS c",
	} {
		_, err := query(t, p, argsJSON(sql, nil))
		var se *sqlquery.SQLError
		if !errors.As(err, &se) || !strings.Contains(se.Error(), "permission denied") {
			t.Errorf("after the fixes, %s: %v, want permission denied", sql, err)
		}
	}
	if res, err := query(t, p, argsJSON("SELECT a FROM "+s+".t", nil)); err != nil || string(res.Rows) != `[{"a":1}]` {
		t.Fatalf("the role still reads its views: %v %s", err, res.Rows)
	}
}

// TestCheckRolesAtStart: serve checks every SQL upstream's role at start
// and logs each finding, with its fix.
func TestCheckRolesAtStart(t *testing.T) {
	url := pgtest.NativeURL(t)
	var logs strings.Builder
	cfg := upstream.Config{Upstreams: []upstream.Upstream{{Server: "inv", SQL: &upstream.SQL{DatabaseURL: url}}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	p := sqlquery.New(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	defer p.Close()
	got := p.CheckRoles(context.Background())
	if len(got["inv"]) != 1 || !strings.Contains(logs.String(), `level=WARN msg="sql upstream: the query role may do more than read" server=inv`) ||
		!strings.Contains(logs.String(), "fix=") {
		t.Fatalf("findings %v, logs:\n%s", got, logs.String())
	}
}
