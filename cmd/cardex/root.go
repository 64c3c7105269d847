package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/seed0cff8200/cardex/internal/ops/buildinfo"
)

// exitError carries a specific exit code: 2 for usage errors and refusals
// (a denial from authorize, a refused call), 3 for findings (lint --strict,
// migrate status with pending migrations).
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

// usageError is a bad flag or argument: exit status 2.
func usageError(format string, args ...any) error {
	return exitError{code: 2, msg: fmt.Sprintf(format, args...)}
}

// addCheck runs check before the command, after any check added before it.
func addCheck(cmd *cobra.Command, check func() error) {
	prev := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		if prev != nil {
			if err := prev(c, args); err != nil {
				return err
			}
		}
		return check()
	}
}

// usageExits makes every usage error of cmd and its subcommands — an
// unknown flag or command, a wrong number of arguments — exit 2.
func usageExits(cmd *cobra.Command) {
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError("%v (see '%s --help')", err, c.CommandPath())
	})
	args := cmd.Args
	if cmd.HasSubCommands() && !cmd.Runnable() {
		// A group: help when called alone, an unknown command otherwise.
		cmd.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
		if args == nil {
			args = cobra.NoArgs
		}
	}
	if args != nil {
		cmd.Args = func(c *cobra.Command, a []string) error {
			if err := args(c, a); err != nil {
				return usageError("%v (see '%s --help')", err, c.CommandPath())
			}
			return nil
		}
	}
	for _, sub := range cmd.Commands() {
		usageExits(sub)
	}
}

func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "cardex",
		Short:         "Capability-card retrieval for AI agents: the right few tools per turn, permission-filtered",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       buildinfo.Read().String(),
	}
	root.SetVersionTemplate("{{.Version}}\n")
	root.AddCommand(serveCmd(), cardsCmd(), discoverCmd(), describeCmd(), authorizeCmd(), searchCmd(), reindexCmd(), migrateCmd())
	root.AddCommand(evalCmd())
	root.AddCommand(importCmd(), enrichCmd(), toolsCmd())
	root.AddCommand(serversCmd())
	root.AddCommand(versionCmd(), outcomeCmd(), logsCmd(), healthCmd())
	root.AddCommand(tokenCmd())
	root.AddCommand(benchCmd())
	usageExits(root)
	return root
}

func newLogger(level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l}))
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
