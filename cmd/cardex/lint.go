package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/ops/lint"
	"github.com/seed0cff8200/cardex/internal/telemetry/feedback"
)

func cardsLintCmd() *cobra.Command {
	var path, feedbackPath, output string
	var remote clientFlags
	var tenant, server string
	var similarity float64
	var strict bool
	cmd := &cobra.Command{
		Use:   "lint -f FILE|DIR | --tenant T [--server S] [--feedback DATA_DIR/feedback.jsonl]",
		Short: "Flag look-alike cards without when_not_to_use, cards without aliases, and cards that recorded misses point to",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var in []cards.Card
			var err error
			switch {
			case path != "" && tenant != "":
				return fmt.Errorf("give -f FILE|DIR or --tenant, not both")
			case tenant != "":
				// The cards as the running server holds them (imported ones too).
				if in, err = remoteCards(cmd, &remote, tenant, server); err != nil {
					return err
				}
			case path == "":
				return fmt.Errorf("-f FILE|DIR or --tenant is required")
			default:
				var sources []string
				if in, sources, err = cards.LoadPath(path); err != nil {
					return err
				}
				for i := range in {
					if err := cards.Normalize(&in[i]); err != nil {
						return fmt.Errorf("%s: %w", sources[i], err)
					}
				}
			}
			var events []feedback.Event
			if feedbackPath != "" {
				if events, err = feedback.ReadEvents(feedbackPath); err != nil {
					return err
				}
			}
			fs, err := lint.Run(cmd.Context(), in, events, embed.NewHashed(embed.DefaultDim), lint.Options{Similarity: similarity})
			if err != nil {
				return err
			}
			if output == "json" {
				if fs == nil {
					fs = []lint.Finding{}
				}
				if err := printPlainJSON(fs); err != nil {
					return err
				}
			} else {
				rows := make([][]string, 0, len(fs))
				for _, f := range fs {
					rows = append(rows, []string{f.Kind, f.Card.Tenant + "/" + f.Card.Server + "/" + f.Card.Name, f.Message})
				}
				if err := table([]string{"KIND", "CARD", "FINDING"}, rows); err != nil {
					return err
				}
				fmt.Fprintf(os.Stderr, "%d cards, %d findings\n", len(in), len(fs))
			}
			if strict && len(fs) > 0 {
				return exitError{code: 3, msg: fmt.Sprintf("%d findings (--strict)", len(fs))}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&path, "file", "f", "", "card file or directory")
	f.StringVar(&feedbackPath, "feedback", "", "feedback log (DATA_DIR/feedback.jsonl) for miss-based findings and alias suggestions")
	f.Float64Var(&similarity, "similarity", lint.DefaultSimilarity, "cosine at or above which two cards look alike")
	f.BoolVar(&strict, "strict", false, "exit 3 when there are findings")
	f.StringVarP(&output, "output", "o", "table", "table or json")
	f.StringVar(&tenant, "tenant", "", "lint this tenant's cards on the running server instead of files")
	f.StringVar(&server, "server", "", "with --tenant: only this server namespace")
	f.StringVar(&remote.addr, "addr", envOr("CARDEX_ADDR", "127.0.0.1:50051"), "with --tenant: server address (env CARDEX_ADDR)")
	f.StringVar(&remote.token, "catalog-token", os.Getenv("CARDEX_CATALOG_TOKEN"), "with --tenant: catalog token (env CARDEX_CATALOG_TOKEN)")
	remote.timeout, remote.output = 30*time.Second, "table"
	return cmd
}

// remoteCards reads a tenant's cards (of one server, or all) from the
// running server.
func remoteCards(cmd *cobra.Command, cf *clientFlags, tenant, server string) ([]cards.Card, error) {
	client, ctx, done, err := cf.catalog(cmd)
	if err != nil {
		return nil, err
	}
	defer done()
	return grpcCatalog{c: client}.List(ctx, tenant, server)
}
