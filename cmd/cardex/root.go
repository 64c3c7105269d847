package main

import (
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
)

// exitError carries a specific exit code (2: a denial from authorize).
type exitError struct {
	code int
	msg  string
}

func (e exitError) Error() string { return e.msg }

func rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "cardex",
		Short:         "Capability-card retrieval for AI agents: the right few tools per turn, permission-filtered",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(serveCmd(), cardsCmd(), discoverCmd(), describeCmd(), authorizeCmd(), searchCmd(), reindexCmd(), migrateCmd())
	root.AddCommand(evalCmd())
	root.AddCommand(importCmd(), toolsCmd())
	root.AddCommand(serversCmd())
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
