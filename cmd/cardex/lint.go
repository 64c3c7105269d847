package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/feedback"
	"github.com/seed0cff8200/cardex/internal/lint"
)

func cardsLintCmd() *cobra.Command {
	var path, feedbackPath, output string
	var similarity float64
	var strict bool
	cmd := &cobra.Command{
		Use:   "lint -f FILE|DIR [--feedback DATA_DIR/feedback.jsonl]",
		Short: "Flag look-alike cards without when_not_to_use, cards without aliases, and cards that recorded misses point to",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if path == "" {
				return fmt.Errorf("-f FILE|DIR is required")
			}
			in, sources, err := cards.LoadPath(path)
			if err != nil {
				return err
			}
			for i := range in {
				if err := cards.Normalize(&in[i]); err != nil {
					return fmt.Errorf("%s: %w", sources[i], err)
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
	return cmd
}
