package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/seed0cff8200/cardex/cards"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

func discoverCmd() *cobra.Command {
	var cf clientFlags
	var who callerFlags
	var topK int
	var fusion string
	var alpha float64
	var pins, intents []string
	var minConfidence float64
	var noCompanions bool
	cmd := &cobra.Command{
		Use:   `discover ["QUERY"] [--intent TEXT]...`,
		Short: "Shortlist the caller's authorized tools for a request (or its parts), with full schemas",
		Long: `Shortlist the caller's authorized tools for a request, with full schemas.

A multi-step request can be given as its parts with --intent (repeatable, at most 8): each part
is ranked inside the same authorized set and the shortlist takes every part's best tool first,
then every part's second, and so on. With a query too, the query is one more ranked list and the
context of every part.

The query and every --intent may use the operators of Claude Code's tool search:
select:SERVER/NAME[,SERVER/NAME...] returns exactly those tools, in that order, among the ones the
caller may use (not counted in --top-k; a tool it may not use is absent, like one that does not
exist); +word keeps only the tools with the word in their server, name, summary, description,
aliases or tags, ranked by all the words ("+github open an issue").`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			query := ""
			if len(args) == 1 {
				query = args[0]
			}
			if query == "" && len(intents) == 0 {
				return usageError(`give a query ("QUERY") or at least one --intent`)
			}
			client, ctx, done, err := cf.discovery(cmd)
			if err != nil {
				return err
			}
			defer done()
			req := &pb.DiscoverToolsRequest{Caller: who.caller(), Query: query, Intents: intents, TopK: int32(topK), Fusion: fusion,
				NoCompanions: noCompanions}
			if cmd.Flags().Changed("alpha") {
				req.Alpha = &alpha
			}
			if cmd.Flags().Changed("min-confidence") {
				req.MinConfidence = &minConfidence
			}
			for _, p := range pins {
				s, n, ok := strings.Cut(p, "/")
				if !ok {
					return usageError("--pin %q: write SERVER/NAME", p)
				}
				req.AlwaysLoad = append(req.AlwaysLoad, &pb.ToolRef{Server: s, Name: n})
			}
			resp, err := client.DiscoverTools(ctx, req)
			if err != nil {
				return err
			}
			if cf.output == "json" {
				return printPlainJSON(discoverOut(resp))
			}
			header := []string{"#", "TOOL", "FUSED", "CONF", "TOKENS", "SUMMARY", "WHY"}
			if len(intents) > 0 {
				header = []string{"#", "TOOL", "FOR", "FUSED", "CONF", "TOKENS", "SUMMARY", "WHY"}
			}
			rows := make([][]string, 0, len(resp.Tools))
			for i, t := range resp.Tools {
				row := []string{strconv.Itoa(i + 1), t.Card.Server + "/" + t.Card.Name}
				if len(intents) > 0 {
					row = append(row, answers(t))
				}
				rows = append(rows, append(row, fmt.Sprintf("%.4f", t.Scores.Fused), fmt.Sprintf("%.2f", t.Confidence),
					strconv.Itoa(int(t.Tokens)), cards.Cut(t.Card.Summary, 70), t.Reason))
			}
			if len(rows) > 0 {
				if err := table(header, rows); err != nil {
					return err
				}
			}
			if len(intents) > 0 {
				fmt.Println()
				for i, in := range intents {
					fmt.Printf("intent %d: %s\n", i+1, in)
				}
			}
			if resp.Abstained && resp.MinConfidence == 0 {
				fmt.Println("\nno tool matches: rephrase the request, or give its parts with --intent")
			} else if resp.Abstained {
				fmt.Printf("\nno tool matches well enough (min confidence %.2f): rephrase the request, or lower --min-confidence\n", resp.MinConfidence)
			} else if len(resp.AbstainedIntents) > 0 {
				var which []string
				for _, i := range resp.AbstainedIntents {
					which = append(which, strconv.Itoa(int(i)+1))
				}
				fmt.Printf("\nno tool matches intent %s well enough (min confidence %.2f)\n", strings.Join(which, ", "), resp.MinConfidence)
			}
			tok := resp.Tokens
			fmt.Printf("\n%d of %d authorized tools; ~%d tokens instead of ~%d for the whole authorized catalogue\n",
				len(resp.Tools), resp.CandidateCount, tok.GetShortlistTokens(), tok.GetCatalogTokens())
			if resp.LowConfidence {
				fmt.Printf("low confidence: no tool matched the request well")
				if resp.ReformulatedQuery != "" {
					fmt.Printf("; searched again as %q", resp.ReformulatedQuery)
				}
				fmt.Println(" (logged as a suspected miss)")
			}
			if resp.Degraded {
				fmt.Println("degraded: part of the search was unavailable (the semantic leg, while the database is unreachable); lexical matches only")
			}
			fmt.Fprintf(os.Stderr, "discovery_id %s (full schemas: -o json)\n", resp.DiscoveryId)
			return nil
		},
	}
	cf.register(cmd)
	who.register(cmd)
	f := cmd.Flags()
	f.IntVar(&topK, "top-k", 0, "shortlist size (default 5, at most 50)")
	f.StringVar(&fusion, "fusion", "", "relative (default; relative-score fusion with --alpha) or rrf (reciprocal rank fusion, k = 60)")
	f.Float64Var(&alpha, "alpha", 0.5, "semantic weight for --fusion relative (0..1)")
	f.StringSliceVar(&pins, "pin", nil, "SERVER/NAME to always load (repeatable, at most 5)")
	f.StringArrayVar(&intents, "intent", nil, "one part of a multi-step request (repeatable, at most 8)")
	f.Float64Var(&minConfidence, "min-confidence", 0, "answer a ranked list only when its best tool's confidence reaches this (0..1; default: the server's)")
	f.BoolVar(&noCompanions, "no-companions", false, "leave out the tools that past sessions used with the shortlist's confident tools (companions)")
	return cmd
}

// answers says which ranked lists reached a tool: q for the query, 1, 2, …
// for the intents.
func answers(t *pb.DiscoveredTool) string {
	var parts []string
	if t.ForQuery {
		parts = append(parts, "q")
	}
	for _, i := range t.Intents {
		parts = append(parts, strconv.Itoa(int(i)+1))
	}
	if t.Pinned && len(parts) == 0 {
		return "pin"
	}
	return strings.Join(parts, ",")
}

func describeCmd() *cobra.Command {
	var cf clientFlags
	var who callerFlags
	var server string
	cmd := &cobra.Command{
		Use:   "describe NAME [--server SERVER]",
		Short: "Show one tool the caller may use, with its schemas",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, ctx, done, err := cf.discovery(cmd)
			if err != nil {
				return err
			}
			defer done()
			server, name := splitRef(args[0], server)
			resp, err := client.DescribeTool(ctx, &pb.DescribeToolRequest{Caller: who.caller(), Name: name, Server: server})
			if err != nil {
				return err
			}
			if len(resp.AmbiguousServers) > 0 {
				msg := fmt.Sprintf("%q is ambiguous; name a server with --server: %s", name, strings.Join(resp.AmbiguousServers, ", "))
				if cf.output == "json" {
					if err := printPlainJSON(ambiguousJSON{Ambiguous: true, Servers: resp.AmbiguousServers, Message: msg}); err != nil {
						return err
					}
				}
				return exitError{code: 2, msg: msg}
			}
			if cf.output == "json" {
				return printPlainJSON(cardJSON(resp.Card))
			}
			return printCard(resp.Card)
		},
	}
	cf.register(cmd)
	who.register(cmd)
	cmd.Flags().StringVar(&server, "server", "", "server namespace (needed when the name is ambiguous)")
	return cmd
}

func authorizeCmd() *cobra.Command {
	var cf clientFlags
	var who callerFlags
	var server, args string
	cmd := &cobra.Command{
		Use:   "authorize NAME [--server SERVER] --args JSON",
		Short: "Ask whether the caller may run a tool with these arguments (exit 2 when denied)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, pos []string) error {
			client, ctx, done, err := cf.discovery(cmd)
			if err != nil {
				return err
			}
			defer done()
			server, name := splitRef(pos[0], server)
			resp, err := client.AuthorizeCall(ctx, &pb.AuthorizeCallRequest{Caller: who.caller(), Name: name, Server: server, ArgumentsJson: args})
			if err != nil {
				return err
			}
			if cf.output == "json" {
				if err := printPlainJSON(authorizeOut(resp)); err != nil {
					return err
				}
			} else {
				verdict := "DENIED"
				if resp.Allowed {
					verdict = "ALLOWED"
				}
				fmt.Printf("%s: %s\n", verdict, resp.Message)
				for _, v := range resp.Violations {
					fmt.Printf("  - %s\n", v)
				}
			}
			if !resp.Allowed {
				return exitError{code: 2, msg: "denied: " + resp.Decision.String()}
			}
			return nil
		},
	}
	cf.register(cmd)
	who.register(cmd)
	cmd.Flags().StringVar(&server, "server", "", "server namespace")
	cmd.Flags().StringVar(&args, "args", "{}", "the call's arguments as a JSON object")
	return cmd
}

func searchCmd() *cobra.Command {
	var cf clientFlags
	var who callerFlags
	var pageSize int
	var cursor string
	cmd := &cobra.Command{
		Use:   `search ["QUERY"]`,
		Short: "Names and summaries of the caller's tools, ranked by a query or all in order",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			client, ctx, done, err := cf.discovery(cmd)
			if err != nil {
				return err
			}
			defer done()
			q := ""
			if len(args) == 1 {
				q = args[0]
			}
			resp, err := client.SearchTools(ctx, &pb.SearchToolsRequest{Caller: who.caller(), Query: q, PageSize: int32(pageSize), Cursor: cursor})
			if err != nil {
				return err
			}
			if cf.output == "json" {
				return printPlainJSON(searchOut(resp.Tools, nil, resp.NextCursor, false))
			}
			rows := make([][]string, 0, len(resp.Tools))
			for _, t := range resp.Tools {
				rows = append(rows, []string{t.Server + "/" + t.Name, cards.Cut(t.Summary, 90)})
			}
			if err := table([]string{"TOOL", "SUMMARY"}, rows); err != nil {
				return err
			}
			if resp.NextCursor != "" {
				fmt.Fprintf(os.Stderr, "more: --cursor %s\n", resp.NextCursor)
			}
			return nil
		},
	}
	cf.register(cmd)
	who.register(cmd)
	cmd.Flags().IntVar(&pageSize, "page-size", 0, "page size (default 20, at most 100)")
	cmd.Flags().StringVar(&cursor, "cursor", "", "cursor from a previous page")
	return cmd
}
