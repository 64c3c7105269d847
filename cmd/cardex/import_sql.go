package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/seed0cff8200/cardex/internal/execution/sqlquery"
	"github.com/seed0cff8200/cardex/internal/execution/upstream"
	"github.com/seed0cff8200/cardex/internal/sources/catalogsync"
	"github.com/seed0cff8200/cardex/internal/sources/sqlimport"
)

func importSQLCmd() *cobra.Command {
	var f importFlags
	var databaseURL, upstreamsFile, schemas string
	var tables bool
	cmd := &cobra.Command{
		Use:   "sql --database-url URL | --upstreams FILE --server NAME --tenant T [--schema a,b] [--tables]",
		Short: "Import a PostgreSQL database's views (and tables) as sql_view cards, and its query card",
		Long: `Reads the views and materialized views of --schema (and its tables with --tables) from pg_catalog,
and writes one sql_view card per relation, named schema.name, in the --server namespace: columns
with types and nullability, keys, foreign keys and the joins between the imported relations in the
output schema (under x-cardex-sql), and the descriptions kept with COMMENT ON (a view's comment says
what a row means; the summary says so when there is none). It also writes SERVER/query, the card
that runs a read-only SELECT on the database through the gateway; it requires the scopes of every
view card, since a query can read any of them.

Re-running is idempotent like 'import mcp': changed relations are updated, new ones created, vanished
ones revoked, curated fields kept; the whole change is one atomic write.

Import as the role the gateway will query with (a read-only one): relations it may not SELECT are
skipped, and what the role may do beyond reading (write WAL with pg_logical_emit_message, end or
cancel other sessions' queries, read pg_stat_activity, be a superuser) is listed as warnings with
the REVOKE that takes it away (role_check in -o json). With --upstreams FILE the database URL is the sql entry of --server in the upstreams file.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(); err != nil {
				return err
			}
			var reserved []string
			switch {
			case upstreamsFile != "" && databaseURL != "":
				return fmt.Errorf("give --database-url or --upstreams, not both")
			case upstreamsFile != "":
				cfg, err := upstream.LoadConfig(upstreamsFile)
				if err != nil {
					return err
				}
				u, ok := cfg.Find(f.tenant, f.server)
				if !ok || u.SQL == nil {
					return fmt.Errorf("%s: no sql upstream for server %q (tenant %q)", upstreamsFile, f.server, f.tenant)
				}
				if databaseURL, err = u.SQL.ConnString(); err != nil {
					return err
				}
				reserved = slices.Sorted(maps.Keys(u.SQL.Reserved))
			case databaseURL == "":
				return fmt.Errorf("--database-url or --upstreams is required: the database to import")
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.cf.timeout)
			defer cancel()
			rels, err := sqlimport.ReadURL(ctx, databaseURL, sqlimport.Options{Schemas: splitList(schemas), Tables: tables})
			if err != nil {
				return fmt.Errorf("nothing imported: %w", err)
			}
			fmt.Fprintf(os.Stderr, "read %d relations from schema %s\n", len(rels), schemas)
			views, skipped := sqlimport.ToCards(f.tenant, f.server, rels)
			// The gateway will query as this role: say what it may do beyond reading.
			findings, err := sqlquery.CheckRoleURL(ctx, databaseURL)
			if err != nil {
				return fmt.Errorf("check the role: %w", err)
			}
			for _, fd := range findings {
				fmt.Fprintf(os.Stderr, "warning: %s\n", fd)
			}
			f.roleCheck = &findings

			cat, ctx, done, stored, err := f.namespace(cmd)
			if err != nil {
				return err
			}
			defer done()
			plan, err := sqlimport.Plan(f.tenant, f.server, stored, views, skipped, reserved, catalogsync.Options{
				Scopes: splitList(f.scopes), OverrideScopes: f.overrideScopes, Reactivate: f.reactivate,
			})
			if err != nil {
				return err
			}
			if err := applyPlan(ctx, cat, &f, plan, skipped, nil); err != nil {
				return err
			}
			if err := enrichAfterImport(cmd, &f); err != nil {
				return err
			}
			if upstreamsFile == "" && !f.dryRun {
				fmt.Fprintf(os.Stderr, "for %s/%s to run queries, register the database in the upstreams file of 'cardex serve --upstreams' (with the URL of a read-only role):\n%s",
					f.server, sqlquery.QueryTool, sqlSnippet(f.server))
			}
			return nil
		},
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&databaseURL, "database-url", "", "PostgreSQL URL of the database to import (a read-only role)")
	fl.StringVar(&upstreamsFile, "upstreams", "", "take the database URL from this upstreams file's sql entry for --server")
	fl.StringVar(&schemas, "schema", "public", "schemas to import, comma-separated")
	fl.BoolVar(&tables, "tables", false, "import tables too, not only views and materialized views")
	return cmd
}

// sqlSnippet is an upstreams-file entry for a database (the URL as a
// variable to set: it holds a password).
func sqlSnippet(server string) string {
	v := strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(server)) + "_DATABASE_URL"
	return fmt.Sprintf("  - server: %s\n    sql:\n      database_url: \"${%s}\"   # set %s in cardex serve's environment\n"+
		"      statement_timeout: 10s\n      max_rows: 1000\n      max_bytes: 1048576\n", server, v, v)
}
