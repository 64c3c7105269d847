package main

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/codec/apiconv"
	"github.com/seed0cff8200/cardex/internal/sources/catalogsync"
	"github.com/seed0cff8200/cardex/internal/sources/mcpimport"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// importFromFile is `import mcp --from-file`: every server of a saved
// catalogue, diffed against the tenant in one plan and written in atomic
// batches that never split a server, then the server entries.
func importFromFile(cmd *cobra.Command, f *importFlags, toolsPath, serversPath string) error {
	servers, err := mcpimport.ReadToolsFile(toolsPath)
	if err != nil {
		return err
	}
	var sources []catalogsync.Source
	var skipped []mcpimport.Skipped
	tools := 0
	for _, s := range servers {
		name := s.Name
		if name == "" {
			if f.server == "" {
				return usageError("%s: %d tools name no server: give --server NAME", toolsPath, len(s.Tools))
			}
			name = f.server
		}
		if !cards.ValidName(name) {
			return fmt.Errorf("%s: server %q must match [A-Za-z0-9_.-]{1,%d}", toolsPath, name, cards.MaxNameLen)
		}
		imported, skip := mcpimport.ToCards(f.tenant, name, s.Tools)
		src := catalogsync.Source{Server: name, Cards: imported}
		for _, k := range skip {
			src.Keep = append(src.Keep, k.Name)
			skipped = append(skipped, mcpimport.Skipped{Name: name + "/" + k.Name, Reason: k.Reason})
		}
		sources = append(sources, src)
		tools += len(s.Tools)
	}
	fmt.Fprintf(os.Stderr, "read %d tools of %d servers from %s\n", tools, len(sources), toolsPath)
	var entries []cards.ServerInfo
	if serversPath != "" {
		if entries, err = mcpimport.ReadServersFile(serversPath, f.tenant); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "read %d server entries from %s\n", len(entries), serversPath)
	}

	client, ctx, done, err := f.cf.catalog(cmd)
	if err != nil {
		return err
	}
	defer done()
	cat := grpcCatalog{c: client}
	plan, err := catalogsync.PlanBulk(ctx, cat, f.tenant, sources, entries, catalogsync.Options{
		Kind: cards.KindMCPTool, Scopes: splitList(f.scopes), OverrideScopes: f.overrideScopes, Reactivate: f.reactivate,
	})
	if err != nil {
		return err
	}
	sc := bulkScopingOf(plan)
	sc.print(f)
	var applyErr error
	if !f.dryRun {
		applyErr = catalogsync.ApplyBulk(ctx, cat, plan, func(p catalogsync.Progress) {
			fmt.Fprintf(os.Stderr, "wrote %d of %d %s\n", p.Done, p.Total, p.What)
		})
	}
	for _, s := range skipped {
		fmt.Fprintf(os.Stderr, "skipped %s: %s\n", s.Name, s.Reason)
	}
	if err := printBulk(f, plan, skipped, sc); err != nil {
		return err
	}
	if applyErr != nil {
		return fmt.Errorf("import incomplete (the table shows the plan): %w", applyErr)
	}
	// --enrich: every server of the file, as an import of each would (a
	// dry run says once that it asks nothing).
	for _, src := range sources {
		one := *f
		one.server = src.Server
		if err := enrichAfterImport(cmd, &one); err != nil || f.dryRun {
			return err
		}
	}
	return nil
}

// bulkActions are the card actions a bulk report counts, in its order.
var bulkActions = []catalogsync.Action{catalogsync.Create, catalogsync.Update, catalogsync.Revoke, catalogsync.Unchanged,
	catalogsync.Reactivate, catalogsync.KeptRevoked}

// printBulk reports a bulk import: one row per server (its cards' actions
// and its entry's), then the totals.
func printBulk(f *importFlags, plan catalogsync.BulkPlan, skipped []mcpimport.Skipped, sc scoping) error {
	entryOf := map[string]string{}
	for _, s := range plan.Servers {
		entryOf[s.Entry.Name] = string(s.Action)
	}
	counts := map[string]int{"skipped": len(skipped)}
	for _, a := range bulkActions {
		counts[jsonAction(a)] = plan.Count(a)
	}
	entryCounts := map[string]int{}
	for _, a := range []catalogsync.Action{catalogsync.Create, catalogsync.Update, catalogsync.Unchanged} {
		entryCounts[jsonAction(a)] = plan.ServerCount(a)
	}
	if f.cf.output == "json" {
		type serverRow struct {
			Server string         `json:"server"`
			Counts map[string]int `json:"counts"`
			Entry  string         `json:"entry,omitempty"`
		}
		out := struct {
			Tenant        string              `json:"tenant"`
			DryRun        bool                `json:"dry_run"`
			Servers       []serverRow         `json:"servers"`
			Counts        map[string]int      `json:"counts"`
			ServerEntries map[string]int      `json:"server_entries"`
			Skipped       []mcpimport.Skipped `json:"skipped,omitempty"`
			Scoping       scoping             `json:"scoping"`
		}{Tenant: f.tenant, DryRun: f.dryRun, Servers: []serverRow{}, Counts: counts, ServerEntries: entryCounts, Skipped: skipped, Scoping: sc}
		for _, p := range plan.Plans {
			row := serverRow{Server: p.Server, Counts: map[string]int{}, Entry: entryOf[p.Server]}
			for _, a := range bulkActions {
				if n := p.Count(a); n > 0 {
					row.Counts[jsonAction(a)] = n
				}
			}
			out.Servers = append(out.Servers, row)
		}
		return printPlainJSON(out)
	}
	rows := make([][]string, 0, len(plan.Plans))
	for _, p := range plan.Plans {
		entry := entryOf[p.Server]
		if entry == "" {
			entry = "-"
		}
		rows = append(rows, []string{p.Server, strconv.Itoa(p.Count(catalogsync.Create)), strconv.Itoa(p.Count(catalogsync.Update)),
			strconv.Itoa(p.Count(catalogsync.Revoke)), strconv.Itoa(p.Count(catalogsync.Unchanged)), entry})
	}
	if err := table([]string{"SERVER", "CREATED", "UPDATED", "REVOKED", "UNCHANGED", "SERVER ENTRY"}, rows); err != nil {
		return err
	}
	verb := dryRunVerb(f)
	total := 0
	for _, a := range bulkActions {
		total += plan.Count(a)
	}
	printImportCounts(fmt.Sprintf("\n%d servers, %d cards: %s", len(plan.Plans), total, verb), counts, "in the file")
	if len(plan.Servers) > 0 {
		fmt.Printf("%d server entries: %s%d created, %d updated, %d unchanged\n", len(plan.Servers), verb,
			entryCounts["created"], entryCounts["updated"], entryCounts["unchanged"])
	}
	return nil
}

// jsonAction is an action as the reports count it ("created").
func jsonAction(a catalogsync.Action) string {
	switch a {
	case catalogsync.Create:
		return "created"
	case catalogsync.Update:
		return "updated"
	case catalogsync.Revoke:
		return "revoked"
	case catalogsync.Reactivate:
		return "reactivated"
	}
	return string(a)
}

// Servers implements catalogsync.BulkCatalog.
func (g grpcCatalog) Servers(ctx context.Context, tenant string) ([]cards.ServerInfo, error) {
	resp, err := g.c.ListServers(ctx, &pb.ListServersRequest{Tenant: tenant})
	if err != nil {
		return nil, err
	}
	out := make([]cards.ServerInfo, 0, len(resp.Servers))
	for _, s := range resp.Servers {
		out = append(out, apiconv.ServerInfoFromProto(s))
	}
	return out, nil
}

// bulkScopingOf is scopingOf over every server of a bulk import.
func bulkScopingOf(b catalogsync.BulkPlan) scoping {
	sc := scoping{Defaulted: map[string]int{}}
	for _, p := range b.Plans {
		one := scopingOf(p)
		for s, n := range one.Defaulted {
			sc.Defaulted[s] += n
		}
		for _, name := range one.Open {
			sc.Open = append(sc.Open, p.Server+"/"+name)
		}
	}
	sc.HowToOpen = fmt.Sprintf("grant SERVER%s to the callers that may read, SERVER%s to those that may change, SERVER%s to those that may destroy "+
		"(SERVER:* for all of them; SERVER is each server's name) in their tokens, JWTs or stated scopes; or import with --scopes to require other scopes",
		catalogsync.ReadSuffix, catalogsync.WriteSuffix, catalogsync.AdminSuffix)
	return sc
}
