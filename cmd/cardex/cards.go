package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/codec/apiconv"
	"github.com/seed0cff8200/cardex/internal/codec/cardjson"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

func cardsCmd() *cobra.Command {
	cmd := &cobra.Command{Use: "cards", Short: "Register, inspect and delete capability cards"}
	cmd.AddCommand(cardsApplyCmd(), cardsGetCmd(), cardsListCmd(), cardsDeleteCmd(), cardsLintCmd())
	return cmd
}

// A PutCards request carries at most applyBatch cards (the server's limit)
// and about applyBytes (half the server's 64 MiB message limit).
const (
	applyBatch = 1000
	applyBytes = 32 << 20
)

func cardsApplyCmd() *cobra.Command {
	var cf clientFlags
	var path string
	cmd := &cobra.Command{
		Use:   "apply -f FILE|DIR",
		Short: "Create or update cards and server entries (kind: server) from YAML/JSON files (directories are read recursively)",
		Long: `Reads every card first and checks all of them (the rules the server applies, and that no card
appears twice) before anything is written: one bad card anywhere writes nothing. Server entries
(kind: server) are written first. Sets of more than
1,000 cards (or 32 MiB) go in several batches, each atomic; if a later batch still fails (a
version conflict), the table shows what the earlier batches wrote and the error names the failing
card by file and position.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return usageError("-f FILE|DIR is required")
			}
			if err := cf.check(); err != nil {
				return err
			}
			entries, err := cards.LoadEntries(path)
			if err != nil {
				return err
			}
			in, sources := entries.Cards, entries.CardSources
			if len(in) == 0 && len(entries.Servers) == 0 {
				return fmt.Errorf("%s: no cards or server entries found (.yaml, .yml or .json)", path)
			}
			if err := checkCards(in, sources); err != nil {
				return err
			}
			client, ctx, done, err := cf.catalog(cmd)
			if err != nil {
				return err
			}
			defer done()
			// Server entries first (each batch atomic); their results come
			// first, with an empty name.
			var results []*pb.PutResult
			for start := 0; start < len(entries.Servers); start += applyBatch {
				end := min(start+applyBatch, len(entries.Servers))
				req := &pb.PutServersRequest{}
				for i := start; i < end; i++ {
					req.Servers = append(req.Servers, apiconv.ServerInfoToProto(&entries.Servers[i]))
				}
				r, err := client.PutServers(ctx, req)
				if err != nil {
					return fmt.Errorf("%s (server entries %s … %s): %w", path, entries.ServerSources[start], entries.ServerSources[end-1], err)
				}
				results = append(results, r.Results...)
			}
			servers := len(results)
			var failed error
			for start := 0; start < len(in); {
				// A batch holds at most applyBatch cards and applyBytes.
				req := &pb.PutCardsRequest{}
				size, end := 0, start
				for end < len(in) && len(req.Cards) < applyBatch {
					p := apiconv.CardToProto(&in[end], true)
					n := proto.Size(p)
					if len(req.Cards) > 0 && size+n > applyBytes {
						break
					}
					size += n
					req.Cards = append(req.Cards, p)
					end++
				}
				if start > 0 || end < len(in) {
					fmt.Fprintf(os.Stderr, "applying cards %d–%d of %d (each batch is atomic)\n", start+1, end, len(in))
				}
				r, err := client.PutCards(ctx, req)
				if err != nil {
					failed = batchError(err, sources[start:end], start, len(in))
					break
				}
				results = append(results, r.Results...)
				start = end
			}
			if failed != nil && len(results) == 0 {
				return failed
			}
			counts, serverCounts := map[string]int{}, map[string]int{}
			for _, r := range results {
				if r.Name == "" {
					serverCounts[r.Outcome]++
				} else {
					counts[r.Outcome]++
				}
			}
			if cf.output == "json" {
				out := struct {
					Results []putResultJSON `json:"results"`
					Counts  map[string]int  `json:"counts"`
					Error   string          `json:"error,omitempty"`
				}{Results: []putResultJSON{}, Counts: counts}
				for _, r := range results {
					out.Results = append(out.Results, putResultJSON{Tenant: r.Tenant, Server: r.Server, Name: r.Name, Version: r.Version, Outcome: r.Outcome})
				}
				if failed != nil {
					out.Error = failed.Error()
				}
				if err := printPlainJSON(out); err != nil {
					return err
				}
				return failed
			}
			rows := make([][]string, 0, len(results))
			for _, r := range results {
				name := r.Name
				if name == "" {
					name = "(server entry)"
				}
				rows = append(rows, []string{r.Tenant, r.Server, name, strconv.FormatInt(r.Version, 10), r.Outcome})
			}
			if err := table([]string{"TENANT", "SERVER", "NAME", "VERSION", "OUTCOME"}, rows); err != nil {
				return err
			}
			fmt.Printf("\n%d created, %d updated, %d unchanged", counts["created"], counts["updated"], counts["unchanged"])
			if failed != nil {
				fmt.Printf(" (by the batches before the failure; cards %d–%d of %d were not written)", len(results)-servers+1, len(in), len(in))
			}
			fmt.Println()
			if len(entries.Servers) > 0 {
				fmt.Printf("server entries: %d created, %d updated, %d unchanged\n", serverCounts["created"], serverCounts["updated"], serverCounts["unchanged"])
			}
			return failed
		},
	}
	cf.register(cmd)
	cmd.Flags().StringVarP(&path, "file", "f", "", "card file or directory (entries of kind: server are server entries)")
	return cmd
}

// checkCards applies the server's rules to every card of an apply before
// anything is written: each card must normalise, and no key may appear
// twice in the whole set. Errors name the card by file and position.
func checkCards(in []cards.Card, sources []string) error {
	const show = 20
	var problems []string
	seen := map[cards.Key]int{}
	for i := range in {
		c := in[i].Clone()
		if err := cards.Normalize(&c); err != nil {
			problems = append(problems, fmt.Sprintf("%s%s: %v", sources[i], cardRef(&in[i]), err))
			continue
		}
		if j, dup := seen[c.Key()]; dup {
			problems = append(problems, fmt.Sprintf("%s%s: duplicates %s (a card may appear only once)", sources[i], cardRef(&c), sources[j]))
			continue
		}
		seen[c.Key()] = i
	}
	if len(problems) == 0 {
		return nil
	}
	msg := fmt.Sprintf("nothing written: %d of %d cards are invalid:", len(problems), len(in))
	for i, p := range problems {
		if i == show {
			msg += fmt.Sprintf("\n  … and %d more", len(problems)-show)
			break
		}
		msg += "\n  " + p
	}
	return errors.New(msg)
}

func cardRef(c *cards.Card) string {
	if c.Server == "" && c.Name == "" {
		return ""
	}
	return fmt.Sprintf(" (%s/%s)", c.Server, c.Name)
}

var batchItemRE = regexp.MustCompile(`cards\[(\d+)\]`)

// batchError names the cards of a failed batch by file and position
// instead of by their index in the batch.
func batchError(err error, sources []string, start, total int) error {
	msg := status.Convert(err).Message()
	msg = batchItemRE.ReplaceAllStringFunc(msg, func(m string) string {
		i, _ := strconv.Atoi(batchItemRE.FindStringSubmatch(m)[1])
		if i < len(sources) {
			return sources[i]
		}
		return m
	})
	return status.Error(status.Code(err), fmt.Sprintf("cards %d–%d of %d were not written: %s", start+1, start+len(sources), total, msg))
}

// refFlags name one card.
type refFlags struct{ tenant, server string }

func (f *refFlags) register(cmd *cobra.Command) {
	tenantFlag(cmd, &f.tenant)
	cmd.Flags().StringVar(&f.server, "server", "", "server namespace (or write SERVER/NAME)")
}

// split accepts NAME with --server, or SERVER/NAME.
func (f *refFlags) split(arg string) (server, name string) { return splitRef(arg, f.server) }

// splitRef reads a tool's or card's name: SERVER/NAME, or NAME with the
// server a --server flag gave (server, which wins over a "/").
func splitRef(arg, server string) (string, string) {
	if s, n, ok := strings.Cut(arg, "/"); ok && server == "" {
		return s, n
	}
	return server, arg
}

// tenantFlag registers the required --tenant flag (env CARDEX_TENANT).
func tenantFlag(cmd *cobra.Command, tenant *string) {
	cmd.Flags().StringVar(tenant, "tenant", os.Getenv("CARDEX_TENANT"), "tenant (env CARDEX_TENANT)")
	addCheck(cmd, func() error { return requireTenant(*tenant) })
}

func cardsGetCmd() *cobra.Command {
	var cf clientFlags
	var rf refFlags
	cmd := catalogCmd(&cf, "get SERVER/NAME | NAME --server SERVER", "Show one card as stored (any status)", cobra.ExactArgs(1),
		func(ctx context.Context, c pb.CatalogServiceClient, args []string) error {
			server, name := rf.split(args[0])
			resp, err := c.GetCard(ctx, &pb.GetCardRequest{Tenant: rf.tenant, Server: server, Name: name})
			if err != nil {
				return err
			}
			if cf.output == "json" {
				return printPlainJSON(cardJSON(resp.Card))
			}
			return printCard(resp.Card)
		})
	rf.register(cmd)
	return cmd
}

func cardsListCmd() *cobra.Command {
	var cf clientFlags
	var tenant, server, status, cursor string
	var pageSize int
	var all bool
	cmd := catalogCmd(&cf, "list", "List a tenant's cards in (server, name) order", cobra.NoArgs,
		func(ctx context.Context, cat pb.CatalogServiceClient, _ []string) error {
			out := &pb.ListCardsResponse{}
			req := &pb.ListCardsRequest{Tenant: tenant, Server: server, Status: splitList(status), PageSize: int32(pageSize), Cursor: cursor}
			for {
				resp, err := cat.ListCards(ctx, req)
				if err != nil {
					return err
				}
				out.Cards = append(out.Cards, resp.Cards...)
				out.NextCursor = resp.NextCursor
				if !all || resp.NextCursor == "" {
					break
				}
				req.Cursor = resp.NextCursor
			}
			if cf.output == "json" {
				lj := listJSON{Cards: []*cardjson.Card{}, NextCursor: out.NextCursor}
				for _, c := range out.Cards {
					lj.Cards = append(lj.Cards, cardJSON(c))
				}
				return printPlainJSON(lj)
			}
			rows := make([][]string, 0, len(out.Cards))
			for _, c := range out.Cards {
				rows = append(rows, []string{c.Server, c.Name, c.Status, strconv.FormatInt(c.Version, 10), strings.Join(c.RequiredScopes, ","), cards.Cut(c.Summary, 60)})
			}
			if err := table([]string{"SERVER", "NAME", "STATUS", "VERSION", "SCOPES", "SUMMARY"}, rows); err != nil {
				return err
			}
			if out.NextCursor != "" {
				fmt.Fprintf(os.Stderr, "more: --cursor %s (or --all)\n", out.NextCursor)
			}
			return nil
		})
	f := cmd.Flags()
	tenantFlag(cmd, &tenant)
	f.StringVar(&server, "server", "", "only this server")
	f.StringVar(&status, "status", "", "only these statuses, comma-separated (active,pending,revoked)")
	f.IntVar(&pageSize, "page-size", 0, "page size (default 20, at most 100)")
	f.StringVar(&cursor, "cursor", "", "cursor from a previous page")
	f.BoolVar(&all, "all", false, "follow cursors to the last page")
	return cmd
}

func cardsDeleteCmd() *cobra.Command {
	return deleteCmd("delete SERVER/NAME | NAME --server SERVER", "Delete a card (to retire one but keep it, apply it with status: revoked)", "", true,
		func(ctx context.Context, c pb.CatalogServiceClient, tenant, server, name string, expected int64) (string, error) {
			_, err := c.DeleteCard(ctx, &pb.DeleteCardRequest{Tenant: tenant, Server: server, Name: name, ExpectedVersion: expected})
			return tenant + "/" + server + "/" + name, err
		})
}

// deleteCmd is `cards delete` and `servers delete`: one catalogue entry of
// the tenant, named by the argument (SERVER/NAME or --server when
// withServer), deleted by del, which returns its full name (printed after
// what), with an optional --expected-version.
func deleteCmd(use, short, what string, withServer bool,
	del func(ctx context.Context, c pb.CatalogServiceClient, tenant, server, name string, expected int64) (string, error)) *cobra.Command {
	var cf clientFlags
	var rf refFlags
	var expected int64
	cmd := catalogCmd(&cf, use, short, cobra.ExactArgs(1), func(ctx context.Context, c pb.CatalogServiceClient, args []string) error {
		server, name := "", args[0]
		if withServer {
			server, name = rf.split(args[0])
		}
		deleted, err := del(ctx, c, rf.tenant, server, name, expected)
		if err != nil {
			return err
		}
		if cf.output == "json" {
			return printPlainJSON(map[string]string{"deleted": deleted})
		}
		fmt.Printf("deleted %s%s\n", what, deleted)
		return nil
	})
	if withServer {
		rf.register(cmd)
	} else {
		tenantFlag(cmd, &rf.tenant)
	}
	cmd.Flags().Int64Var(&expected, "expected-version", 0, "fail unless the stored version is this one")
	return cmd
}

// catalogCmd is a command that talks to a running server's CatalogService
// (cards and servers get, list and delete): run gets a client and the
// context of its calls; cf's flags are registered.
func catalogCmd(cf *clientFlags, use, short string, args cobra.PositionalArgs,
	run func(ctx context.Context, c pb.CatalogServiceClient, args []string) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   use,
		Short: short,
		Args:  args,
		RunE: func(cmd *cobra.Command, args []string) error {
			client, ctx, done, err := cf.catalog(cmd)
			if err != nil {
				return err
			}
			defer done()
			return run(ctx, client, args)
		},
	}
	cf.register(cmd)
	return cmd
}

// printCard renders one card for people.
func printCard(c *pb.Card) error {
	rows := [][]string{
		{"card", c.Tenant + "/" + c.Server + "/" + c.Name},
		{"kind", c.Kind},
		{"status", c.Status},
		{"version", strconv.FormatInt(c.Version, 10)},
		{"summary", c.Summary},
	}
	add := func(k, v string) {
		if v != "" {
			rows = append(rows, []string{k, v})
		}
	}
	add("description", cards.Cut(c.Description, 200))
	add("aliases", strings.Join(c.Aliases, "; "))
	add("tags", strings.Join(c.Tags, ", "))
	add("when_not_to_use", c.WhenNotToUse)
	add("required_scopes", strings.Join(c.RequiredScopes, ", "))
	add("search_examples", strings.Join(c.SearchExamples, "; "))
	if s := c.GetSearchExamplesSource(); s != nil && len(c.SearchExamples) > 0 {
		src := (&cards.ExamplesSource{Author: s.Author, Model: s.Model, PromptVersion: s.PromptVersion}).String()
		if c.SearchExamplesStale {
			src += " — stale: the card changed since they were written"
		}
		add("examples_by", src)
	}
	add("input_schema", c.InputSchema)
	add("output_schema", c.OutputSchema)
	for _, r := range rows {
		fmt.Printf("%-16s %s\n", r[0]+":", r[1])
	}
	return nil
}
