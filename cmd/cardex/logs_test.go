package main

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestOutcomeAndLogs: report outcomes with `cardex outcome` and read them
// back, with the discoveries, through `cardex logs`, as tables, as JSON and
// followed.
func TestOutcomeAndLogs(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	data := t.TempDir()
	addr, _ := startServer(t, bin, data)
	if _, code := run(t, bin, addr, "cards", "apply", "-f", "../../examples/"); code != 0 {
		t.Fatal("apply")
	}
	support := []string{"--tenant", "acme", "--scopes", "support:read,support:write,orders:read,billing:read", "--subject", "agent-7"}
	discover := func(q string) string {
		t.Helper()
		out, code := run(t, bin, addr, append([]string{"discover", q, "-o", "json"}, support...)...)
		var r struct {
			DiscoveryID string `json:"discovery_id"`
		}
		if code != 0 || json.Unmarshal([]byte(out), &r) != nil || r.DiscoveryID == "" {
			t.Fatalf("discover: exit %d\n%s", code, out)
		}
		return r.DiscoveryID
	}
	id := discover("customer wants their money back for order 1234")
	out, code := run(t, bin, addr, append([]string{"outcome", id, "--used", "billing/request_refund_approval"}, support...)...)
	if code != 0 || !strings.Contains(out, "was used and was in the shortlist") {
		t.Fatalf("outcome --used: exit %d\n%s", code, out)
	}
	id2 := discover("print a shipping label for a return")
	out, code = run(t, bin, addr, append([]string{"outcome", id2, "--none-fit", "-o", "json"}, support...)...)
	if code != 0 || !strings.Contains(out, `"miss": true`) {
		t.Fatalf("outcome --none-fit: exit %d\n%s", code, out)
	}
	for _, tc := range []struct {
		args []string
		code int
	}{
		{append([]string{"outcome", id}, support...), 2},
		{append([]string{"outcome", id, "--none-fit", "--used", "x/y"}, support...), 2},
		{append([]string{"outcome", id, "--used", "billing/issue_refund"}, support...), 1}, // not the caller's to use
		{[]string{"outcome", id, "--none-fit", "--tenant", "acme", "--subject", "someone-else"}, 1},
	} {
		if _, code := run(t, bin, addr, tc.args...); code != tc.code {
			t.Errorf("%v: exit %d, want %d", tc.args, code, tc.code)
		}
	}

	out, code = run(t, bin, "", "logs", "discoveries", "--data-dir", data)
	if code != 0 || !strings.HasPrefix(out, "TIME") || !strings.Contains(out, id) || !strings.Contains(out, "customer wants their money back") ||
		!strings.Contains(out, "billing/request_refund_approval") {
		t.Fatalf("logs discoveries: exit %d\n%s", code, out)
	}
	out, code = run(t, bin, "", "logs", "feedback", "--data-dir", data, "-o", "json")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var ev struct {
		Type, DiscoveryID string
		Miss              bool
	}
	if code != 0 || len(lines) != 2 || json.Unmarshal([]byte(lines[1]), &ev) != nil || !ev.Miss {
		t.Fatalf("logs feedback -o json: exit %d\n%s", code, out)
	}
	if out, _ := run(t, bin, "", "logs", "feedback", "--data-dir", data, "--tail", "1"); !strings.Contains(out, "(none fit)") || strings.Contains(out, "request_refund_approval") {
		t.Fatalf("logs feedback --tail 1:\n%s", out)
	}
	if out, _ := run(t, bin, "", "logs", "discoveries", "--data-dir", data, "--tenant", "globex"); strings.Contains(out, "acme") {
		t.Fatalf("logs --tenant globex shows acme:\n%s", out)
	}
	if out, code := run(t, bin, "", "logs", "audit", "--data-dir", data); code != 0 || strings.Count(out, "\n") != 1 {
		t.Errorf("logs audit with no call yet: exit %d\n%s", code, out)
	}
	if _, code := run(t, bin, "", "logs", "audit", "--data-dir", filepath.Join(data, "nope")); code != 1 {
		t.Errorf("logs of a directory without logs: exit %d, want 1", code)
	}
	if _, code := run(t, bin, "", "logs", "nope", "--data-dir", data); code != 2 {
		t.Errorf("logs nope: exit %d, want 2", code)
	}

	// --follow prints what is appended, and stops cleanly on SIGINT.
	f := exec.Command(bin, "logs", "discoveries", "--data-dir", data, "--follow", "--tail", "1", "-o", "json")
	stdout, err := f.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Start(); err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 10)
	go func() {
		sc := bufio.NewScanner(stdout)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			got <- sc.Text()
		}
	}()
	wait := func(want string) {
		t.Helper()
		for {
			select {
			case line := <-got:
				if strings.Contains(line, want) {
					return
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("--follow did not print %s", want)
			}
		}
	}
	wait(id2)
	id3 := discover("restart the payments service")
	wait(id3)
	f.Process.Signal(syscall.SIGINT)
	if err := f.Wait(); err != nil {
		t.Fatalf("logs --follow after SIGINT: %v", err)
	}
}

// TestFollowRotation: a log that is truncated or replaced is read again
// from its start, and a record written in two pieces is printed once whole.
func TestFollowRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	rec := func(id string) string {
		return `{"execution_id":"` + id + `","time":"2025-01-02T03:04:05Z","tenant":"acme","outcome":"ok"}` + "\n"
	}
	if err := os.WriteFile(path, []byte(rec("one")), 0o600); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var out strings.Builder
	w := writerFunc(func(p []byte) (int, error) { mu.Lock(); defer mu.Unlock(); return out.Write(p) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- readLog(ctx, path, logKinds["audit"], logOptions{json: true, follow: true}, w, w) }()
	waitFor := func(s string) {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for {
			mu.Lock()
			has := strings.Contains(out.String(), s)
			mu.Unlock()
			if has {
				return
			}
			if time.Now().After(deadline) {
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("no %q in:\n%s", s, out.String())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor(`"one"`)
	fh, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	r := rec("two")
	fh.WriteString(r[:20])
	time.Sleep(3 * followEvery)
	fh.WriteString(r[20:])
	fh.Close()
	waitFor(`"two"`)
	if err := os.WriteFile(path, []byte(rec("3")), 0o600); err != nil { // truncated: shorter than before
		t.Fatal(err)
	}
	waitFor(`"execution_id":"3"`)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if n := strings.Count(out.String(), "\n"); n != 3 || strings.Contains(out.String(), "not a record") {
		t.Fatalf("want 3 whole records:\n%s", out.String())
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
