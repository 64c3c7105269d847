package main

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/seed0cff8200/cardex/cards"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// cardex servers list|get|delete: the catalogue's server entries (what an
// MCP server, API or database is). They are written by `cards apply -f`
// (entries of kind: server) and by `import mcp|openapi`.
func serversCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "servers", Short: "Inspect and delete server entries (written by cards apply and import)"}
	cmd.AddCommand(serversListCmd(), serversGetCmd(), serversDeleteCmd())
	return cmd
}

func serversListCmd() *cobra.Command {
	var cf clientFlags
	var tenant string
	cmd := catalogCmd(&cf, "list", "List a tenant's server entries in name order", cobra.NoArgs,
		func(ctx context.Context, c pb.CatalogServiceClient, _ []string) error {
			resp, err := c.ListServers(ctx, &pb.ListServersRequest{Tenant: tenant})
			if err != nil {
				return err
			}
			if cf.output == "json" {
				out := struct {
					Servers []cards.ServerInfo `json:"servers"`
				}{Servers: make([]cards.ServerInfo, 0, len(resp.Servers))}
				for _, s := range resp.Servers {
					out.Servers = append(out.Servers, serverJSON(s))
				}
				return printPlainJSON(out)
			}
			rows := make([][]string, 0, len(resp.Servers))
			for _, s := range resp.Servers {
				rows = append(rows, []string{s.Name, strconv.FormatInt(s.Version, 10), cards.Cut(s.Title, 40), cards.Cut(s.Description, 60)})
			}
			return table([]string{"NAME", "VERSION", "TITLE", "DESCRIPTION"}, rows)
		})
	tenantFlag(cmd, &tenant)
	return cmd
}

func serversGetCmd() *cobra.Command {
	var cf clientFlags
	var tenant string
	cmd := catalogCmd(&cf, "get NAME", "Show one server entry", cobra.ExactArgs(1),
		func(ctx context.Context, c pb.CatalogServiceClient, args []string) error {
			resp, err := c.ListServers(ctx, &pb.ListServersRequest{Tenant: tenant, Name: args[0]})
			if err != nil {
				return err
			}
			if len(resp.Servers) != 1 {
				return fmt.Errorf("server %q: the server answered %d entries", args[0], len(resp.Servers))
			}
			s := resp.Servers[0]
			if cf.output == "json" {
				return printPlainJSON(serverJSON(s))
			}
			rows := [][]string{
				{"server", s.Tenant + "/" + s.Name},
				{"version", strconv.FormatInt(s.Version, 10)},
				{"title", s.Title},
				{"description", s.Description},
			}
			if s.UpdatedAt != nil {
				rows = append(rows, []string{"updated_at", s.UpdatedAt.AsTime().Format("2006-01-02T15:04:05Z07:00")})
			}
			return table([]string{"FIELD", "VALUE"}, rows)
		})
	tenantFlag(cmd, &tenant)
	return cmd
}

func serversDeleteCmd() *cobra.Command {
	return deleteCmd("delete NAME", "Delete a server entry (its cards stay)", "server entry ", false,
		func(ctx context.Context, c pb.CatalogServiceClient, tenant, _, name string, expected int64) (string, error) {
			_, err := c.DeleteServer(ctx, &pb.DeleteServerRequest{Tenant: tenant, Name: name, ExpectedVersion: expected})
			return tenant + "/" + name, err
		})
}
