package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/execution/upstream"
	"github.com/seed0cff8200/cardex/internal/telemetry/discoverylog"
	"github.com/seed0cff8200/cardex/internal/telemetry/feedback"
)

// A log of the data directory: its file, and how a line becomes a row.
type logKind struct {
	file   string
	header []string
	row    func(line []byte) ([]string, string, error) // the row and the tenant
}

var logKinds = map[string]logKind{
	"discoveries": {file: "discoveries.jsonl", header: []string{"TIME", "DISCOVERY", "TENANT", "QUERY", "RETURNED", "OF", "MS", "FLAGS"},
		row: func(line []byte) ([]string, string, error) {
			var e discoverylog.Entry
			if err := json.Unmarshal(line, &e); err != nil {
				return nil, "", err
			}
			names := make([]string, 0, len(e.Returned))
			for _, r := range e.Returned {
				names = append(names, r.Server+"/"+r.Name)
			}
			var flags []string
			if e.LowConfidence {
				flags = append(flags, "low_confidence")
			}
			if e.Degraded {
				flags = append(flags, "degraded")
			}
			return []string{stamp(e.Time), e.ID, e.Tenant, query(e.Query, e.QueryHash), cards.Cut(strings.Join(names, ", "), 60),
				strconv.Itoa(e.CandidateCount), fmt.Sprintf("%.1f", e.LatencyMS), dash(strings.Join(flags, ","))}, e.Tenant, nil
		}},
	"feedback": {file: "feedback.jsonl", header: []string{"TIME", "TYPE", "TENANT", "DISCOVERY", "TOOL", "MISS", "QUERY"},
		row: func(line []byte) ([]string, string, error) {
			var e feedback.Event
			if err := json.Unmarshal(line, &e); err != nil {
				return nil, "", err
			}
			tool := "-"
			switch {
			case e.Tool != nil:
				tool = e.Tool.Server + "/" + e.Tool.Name
			case e.NoneFit:
				tool = "(none fit)"
			}
			return []string{stamp(e.Time), e.Type, e.Tenant, dash(e.DiscoveryID), tool, strconv.FormatBool(e.Miss), query(e.Query, e.QueryHash)}, e.Tenant, nil
		}},
	"audit": {file: "audit.jsonl", header: []string{"TIME", "EXECUTION", "VIA", "TENANT", "TOOL", "OUTCOME", "MS", "DETAIL"},
		row: func(line []byte) ([]string, string, error) {
			var e upstream.AuditEntry
			if err := json.Unmarshal(line, &e); err != nil {
				return nil, "", err
			}
			tool := e.Tool
			if e.Server != "" {
				tool = e.Server + "/" + e.Tool
			}
			return []string{stamp(e.Time), e.ID, e.Via, e.Tenant, dash(tool), e.Outcome, fmt.Sprintf("%.1f", e.LatencyMS), dash(cards.Cut(e.Detail, 80))}, e.Tenant, nil
		}},
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// query is the query as logged: raw, or its keyed hash, or not at all.
func query(raw, hash string) string {
	switch {
	case raw != "":
		return cards.Cut(raw, 60)
	case hash != "":
		return "(hash " + cards.Cut(hash, 12) + ")"
	}
	return "-"
}

func logsCmd() *cobra.Command {
	var dataDir, output, tenant string
	var follow bool
	var tail int
	cmd := &cobra.Command{
		Use:   "logs discoveries|feedback|audit [--data-dir DIR] [--follow] [--tail N] [-o json]",
		Short: "Read the data directory's logs (discoveries, feedback, audit) as a table",
		Long: `Reads one of the JSON Lines logs of a cardex data directory:
  discoveries  DATA_DIR/discoveries.jsonl: every DiscoverTools answer
  feedback     DATA_DIR/feedback.jsonl: outcomes, implicit misses, low-confidence discoveries
  audit        DATA_DIR/audit.jsonl: every call_tool, allowed or refused
as a table, or with -o json as the JSON Lines themselves. --follow keeps reading as the server
appends (Ctrl-C stops); --tail N starts with the last N records.`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"discoveries", "feedback", "audit"},
		RunE: func(cmd *cobra.Command, args []string) error {
			kind, ok := logKinds[args[0]]
			if !ok {
				return usageError("logs %q: want discoveries, feedback or audit", args[0])
			}
			if err := checkOutput(output); err != nil {
				return err
			}
			if tail < 0 {
				return usageError("--tail %d: give a number of records, 0 for all", tail)
			}
			path := filepath.Join(dataDir, kind.file)
			ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			return readLog(ctx, path, kind, logOptions{json: output == "json", tenant: tenant, follow: follow, tail: tail}, os.Stdout, os.Stderr)
		},
	}
	f := cmd.Flags()
	f.StringVar(&dataDir, "data-dir", envOr("CARDEX_DATA_DIR", "./cardex-data"), "the server's data directory (env CARDEX_DATA_DIR)")
	f.StringVarP(&output, "output", "o", "table", "output format: table or json (the JSON Lines)")
	f.StringVar(&tenant, "tenant", "", "only this tenant's records")
	f.BoolVarP(&follow, "follow", "f", false, "keep reading as records are appended")
	f.IntVar(&tail, "tail", 0, "start with the last N records (default: all)")
	return cmd
}

type logOptions struct {
	json, follow bool
	tenant       string
	tail         int
}

// followEvery is how often --follow looks for new records.
const followEvery = 250 * time.Millisecond

// readLog prints the records of path, and with follow the ones appended
// later, until ctx ends. A file that shrinks (rotated or truncated) is read
// again from its start.
func readLog(ctx context.Context, path string, kind logKind, o logOptions, out, errw io.Writer) error {
	f, err := os.Open(path)
	for errors.Is(err, os.ErrNotExist) && o.follow {
		// The server creates the file on its first record.
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(followEvery):
		}
		f, err = os.Open(path)
	}
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s: no such log (is --data-dir the server's data directory? the file appears with its first record)", path)
		}
		return err
	}
	defer func() { f.Close() }()
	var (
		offset  int64
		partial []byte // a line not yet ended by a newline
		lineNo  int
		first   = true
	)
	for {
		var lines [][]byte
		r := bufio.NewReaderSize(f, 1<<16)
		for {
			chunk, err := r.ReadBytes('\n')
			offset += int64(len(chunk))
			if len(chunk) > 0 && chunk[len(chunk)-1] == '\n' {
				lines = append(lines, append(partial, chunk[:len(chunk)-1]...))
				partial = nil
			} else {
				partial = append(partial, chunk...)
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					return err
				}
				break
			}
		}
		if first && o.tail > 0 && len(lines) > o.tail {
			lineNo += len(lines) - o.tail
			lines = lines[len(lines)-o.tail:]
		}
		if err := printLines(lines, &lineNo, kind, o, out, errw, first); err != nil {
			return err
		}
		first = false
		if !o.follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(followEvery):
		}
		if st, err := os.Stat(path); err == nil && st.Size() < offset {
			// Rotated or truncated: start again at the top of the new file.
			nf, err := os.Open(path)
			if err != nil {
				return err
			}
			f.Close()
			f, offset, partial = nf, 0, nil
			continue
		}
		if _, err := f.Seek(offset, io.SeekStart); err != nil {
			return err
		}
	}
}

func printLines(lines [][]byte, lineNo *int, kind logKind, o logOptions, out, errw io.Writer, header bool) error {
	var w *tabwriter.Writer
	if !o.json {
		w = tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
		if header {
			fmt.Fprintln(w, strings.Join(kind.header, "\t"))
		}
	}
	for _, line := range lines {
		*lineNo++
		line = bytes.TrimSpace(line)
		if len(line) == 0 {
			continue
		}
		row, tenant, err := kind.row(line)
		if err != nil {
			fmt.Fprintf(errw, "%s line %d: not a record: %v\n", kind.file, *lineNo, err)
			continue
		}
		if o.tenant != "" && tenant != o.tenant {
			continue
		}
		if o.json {
			if _, err := fmt.Fprintf(out, "%s\n", line); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintln(w, strings.Join(row, "\t"))
	}
	if w != nil {
		return w.Flush()
	}
	return nil
}
