package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/codec/apiconv"
	"github.com/seed0cff8200/cardex/internal/codec/cardjson"
	"github.com/seed0cff8200/cardex/internal/execution/sqlquery"
	"github.com/seed0cff8200/cardex/internal/execution/upstream"
	"github.com/seed0cff8200/cardex/internal/ops/buildinfo"
	"github.com/seed0cff8200/cardex/internal/sources/catalogsync"
	"github.com/seed0cff8200/cardex/internal/sources/mcpimport"
	"github.com/seed0cff8200/cardex/internal/sources/openapiimport"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

func importCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "import", Short: "Import cards from an MCP server's tools or an OpenAPI document"}
	cmd.AddCommand(importMCPCmd(), importOpenAPICmd())
	cmd.AddCommand(importSQLCmd()) // import_sql.go
	return cmd
}

// importFlags are shared by both importers.
type importFlags struct {
	cf                                 clientFlags
	tenant, server, scopes             string
	overrideScopes, reactivate, dryRun bool
	enrich                             bool
	llm                                llmFlags // enrich.go
	// serverOptional: the source may name the servers (import mcp
	// --from-file).
	serverOptional bool
	// roleCheck is what an SQL import found its role may do beyond
	// reading (nil for other imports).
	roleCheck *[]sqlquery.RoleFinding
}

func (f *importFlags) register(cmd *cobra.Command) {
	f.cf.register(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.tenant, "tenant", os.Getenv("CARDEX_TENANT"), "tenant the cards belong to (env CARDEX_TENANT)")
	fl.StringVar(&f.server, "server", "", "server namespace of the cards (required)")
	fl.StringVar(&f.scopes, "scopes", "", "required scopes of new cards, comma-separated (without it, a tool whose source names no scope requires SERVER:read when read-only, SERVER:admin when destructive, SERVER:write otherwise)")
	fl.BoolVar(&f.overrideScopes, "override-scopes", false, "set --scopes (or the default) on existing cards too (by default they keep theirs)")
	fl.BoolVar(&f.reactivate, "reactivate", false, "reactivate revoked cards whose tool is back (by default they stay revoked)")
	fl.BoolVar(&f.dryRun, "dry-run", false, "show the changes without writing them")
	fl.BoolVar(&f.enrich, "enrich", false, "then write search examples for the namespace's cards that lack current ones, with --llm-url and --llm-model (see 'cardex enrich')")
	f.llm.register(cmd)
}

func (f *importFlags) check() error {
	if err := requireTenant(f.tenant); err != nil {
		return err
	}
	if !cards.ValidName(f.server) && !(f.serverOptional && f.server == "") {
		return usageError("--server is required ([A-Za-z0-9_.-]{1,128}): the namespace of the imported cards")
	}
	if err := cards.CheckServer("--server", f.server); err != nil {
		return usageError("%v", err)
	}
	if f.enrich {
		if err := f.llm.check(); err != nil {
			return err
		}
	}
	return f.cf.check()
}

func importMCPCmd() *cobra.Command {
	var f importFlags
	var headers, env []string
	var command, upstreamsFile, fromFile, serversFile string
	cmd := &cobra.Command{
		Use:   "mcp [URL] --server NAME --tenant T [--header 'K: V'] | --command 'CMD ARGS' | --upstreams FILE | --from-file FILE [--servers FILE]",
		Short: "Import an MCP server's tools (all tools/list pages) as mcp_tool cards; vanished tools are revoked",
		Long: `Connects to an MCP server (streamable HTTP URL, or a stdio command), reads tools/list to the last
page and turns each tool into a card of kind mcp_tool in the --server namespace. Re-running is
idempotent: changed tools are updated, new ones created, vanished ones revoked (not deleted). The
whole change is one atomic write; a server that fails part-way through the listing changes nothing.

With --upstreams FILE the connection (URL and headers, or command and env) is read from the entry
for --server in the same upstreams file that 'cardex serve --upstreams' uses. Header and env values
may name environment variables as ${VAR}.

With --from-file FILE the tools are read from a file instead of a live server: a saved tools/list
result (JSON; its tools go to --server), or a JSON Lines catalogue with one tool a line, each
naming its server ({"server", "tool_name", "description", "input_schema"}, as in
../shared/eval/*/tools.jsonl; a line without a server goes to --server). --servers FILE adds
the server entries, one a line ({"server", "title", "description"}). Every server namespace of
the file is imported with the rules above (a server's vanished tools are revoked; the tenant's
other servers are left alone); the cards are written in atomic batches of up to 1,000 that never
split a server, then the server entries. Progress goes to stderr; a rerun reports every card and
entry unchanged.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if fromFile != "" {
				if len(args) > 0 || command != "" || upstreamsFile != "" || len(headers) > 0 || len(env) > 0 {
					return usageError("--from-file reads the tools from the file: give no URL, --command, --upstreams, --header or --env")
				}
				f.serverOptional = true
				if err := f.check(); err != nil {
					return err
				}
				return importFromFile(cmd, &f, fromFile, serversFile)
			}
			if serversFile != "" {
				return usageError("--servers goes with --from-file")
			}
			if err := f.check(); err != nil {
				return err
			}
			u := upstream.Upstream{Server: f.server}
			if upstreamsFile != "" {
				if len(args) > 0 || command != "" || len(headers) > 0 || len(env) > 0 {
					return usageError("--upstreams takes the connection from the file: give no URL, --command, --header or --env")
				}
				cfg, err := upstream.LoadConfig(upstreamsFile)
				if err != nil {
					return err
				}
				found, ok := cfg.Find(f.tenant, f.server)
				if !ok {
					return fmt.Errorf("%s: no upstream for server %q (tenant %q)", upstreamsFile, f.server, f.tenant)
				}
				u = found
			} else {
				if len(args) > 0 {
					u.URL = args[0]
				}
				words, err := splitCommand(command)
				if err != nil {
					return usageError("--command: %v", err)
				}
				u.Command = words
				for _, h := range headers {
					k, v, ok := strings.Cut(h, ":")
					if !ok {
						return usageError("--header %q: write 'Name: value'", h)
					}
					if u.Headers == nil {
						u.Headers = map[string]string{}
					}
					u.Headers[strings.TrimSpace(k)] = strings.TrimSpace(v)
				}
				for _, e := range env {
					k, v, ok := strings.Cut(e, "=")
					if !ok {
						return usageError("--env %q: write NAME=value", e)
					}
					if u.Env == nil {
						u.Env = map[string]string{}
					}
					u.Env[k] = v
				}
			}
			tr, err := u.Transport()
			if err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.cf.timeout)
			defer cancel()
			cs, err := upstream.NewClient(buildinfo.Version()).Connect(ctx, tr, nil)
			if err != nil {
				return fmt.Errorf("connect to the MCP server: %w", err)
			}
			tools, pages, err := mcpimport.ListAll(ctx, cs)
			entry, hasEntry := mcpimport.ServerInfo(f.tenant, f.server, cs.InitializeResult())
			cs.Close()
			if err != nil {
				return fmt.Errorf("nothing imported: %w", err)
			}
			fmt.Fprintf(os.Stderr, "read %d tools in %d tools/list pages\n", len(tools), pages)
			imported, skipped := mcpimport.ToCards(f.tenant, f.server, tools)
			if err := runImport(cmd, &f, cards.KindMCPTool, imported, skipped, serverEntry(entry, hasEntry)); err != nil {
				return err
			}
			if upstreamsFile == "" && !f.dryRun {
				fmt.Fprintf(os.Stderr, "for call_tool to reach these tools, register the server in the upstreams file of 'cardex serve --upstreams':\n%s", upstreamSnippet(u))
			}
			return nil
		},
	}
	f.register(cmd)
	fl := cmd.Flags()
	fl.StringArrayVar(&headers, "header", nil, "HTTP header for the server, 'Name: value' (repeatable; ${VAR} is expanded)")
	fl.StringVar(&command, "command", "", "run a stdio MCP server: the command line, split into words like a shell does ('quotes' and \\ escapes; nothing expanded)")
	fl.StringArrayVar(&env, "env", nil, "environment for --command, NAME=value (repeatable; ${VAR} is expanded)")
	fl.StringVar(&upstreamsFile, "upstreams", "", "take the connection from this upstreams file's entry for --server")
	fl.StringVar(&fromFile, "from-file", "", "read the tools from a file: a saved tools/list result (JSON) or a JSON Lines catalogue, one tool a line")
	fl.StringVar(&serversFile, "servers", "", "with --from-file: server entries, one a line (server, title, description)")
	return cmd
}

func importOpenAPICmd() *cobra.Command {
	var f importFlags
	cmd := &cobra.Command{
		Use:   "openapi SPEC --server NAME --tenant T",
		Short: "Import an OpenAPI 3.x document (file or URL, YAML or JSON) as rest_operation cards",
		Long: `One card per operation: operationId as name, summary and description, path, query and body
parameters folded into one input schema (each property records its location under x-cardex-in),
the first 2xx JSON response as output schema, and the OAuth 2 / OpenID Connect scopes of the
operation's security requirements as required scopes (plus --scopes). Re-import is idempotent and
revokes operations that vanished, like 'import mcp'.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(); err != nil {
				return err
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), f.cf.timeout)
			defer cancel()
			doc, err := openapiimport.Load(ctx, args[0])
			if err != nil {
				return err
			}
			imported, skipped, err := openapiimport.ToCards(doc, f.tenant, f.server)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stderr, "read %d operations from %s\n", len(imported)+len(skipped), args[0])
			entry, hasEntry := openapiimport.ServerInfo(doc, f.tenant, f.server)
			if err := runImport(cmd, &f, cards.KindRESTOperation, imported, skipped, serverEntry(entry, hasEntry)); err != nil {
				return err
			}
			if !f.dryRun {
				u, relative := openapiimport.Upstream(doc, args[0], f.server)
				fmt.Fprintf(os.Stderr, "for call_tool to reach these operations, register the API in the upstreams file of 'cardex serve --upstreams':\n%s", upstreamSnippet(u))
				if relative {
					fmt.Fprintf(os.Stderr, "  (the document's server %q is relative: write the API's scheme and host in base_url)\n", u.BaseURL)
				}
			}
			return nil
		},
	}
	f.register(cmd)
	return cmd
}

// upstreamSnippet is an upstreams-file entry for u; header and environment
// values that are not ${VAR} references are not printed.
func upstreamSnippet(u upstream.Upstream) string {
	var b strings.Builder
	fmt.Fprintf(&b, "  - server: %s\n", u.Server)
	if u.UpstreamKind() == upstream.REST {
		fmt.Fprintf(&b, "    kind: %s\n    base_url: %s\n", upstream.REST, u.BaseURL)
	}
	// entry prints one header or environment entry; a literal value (a
	// secret, most likely) becomes a ${VAR} reference to set instead.
	entry := func(k, v string) {
		if strings.Contains(v, "${") && strings.HasSuffix(v, "}") {
			fmt.Fprintf(&b, "      %s: %q\n", k, v)
			return
		}
		ref := "${" + strings.ToUpper(strings.NewReplacer("-", "_", ".", "_").Replace(k)) + "}"
		fmt.Fprintf(&b, "      %s: %q   # set %s in cardex serve's environment\n", k, ref, ref[2:len(ref)-1])
	}
	if u.URL != "" || u.BaseURL != "" {
		if u.URL != "" {
			fmt.Fprintf(&b, "    url: %s\n", u.URL)
		}
		if len(u.Headers) > 0 {
			b.WriteString("    headers:\n")
			for _, k := range slices.Sorted(maps.Keys(u.Headers)) {
				entry(k, u.Headers[k])
			}
		}
	} else {
		q := make([]string, len(u.Command))
		for i, a := range u.Command {
			q[i] = strconv.Quote(a)
		}
		fmt.Fprintf(&b, "    command: [%s]\n", strings.Join(q, ", "))
		if len(u.Env) > 0 {
			b.WriteString("    env:\n")
			for _, k := range slices.Sorted(maps.Keys(u.Env)) {
				entry(k, u.Env[k])
			}
		}
	}
	return b.String()
}

func serverEntry(si cards.ServerInfo, ok bool) *cards.ServerInfo {
	if !ok {
		return nil
	}
	return &si
}

// grpcCatalog is the catalogue of a running server, through CatalogService.
type grpcCatalog struct{ c pb.CatalogServiceClient }

func (g grpcCatalog) GetServer(ctx context.Context, tenant, name string) (cards.ServerInfo, error) {
	resp, err := g.c.ListServers(ctx, &pb.ListServersRequest{Tenant: tenant, Name: name})
	if status.Code(err) == codes.NotFound {
		return cards.ServerInfo{}, fmt.Errorf("server %s: %w", name, cards.ErrNotFound)
	}
	if err != nil {
		return cards.ServerInfo{}, err
	}
	if len(resp.Servers) != 1 {
		return cards.ServerInfo{}, fmt.Errorf("server %s: the server answered %d entries", name, len(resp.Servers))
	}
	return apiconv.ServerInfoFromProto(resp.Servers[0]), nil
}

func (g grpcCatalog) PutServers(ctx context.Context, ss []cards.ServerInfo) error {
	req := &pb.PutServersRequest{}
	for i := range ss {
		req.Servers = append(req.Servers, apiconv.ServerInfoToProto(&ss[i]))
	}
	_, err := g.c.PutServers(ctx, req)
	return err
}

func (g grpcCatalog) List(ctx context.Context, tenant, server string) ([]cards.Card, error) {
	var out []cards.Card
	req := &pb.ListCardsRequest{Tenant: tenant, Server: server, PageSize: 100, IncludeSchemas: true}
	for {
		resp, err := g.c.ListCards(ctx, req)
		if err != nil {
			return nil, err
		}
		for _, p := range resp.Cards {
			out = append(out, apiconv.CardFromProto(p))
		}
		if resp.NextCursor == "" {
			return out, nil
		}
		req.Cursor = resp.NextCursor
	}
}

func (g grpcCatalog) Put(ctx context.Context, cs []cards.Card) error {
	req := &pb.PutCardsRequest{}
	for i := range cs {
		req.Cards = append(req.Cards, apiconv.CardToProto(&cs[i], true))
	}
	_, err := g.c.PutCards(ctx, req)
	return err
}

// namespace connects to the server and reads the cards of the import's
// namespace (--tenant, --server): the catalogue, the context of its calls,
// done (which ends both) and the stored cards.
func (f *importFlags) namespace(cmd *cobra.Command) (grpcCatalog, context.Context, func(), []cards.Card, error) {
	client, ctx, done, err := f.cf.catalog(cmd)
	if err != nil {
		return grpcCatalog{}, nil, nil, nil, err
	}
	cat := grpcCatalog{c: client}
	stored, err := cat.List(ctx, f.tenant, f.server)
	if err != nil {
		done()
		return grpcCatalog{}, nil, nil, nil, fmt.Errorf("read the %s/%s cards: %w", f.tenant, f.server, err)
	}
	return cat, ctx, done, stored, nil
}

// runImport diffs the imported cards against the server's namespace, writes
// the change in one atomic PutCards (unless --dry-run) and reports it. The
// server entry the source describes (entry, when not nil) is diffed too
// and written right after the cards, in a PutServers of its own.
func runImport(cmd *cobra.Command, f *importFlags, kind cards.Kind, imported []cards.Card, skipped []mcpimport.Skipped, entry *cards.ServerInfo) error {
	cat, ctx, done, stored, err := f.namespace(cmd)
	if err != nil {
		return err
	}
	defer done()
	// Skipped tools are still on the server: their cards are not revoked.
	keep := make([]string, 0, len(skipped))
	for _, s := range skipped {
		keep = append(keep, s.Name)
	}
	plan, err := catalogsync.Diff(f.tenant, f.server, stored, imported, catalogsync.Options{
		Kind: kind, Scopes: splitList(f.scopes), OverrideScopes: f.overrideScopes, Reactivate: f.reactivate, Keep: keep,
	})
	if err != nil {
		return err
	}
	var sch *catalogsync.ServerChange
	if entry != nil {
		c, err := catalogsync.PlanServer(ctx, cat, *entry)
		if err != nil {
			return err
		}
		sch = &c
	}
	if err := applyPlan(ctx, cat, f, plan, skipped, sch); err != nil {
		return err
	}
	return enrichAfterImport(cmd, f)
}

// importCatalog is where an import writes: cards and server entries.
type importCatalog interface {
	catalogsync.Catalog
	catalogsync.ServerCatalog
}

// applyPlan writes an import's plan in one atomic PutCards (unless
// --dry-run), then the server entry's change (sch, when not nil) in a
// PutServers of its own, and reports both.
func applyPlan(ctx context.Context, cat importCatalog, f *importFlags, plan catalogsync.Plan, skipped []mcpimport.Skipped, sch *catalogsync.ServerChange) error {
	sc := scopingOf(plan)
	sc.print(f)
	if !f.dryRun {
		if err := catalogsync.Apply(ctx, cat, plan); err != nil {
			return fmt.Errorf("nothing written: %w", err)
		}
		if sch != nil {
			if err := catalogsync.ApplyServer(ctx, cat, *sch); err != nil {
				return err
			}
		}
	}
	for _, s := range skipped {
		fmt.Fprintf(os.Stderr, "skipped %s: %s\n", s.Name, s.Reason)
	}
	counts := map[string]int{
		"created":      plan.Count(catalogsync.Create),
		"updated":      plan.Count(catalogsync.Update),
		"revoked":      plan.Count(catalogsync.Revoke),
		"unchanged":    plan.Count(catalogsync.Unchanged),
		"reactivated":  plan.Count(catalogsync.Reactivate),
		"kept_revoked": plan.Count(catalogsync.KeptRevoked),
		"skipped":      len(skipped),
	}
	if f.cf.output == "json" {
		type change struct {
			Action string `json:"action"`
			// Card is the card as it is (unchanged, kept revoked) or as it
			// will be written, in the one JSON shape of a card.
			Card   cardjson.Card `json:"card"`
			Fields []string      `json:"fields,omitempty"`
		}
		type serverChange struct {
			Action      string   `json:"action"`
			Title       string   `json:"title,omitempty"`
			Description string   `json:"description,omitempty"`
			Fields      []string `json:"fields,omitempty"`
		}
		out := struct {
			Tenant      string                  `json:"tenant"`
			Server      string                  `json:"server"`
			DryRun      bool                    `json:"dry_run"`
			Changes     []change                `json:"changes"`
			Counts      map[string]int          `json:"counts"`
			Skipped     []mcpimport.Skipped     `json:"skipped,omitempty"`
			ServerEntry *serverChange           `json:"server_entry,omitempty"`
			Scoping     scoping                 `json:"scoping"`
			RoleCheck   *[]sqlquery.RoleFinding `json:"role_check,omitempty"`
		}{Tenant: f.tenant, Server: f.server, DryRun: f.dryRun, Counts: counts, Skipped: skipped, Changes: []change{}, Scoping: sc, RoleCheck: f.roleCheck}
		for _, c := range plan.Changes {
			out.Changes = append(out.Changes, change{Action: string(c.Action), Card: cardjson.From(&c.Card), Fields: c.Fields})
		}
		if sch != nil {
			out.ServerEntry = &serverChange{Action: string(sch.Action), Title: sch.Entry.Title, Description: sch.Entry.Description, Fields: sch.Fields}
		}
		return printPlainJSON(out)
	}
	rows := make([][]string, 0, len(plan.Changes)+1)
	if sch != nil {
		v := strconv.FormatInt(sch.Entry.Version, 10)
		if sch.Action == catalogsync.Create {
			v = "-"
		}
		rows = append(rows, []string{string(sch.Action), f.server, "(server entry)", v, strings.Join(sch.Fields, ",")})
	}
	for _, c := range plan.Changes {
		v := strconv.FormatInt(c.Card.Version, 10)
		if c.Action == catalogsync.Create {
			v = "-"
		}
		rows = append(rows, []string{string(c.Action), c.Card.Server, c.Card.Name, v, strings.Join(c.Fields, ",")})
	}
	if err := table([]string{"ACTION", "SERVER", "NAME", "VERSION", "CHANGED"}, rows); err != nil {
		return err
	}
	printImportCounts("\n"+dryRunVerb(f), counts, "on the server")
	return nil
}

// dryRunVerb starts an import's counts line under --dry-run.
func dryRunVerb(f *importFlags) string {
	if f.dryRun {
		return "dry run, nothing written: would be "
	}
	return ""
}

// printImportCounts prints an import's counts line after prefix: created,
// updated, revoked and unchanged, then the rarer outcomes that happened;
// where says where a revoked tool came back ("on the server").
func printImportCounts(prefix string, counts map[string]int, where string) {
	fmt.Printf("%s%d created, %d updated, %d revoked, %d unchanged", prefix, counts["created"], counts["updated"], counts["revoked"], counts["unchanged"])
	if n := counts["reactivated"]; n > 0 {
		fmt.Printf(", %d reactivated", n)
	}
	if n := counts["kept_revoked"]; n > 0 {
		fmt.Printf(", %d back %s but kept revoked (--reactivate)", n, where)
	}
	if n := counts["skipped"]; n > 0 {
		fmt.Printf(", %d skipped", n)
	}
	fmt.Println()
}

// scoping is what an import did about who may use its cards: the default
// scopes it gave cards that named none (an import never opens a tool to
// every caller of the tenant), and the cards that stay open all the same
// (stored ones a platform team left without scopes).
type scoping struct {
	// Defaulted counts the cards written with each default scope.
	Defaulted map[string]int `json:"defaulted,omitempty"`
	// Open names the active cards of the namespace that require no scope.
	Open []string `json:"open,omitempty"`
	// HowToOpen says, in a sentence, how callers get to use the cards.
	HowToOpen string `json:"how_to_open"`
}

func scopingOf(plan catalogsync.Plan) scoping {
	sc := scoping{Defaulted: map[string]int{}}
	for _, c := range plan.Changes {
		if c.Defaulted && c.Action != catalogsync.Unchanged && c.Action != catalogsync.KeptRevoked {
			sc.Defaulted[c.Card.RequiredScopes[0]]++
		}
		if c.Card.Status == cards.StatusActive && len(c.Card.RequiredScopes) == 0 {
			sc.Open = append(sc.Open, c.Card.Name)
		}
	}
	all := plan.Server + ":*"
	sc.HowToOpen = fmt.Sprintf("grant %s%s to the callers that may read, %s%s to those that may change, %s%s to those that may destroy "+
		"(%s for all of them) in their tokens, JWTs or stated scopes; or import with --scopes to require other scopes",
		plan.Server, catalogsync.ReadSuffix, plan.Server, catalogsync.WriteSuffix, plan.Server, catalogsync.AdminSuffix, all)
	return sc
}

// print says on stderr what the import scoped and what stays open.
func (sc scoping) print(f *importFlags) {
	if n := sumValues(sc.Defaulted); n > 0 {
		var parts []string
		for _, s := range slices.Sorted(maps.Keys(sc.Defaulted)) {
			parts = append(parts, fmt.Sprintf("%s (%d)", s, sc.Defaulted[s]))
		}
		verb := "got"
		if f.dryRun {
			verb = "would get"
		}
		fmt.Fprintf(os.Stderr, "scoped: %d cards name no scope of their own and no --scopes was given: they %s the server's default scopes, %s.\n"+
			"  No caller can use them until it holds the scope. To open them, %s.\n", n, verb, strings.Join(parts, ", "), sc.HowToOpen)
	}
	if len(sc.Open) > 0 {
		fmt.Fprintf(os.Stderr, "warning: %d cards require no scope, so every caller of tenant %s can use them: %s (--override-scopes gives them --scopes or the server's default)\n",
			len(sc.Open), f.tenant, strings.Join(sc.Open, ", "))
	}
}

func sumValues(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}
