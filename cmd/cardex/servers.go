package main

import (
	"fmt"
	"os"
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

func tenantFlag(cmd *cobra.Command, tenant *string) {
	cmd.Flags().StringVar(tenant, "tenant", os.Getenv("CARDEX_TENANT"), "tenant (env CARDEX_TENANT)")
}

func serversListCmd() *cobra.Command {
	var cf clientFlags
	var tenant string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List a tenant's server entries in name order",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			conn, ctx, cancel, err := cf.connect(cmd)
			if err != nil {
				return err
			}
			defer conn.Close()
			defer cancel()
			resp, err := pb.NewCatalogServiceClient(conn).ListServers(ctx, &pb.ListServersRequest{Tenant: tenant})
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
		},
	}
	cf.register(cmd)
	tenantFlag(cmd, &tenant)
	return cmd
}

func serversGetCmd() *cobra.Command {
	var cf clientFlags
	var tenant string
	cmd := &cobra.Command{
		Use:   "get NAME",
		Short: "Show one server entry",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			conn, ctx, cancel, err := cf.connect(cmd)
			if err != nil {
				return err
			}
			defer conn.Close()
			defer cancel()
			resp, err := pb.NewCatalogServiceClient(conn).ListServers(ctx, &pb.ListServersRequest{Tenant: tenant, Name: args[0]})
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
		},
	}
	cf.register(cmd)
	tenantFlag(cmd, &tenant)
	return cmd
}

func serversDeleteCmd() *cobra.Command {
	var cf clientFlags
	var tenant string
	var expected int64
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete a server entry (its cards stay)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			conn, ctx, cancel, err := cf.connect(cmd)
			if err != nil {
				return err
			}
			defer conn.Close()
			defer cancel()
			if _, err := pb.NewCatalogServiceClient(conn).DeleteServer(ctx, &pb.DeleteServerRequest{Tenant: tenant, Name: args[0], ExpectedVersion: expected}); err != nil {
				return err
			}
			if cf.output == "json" {
				return printPlainJSON(map[string]string{"deleted": tenant + "/" + args[0]})
			}
			fmt.Printf("deleted server entry %s/%s\n", tenant, args[0])
			return nil
		},
	}
	cf.register(cmd)
	tenantFlag(cmd, &tenant)
	cmd.Flags().Int64Var(&expected, "expected-version", 0, "fail unless the stored version is this one")
	return cmd
}
