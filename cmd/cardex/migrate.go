package main

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

// migrateCmd: cardex migrate up|status against --database-url.
func migrateCmd() *cobra.Command {
	var sf storeFlags
	var logLevel string
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply or show the PostgreSQL schema migrations (embedded in this binary)",
	}
	cmd.PersistentFlags().StringVar(&logLevel, "log-level", "info", "debug, info, warn or error")
	up := &cobra.Command{
		Use:   "up",
		Short: "Apply every pending migration",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := newLogger(logLevel)
			st, err := sf.openPostgres(log)
			if err != nil {
				return err
			}
			defer st.Close()
			applied, err := st.Migrate(cmd.Context())
			if err != nil {
				return err
			}
			status, err := st.MigrationStatus(cmd.Context())
			if err != nil {
				return err
			}
			var current int64
			for _, m := range status {
				if m.Applied {
					current = m.Version
				}
			}
			if len(applied) == 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "schema %q is current (version %d); nothing to apply\n", st.Schema(), current)
			} else {
				fmt.Fprintf(cmd.OutOrStdout(), "applied %d migration(s) to schema %q; now at version %d\n", len(applied), st.Schema(), current)
			}
			return nil
		},
	}
	status := &cobra.Command{
		Use:   "status",
		Short: "List the migrations and whether each is applied (exit 3 when some are pending)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := sf.openPostgres(newLogger(logLevel))
			if err != nil {
				return err
			}
			defer st.Close()
			ms, err := st.MigrationStatus(cmd.Context())
			if err != nil {
				return err
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			fmt.Fprintln(w, "VERSION\tMIGRATION\tSTATE")
			pending := 0
			for _, m := range ms {
				state := "applied"
				if !m.Applied {
					state, pending = "pending", pending+1
				}
				fmt.Fprintf(w, "%d\t%s\t%s\n", m.Version, m.Name, state)
			}
			_ = w.Flush()
			if pending > 0 {
				return exitError{code: 3, msg: fmt.Sprintf("%d migration(s) pending: run `cardex migrate up`", pending)}
			}
			return nil
		},
	}
	for _, c := range []*cobra.Command{up, status} {
		sf.registerDatabase(c)
		cmd.AddCommand(c)
	}
	return cmd
}
