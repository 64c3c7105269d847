package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/seed0cff8200/cardex/internal/ops/buildinfo"
)

func versionCmd() *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print cardex's version and the commit it was built from",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			i := buildinfo.Read()
			if output == "json" {
				return printPlainJSON(i)
			}
			_, err := fmt.Println(i.String())
			return err
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}
