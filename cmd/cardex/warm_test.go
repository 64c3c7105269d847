package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/internal/telemetry/feedback"
)

// summaryRow returns the recall@5 columns (cold, phrasings, companions,
// both, both with the top pins) of a --warm summary row.
func summaryRow(t *testing.T, out, row string) []float64 {
	t.Helper()
	_, summary, ok := strings.Cut(out, "### Summary: hybrid recall@5")
	if !ok {
		t.Fatalf("no summary in:\n%s", out)
	}
	for _, l := range strings.Split(summary, "\n") {
		if !strings.HasPrefix(l, row) {
			continue
		}
		var vs []float64
		for _, f := range strings.Split(strings.Trim(strings.TrimPrefix(l, row), " |"), "|") {
			v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
			if err != nil {
				t.Fatalf("row %q: %v", l, err)
			}
			vs = append(vs, v)
		}
		if len(vs) < 5 {
			t.Fatalf("row %q: %d columns", l, len(vs))
		}
		return vs
	}
	t.Fatalf("no row %q in the summary:\n%s", row, summary)
	return nil
}

// TestEvalWarmFrom: another labelled set of the same catalogue, and a
// feedback log written by the service's own recorder, each replayed before
// the fixture is measured; the odd query the lessons teach is then found.
func TestEvalWarmFrom(t *testing.T) {
	bin := buildBinary(t)
	dir := t.TempDir()
	fixture := filepath.Join("..", "..", "eval", "testdata", "tiny")
	tools, err := os.ReadFile(filepath.Join(fixture, "tools.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	eval := func(args ...string) (string, string, error) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"eval", fixture, "--out", "", "--misses", ""}, args...)...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		return string(out), stderr.String(), err
	}
	folder := func(name, queries string, extraTools ...string) string {
		d := filepath.Join(dir, name)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "tools.jsonl"), append(tools, []byte(strings.Join(extraTools, ""))...), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "queries.jsonl"), []byte(queries), 0o644); err != nil {
			t.Fatal(err)
		}
		return d
	}

	// A labelled folder: q5's odd words, taught by a query of another set.
	train := folder("train", `{"id": "t1", "query": "zzqx plorb", "expected": ["github/search", "stocks/get_quote"]}`+"\n")
	out, stderr, err := eval("--warm-from", train)
	if err != nil {
		t.Fatalf("--warm-from a folder: %v\n%s", err, stderr)
	}
	if r := summaryRow(t, out, "| all (5) | query |"); !(r[1] > r[0]) || r[2] != r[0] {
		t.Errorf("--warm-from a folder: recall@5 cold, phrasings, companions, both = %v; want phrasings above cold", r)
	}
	if !strings.Contains(stderr, "the outcomes of 1 queries of "+train+" replayed, 5 queries measured") {
		t.Errorf("stderr: %s", stderr)
	}

	// The same through the guard, with the replayed query as the labelled
	// set: the lesson helps it, so it is applied.
	out, stderr, err = eval("--warm-from", train, "--warm-guard")
	if err != nil {
		t.Fatalf("--warm-guard: %v\n%s", err, stderr)
	}
	if r := summaryRow(t, out, "| all (5) | query |"); len(r) != 6 || r[5] != r[3] || !strings.Contains(out, "through the guard with those 1 queries as the labelled set: 0 changes held back") {
		t.Errorf("--warm-guard: recall@5 %v\n%s", r, out)
	}

	// A feedback log written by the recorder, as `cardex serve` writes it:
	// one session that used github/search for the odd words, then the quote.
	logPath := filepath.Join(dir, "feedback.jsonl")
	rec, err := feedback.New(context.Background(), feedback.Config{Path: logPath, Hash: func(s string) string { return "h" + strconv.Itoa(len(s)) }, RawQueries: true})
	if err != nil {
		t.Fatal(err)
	}
	for i, used := range []feedback.Tool{{Server: "github", Name: "search"}, {Server: "stocks", Name: "get_quote"}, {Server: "gone", Name: "tool"}} {
		id := "d" + strconv.Itoa(i)
		rec.Remember(feedback.Discovery{ID: id, Tenant: "acme", Subject: "u", SessionID: "s1", Query: "zzqx plorb"})
		if _, err := rec.Outcome(context.Background(), "acme", "u", id, &used, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := rec.Close(); err != nil {
		t.Fatal(err)
	}
	out, stderr, err = eval("--warm-from", logPath)
	if err != nil {
		t.Fatalf("--warm-from a feedback log: %v\n%s", err, stderr)
	}
	if r := summaryRow(t, out, "| all (5) | query |"); !(r[1] > r[0]) {
		t.Errorf("--warm-from a feedback log: recall@5 %v; want phrasings above cold", r)
	}
	if !strings.Contains(stderr, "3 outcomes (1 sessions of two or more tools); 1 naming tools this catalogue lacks were left out") ||
		!strings.Contains(out, "1 sessions of co-usage") {
		t.Errorf("--warm-from a feedback log:\nstderr %s\nstdout %s", stderr, out)
	}

	// Refusals.
	other := filepath.Join(dir, "other.jsonl")
	b, _ := os.ReadFile(logPath)
	if err := os.WriteFile(other, append(b, []byte(strings.ReplaceAll(string(b), `"tenant":"acme"`, `"tenant":"globex"`))...), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--warm-from", other}, "name one with --warm-tenant"},
		{[]string{"--warm", "--warm-from", train}, "give one"},
		{[]string{"--warm-from", folder("foreign", `{"id": "x", "query": "q", "expected": ["nope/none"]}`+"\n",
			`{"name": "nope/none", "server": "nope", "tool_name": "none", "description": "Not in the fixture."}`+"\n")}, `needs "nope/none"`},
		{[]string{"--warm-from", filepath.Join(dir, "missing")}, "no such file"},
	} {
		if _, stderr, err := eval(tc.args...); err == nil || !strings.Contains(stderr, tc.want) {
			t.Errorf("eval %v: %v, stderr %q; want an error saying %q", tc.args, err, stderr, tc.want)
		}
	}
	if _, stderr, err := eval("--warm-from", other, "--warm-tenant", "globex"); err != nil {
		t.Errorf("--warm-tenant globex: %v\n%s", err, stderr)
	}
}
