package main

import (
	"log/slog"
	"os"
)

// Log formats of serve's --log-format.
const (
	logText = "text"
	logJSON = "json"
)

// newFormatLogger is newLogger in a format: text (slog's key=value lines)
// or json (one JSON object a line, for log collectors).
func newFormatLogger(level, format string) (*slog.Logger, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: l}
	switch format {
	case logText:
		return slog.New(slog.NewTextHandler(os.Stderr, opts)), nil
	case logJSON:
		return slog.New(slog.NewJSONHandler(os.Stderr, opts)), nil
	}
	return nil, usageError("--log-format %q: use text or json", format)
}
