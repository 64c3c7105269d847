package sqlquery

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// A READ ONLY transaction that is always rolled back stops every write a
// query could make to tables, but not everything a function may do: some
// built-in functions act outside the transaction, and PostgreSQL lets every
// role (PUBLIC) run them. The role the gateway queries with must not:
// CheckRole finds what it may, and says what to revoke.

// riskyFunctions are the built-in functions (every overload, in
// pg_catalog) that a query can call with a lasting effect beyond its
// rolled-back transaction, and what that effect is.
var riskyFunctions = []struct{ name, effect string }{
	{"pg_logical_emit_message", "writes to the write-ahead log, which a rollback does not undo (megabytes a call)"},
	{"pg_terminate_backend", "ends other sessions of the same role: other callers' queries"},
	{"pg_cancel_backend", "cancels the queries of other sessions of the same role"},
	{"pg_stat_get_activity", "shows the statements that other sessions of the same role are running (behind pg_stat_activity)"},
}

// riskyRoles are predefined roles a query role must not be a member of (a
// query can SET ROLE to one with set_config).
var riskyRoles = []struct{ name, effect string }{
	{"pg_signal_backend", "may cancel or end any other session's queries"},
	{"pg_write_all_data", "may write every table (outside a READ ONLY transaction)"},
	{"pg_write_server_files", "may write files on the database server"},
	{"pg_read_server_files", "may read files on the database server"},
	{"pg_execute_server_program", "may run programs on the database server"},
}

// RoleFinding is one thing the query role may do that it must not.
type RoleFinding struct {
	// Role is the role checked (the connection's current_user).
	Role string `json:"role"`
	// What the role may do, and why it matters.
	What string `json:"what"`
	// Fix is the SQL an administrator runs to take it away.
	Fix string `json:"fix"`
}

// String is the finding as one line for a person.
func (f RoleFinding) String() string {
	return fmt.Sprintf("role %s %s; as an administrator run: %s", f.Role, f.What, f.Fix)
}

// Querier is a connection or a pool.
type Querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// CheckRole lists what the connection's role may do that a query role must
// not: be a superuser or a replication role, belong to a predefined role
// that writes, signals or reaches the server's files, or run a function of
// riskyFunctions (or read pg_stat_activity). An empty list means the role is
// fit for the gateway.
func CheckRole(ctx context.Context, q Querier) ([]RoleFinding, error) {
	var role string
	var super, replication bool
	if err := queryRow(ctx, q, `SELECT current_user, rolsuper, rolreplication FROM pg_catalog.pg_roles WHERE rolname = current_user`,
		nil, &role, &super, &replication); err != nil {
		return nil, fmt.Errorf("read the query role: %w", err)
	}
	quoted := pgx.Identifier{role}.Sanitize()
	var out []RoleFinding
	add := func(what, fix string) { out = append(out, RoleFinding{Role: role, What: what, Fix: fix}) }
	if super {
		// A superuser may do anything a function can: the rest is moot.
		add("is a superuser: it may write and signal whatever the transaction's READ ONLY leaves out",
			fmt.Sprintf("CREATE ROLE <reader> LOGIN PASSWORD '...'; GRANT USAGE ON SCHEMA <schema> TO <reader>; GRANT SELECT ON <the views> TO <reader>; -- and query as <reader>, not %s", quoted))
		return out, nil
	}
	if replication {
		add("is a replication role: it may create replication slots, which hold write-ahead log on the server",
			fmt.Sprintf("ALTER ROLE %s NOREPLICATION;", quoted))
	}
	for _, r := range riskyRoles {
		var member bool
		if err := queryRow(ctx, q, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1) AND pg_catalog.pg_has_role(current_user, $1, 'MEMBER')`,
			[]any{r.name}, &member); err != nil {
			return nil, fmt.Errorf("read the query role's memberships: %w", err)
		}
		if member {
			add(fmt.Sprintf("is a member of %s: it %s", r.name, r.effect), fmt.Sprintf("REVOKE %s FROM %s;", r.name, quoted))
		}
	}
	for _, f := range riskyFunctions {
		rows, err := q.Query(ctx, `SELECT p.oid::regprocedure::text,
			p.proacl IS NULL OR EXISTS (SELECT 1 FROM pg_catalog.aclexplode(p.proacl) a WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE')
			FROM pg_catalog.pg_proc p
			WHERE p.pronamespace = 'pg_catalog'::regnamespace AND p.proname = $1 AND pg_catalog.has_function_privilege(p.oid, 'EXECUTE')
			ORDER BY 1`, f.name)
		if err != nil {
			return nil, fmt.Errorf("read the query role's function privileges: %w", err)
		}
		var sigs []string
		var public []bool
		for rows.Next() {
			var sig string
			var pub bool
			if err := rows.Scan(&sig, &pub); err != nil {
				rows.Close()
				return nil, err
			}
			sigs, public = append(sigs, sig), append(public, pub)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, err
		}
		for i, sig := range sigs {
			from := quoted
			if public[i] {
				// Granted to every role: revoke it from PUBLIC, and grant it
				// back to the roles that need it (a monitoring role, say).
				from = "PUBLIC"
			}
			add(fmt.Sprintf("may execute pg_catalog.%s, which %s", sig, f.effect),
				fmt.Sprintf("REVOKE EXECUTE ON FUNCTION pg_catalog.%s FROM %s;", sig, from))
		}
	}
	var activity bool
	if err := queryRow(ctx, q, `SELECT pg_catalog.has_table_privilege('pg_catalog.pg_stat_activity', 'SELECT')`, nil, &activity); err != nil {
		return nil, fmt.Errorf("read the query role's privileges: %w", err)
	}
	if activity {
		add("may read pg_catalog.pg_stat_activity, the statements of other sessions of the same role",
			"REVOKE SELECT ON pg_catalog.pg_stat_activity FROM PUBLIC;")
	}
	return out, nil
}

func queryRow(ctx context.Context, q Querier, sql string, args []any, dest ...any) error {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return err
	}
	_, err = pgx.ForEachRow(rows, dest, func() error { return nil })
	return err
}

// CheckRoles checks the role of every SQL upstream (connecting as the
// gateway will) and logs each finding as a warning, with what to revoke (a
// database it cannot reach is logged too). It returns the findings by
// server.
func (p *Pools) CheckRoles(ctx context.Context) map[string][]RoleFinding {
	out := map[string][]RoleFinding{}
	for _, u := range p.cfg.Upstreams {
		if u.SQL == nil {
			continue
		}
		pl, err := p.pool(u)
		if err != nil {
			p.log.Warn("sql upstream: cannot check its role", "server", u.Server, "tenant", u.Tenant, "err", err)
			continue
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		fs, err := CheckRole(cctx, pl.p)
		cancel()
		if err != nil {
			p.log.Warn("sql upstream: cannot check its role", "server", u.Server, "tenant", u.Tenant, "err", err)
			continue
		}
		for _, f := range fs {
			p.log.Warn("sql upstream: the query role may do more than read", "server", u.Server, "tenant", u.Tenant,
				"role", f.Role, "what", f.What, "fix", f.Fix)
		}
		if len(fs) == 0 {
			p.log.Info("sql upstream: the query role may only read", "server", u.Server, "tenant", u.Tenant)
		}
		out[u.Server] = fs
	}
	return out
}

// CheckRoleURL checks the role of the database URL (as CheckRole).
func CheckRoleURL(ctx context.Context, url string) ([]RoleFinding, error) {
	c, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, connectError(err)
	}
	defer c.Close(context.Background())
	return CheckRole(ctx, c)
}
