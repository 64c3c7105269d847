// Package docs_test runs the command examples of README.md, SECURITY.md and
// docs/*.md against a real `cardex serve` and compares what they print with
// what the pages say (the marker convention: README.md, "Tested examples",
// and doctest_parse_test.go).
package docs_test

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/seed0cff8200/cardex/internal/testkit/pgtest"
)

// guides must each hold at least one tested example.
var guides = []string{
	"README.md", "SECURITY.md",
	"docs/API.md", "docs/CLI.md", "docs/MCP.md", "docs/IMPORTS.md", "docs/OPERATIONS.md",
	"docs/CONSOLE.md", "docs/EVAL.md", "docs/BENCHMARKS.md", "docs/INTEGRATIONS.md",
	"docs/SCALING.md", "docs/ENRICHMENT.md",
}

// The addresses the pages use for the server; the page's real server
// stands in for them.
const (
	docGRPC = "127.0.0.1:50051"
	docHTTP = "127.0.0.1:8080"
)

// linked are the repository's folders a page's commands may read, linked
// into each page's working directory.
var linked = []string{"examples", "testdata", "eval"}

const commandTimeout = 2 * time.Minute

// pages lists the Markdown pages whose examples run.
func pages(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, d := range docs {
		out = append(out, "docs/"+d)
	}
	return append([]string{"README.md", "SECURITY.md"}, out...)
}

func TestDocumentedExamples(t *testing.T) {
	if testing.Short() && os.Getenv("CI") != "true" {
		t.Skip("builds the binary and runs every page's examples against a server (never skipped under CI=true)")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	parsed := map[string][]step{}
	for _, page := range pages(t) {
		body, err := os.ReadFile(filepath.Join(root, page))
		if err != nil {
			t.Fatal(err)
		}
		steps, err := parse(string(body))
		if err != nil {
			t.Fatalf("%s: %v", page, err)
		}
		parsed[page] = steps
	}
	for _, g := range guides {
		if !slices.ContainsFunc(parsed[g], func(s step) bool { return s.kind == stepCommand && !s.hidden }) {
			t.Errorf("%s has no tested example (a ```sh doctest block)", g)
		}
	}
	bin := buildBinary(t, root)
	for _, page := range pages(t) {
		steps := parsed[page]
		if len(steps) == 0 {
			continue
		}
		t.Run(page, func(t *testing.T) {
			t.Parallel()
			runPage(t, root, bin, page, steps)
		})
	}
}

func buildBinary(t *testing.T, root string) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "cardex")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/cardex")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// session is one page's run: its working directory, server and variables.
type session struct {
	t        *testing.T
	root     string
	bin      string
	page     string
	dir      string
	server   *server
	database string // DATABASE_URL, when a database directive made one
}

func runPage(t *testing.T, root, bin, page string, steps []step) {
	s := &session{t: t, root: root, bin: bin, page: page, dir: t.TempDir()}
	for _, l := range linked {
		if err := os.Symlink(filepath.Join(root, l), filepath.Join(s.dir, l)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(bin, filepath.Join(s.dir, "cardex")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(s.dir, "tmp"), 0o700); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if s.server != nil {
			s.server.stop()
		}
	})
	for _, st := range steps {
		switch st.kind {
		case stepServe:
			s.serve(st)
		case stepDatabase:
			if !s.createDatabase(st) {
				return
			}
		case stepCommand:
			if s.server == nil {
				s.serve(step{line: st.line})
			}
			s.run(st)
		}
	}
}

// where names a step for a failure message.
func (s *session) where(st step) string { return fmt.Sprintf("%s:%d", s.page, st.line) }

// serve (re)starts the page's server with the step's flags.
func (s *session) serve(st step) {
	s.t.Helper()
	if s.server != nil {
		s.server.stop()
		s.server = nil
	}
	srv, err := startServer(s.bin, s.dir, s.env(nil), strings.Fields(st.command))
	if err != nil {
		s.t.Fatalf("%s: cardex serve %s: %v", s.where(st), st.command, err)
	}
	s.server = srv
}

// createDatabase makes a fresh database on the native PostgreSQL of
// scripts/test and gives its URL to the page's commands as DATABASE_URL.
func (s *session) createDatabase(st step) bool {
	s.t.Helper()
	base := os.Getenv("CARDEX_TEST_NATIVE_PG_URL")
	if base == "" {
		if os.Getenv("CI") == "true" {
			s.t.Fatalf("%s: a database example needs CARDEX_TEST_NATIVE_PG_URL (./scripts/test sets it)", s.where(st))
		}
		s.t.Logf("%s: CARDEX_TEST_NATIVE_PG_URL is not set (./scripts/test sets it): the rest of the page is not run", s.where(st))
		return false
	}
	var b [5]byte
	_, _ = rand.Read(b[:])
	name := "doctest_" + hex.EncodeToString(b[:])
	pgtest.Exec(s.t, base, "CREATE DATABASE "+name)
	s.t.Cleanup(func() { pgtest.Exec(s.t, base, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)") })
	cfg, err := pgx.ParseConfig(base)
	if err != nil {
		s.t.Fatal(err)
	}
	s.database = fmt.Sprintf("postgres://%s@%s:%d/%s?sslmode=disable", cfg.User, cfg.Host, cfg.Port, name)
	return true
}

// env is the environment of the page's processes: nothing of the test's
// own but PATH (with the binary first), and the page's server.
func (s *session) env(srv *server) []string {
	env := []string{
		"PATH=" + filepath.Dir(s.bin) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + s.dir,
		"TMPDIR=" + filepath.Join(s.dir, "tmp"),
		"LANG=C.UTF-8",
		"TERM=dumb",
	}
	if srv != nil {
		env = append(env, "CARDEX_ADDR="+srv.grpc)
	}
	if s.database != "" {
		env = append(env, "DATABASE_URL="+s.database)
	}
	return env
}

// eventuallyFor bounds how long a command marked eventually is run again
// until it prints what the page says.
const eventuallyFor = 10 * time.Second

// envFile keeps the variables a page's commands set, from one to the next.
const envFile = ".doctest-env"

// run runs one command and compares its output with the page.
func (s *session) run(st step) {
	s.t.Helper()
	command := strings.NewReplacer(docGRPC, s.server.grpc, docHTTP, s.server.http).Replace(st.command)
	// set -a exports what the command assigns; export -p carries it to the
	// next command. The server's address is the harness's, whatever the
	// variables say.
	script := fmt.Sprintf("set -a\n[ -f %[1]s ] && . ./%[1]s\nCARDEX_ADDR=%[2]s\n%[3]s\n__doctest_status=$?\nexport -p > %[1]s\nexit $__doctest_status\n",
		envFile, s.server.grpc, command)
	deadline := time.Now().Add(eventuallyFor)
	out, code, err := runBash(s.dir, s.env(s.server), script)
	if err != nil {
		s.t.Errorf("%s: %s\n%v", s.where(st), st.command, err)
		return
	}
	got := normalize(strings.NewReplacer(s.server.grpc, docGRPC, s.server.http, docHTTP).Replace(out))
	for st.eventually && st.want != nil && (code != st.exit || !matches(st.want, got)) && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		if out, code, err = runBash(s.dir, s.env(s.server), script); err != nil {
			s.t.Errorf("%s: %s\n%v", s.where(st), st.command, err)
			return
		}
		got = normalize(strings.NewReplacer(s.server.grpc, docGRPC, s.server.http, docHTTP).Replace(out))
	}
	if st.want == nil {
		if code != 0 {
			s.t.Errorf("%s: %s\nexit status %d (an example without documented output must succeed); it printed:\n%s",
				s.where(st), st.command, code, strings.Join(got, "\n"))
		}
		return
	}
	if code != st.exit || !matches(st.want, got) {
		s.t.Errorf("%s: %s\nexit status %d, documented %d\n--- documented\n+++ printed\n%s",
			s.where(st), st.command, code, st.exit, diff(st.want, got))
	}
}

// runBash runs script with bash in dir; stdout and stderr go to one file,
// in the order the command writes them, as on a terminal.
func runBash(dir string, env []string, script string) (string, int, error) {
	f, err := os.CreateTemp("", "doctest-out")
	if err != nil {
		return "", 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = dir, env, f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	err = cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return "", 0, fmt.Errorf("did not finish within %v", commandTimeout)
	case errors.As(err, &ee):
		code = ee.ExitCode()
	case err != nil:
		return "", 0, err
	}
	out, err := os.ReadFile(f.Name())
	return string(out), code, err
}

// server is a page's `cardex serve`.
type server struct {
	cmd        *exec.Cmd
	grpc, http string
	log        *strings.Builder
	mu         *sync.Mutex
	done       chan struct{}
}

var (
	grpcRE = regexp.MustCompile(`msg="cardex serving" addr=(\S+)`)
	httpRE = regexp.MustCompile(`msg="agent surfaces" http=(\S+)`)
)

// startServer runs `cardex serve` in dir on loopback ports of its own, with
// the embedded store in dir's ./cardex-data (the default), and waits until
// it serves.
func startServer(bin, dir string, env, flags []string) (*server, error) {
	args := append([]string{"serve", "--listen", "127.0.0.1:0", "--http-listen", "127.0.0.1:0"}, flags...)
	cmd := exec.Command(bin, args...)
	cmd.Dir, cmd.Env = dir, env
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	srv := &server{cmd: cmd, log: &strings.Builder{}, mu: &sync.Mutex{}, done: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		defer close(srv.done)
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			line := sc.Text()
			srv.mu.Lock()
			srv.log.WriteString(line + "\n")
			if m := httpRE.FindStringSubmatch(line); m != nil {
				srv.http = m[1]
			}
			if m := grpcRE.FindStringSubmatch(line); m != nil && srv.grpc == "" {
				srv.grpc = m[1]
				close(ready)
			}
			srv.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, stderr)
	}()
	select {
	case <-ready:
		return srv, nil
	case <-srv.done:
		_ = cmd.Wait()
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return nil, fmt.Errorf("did not start serving:\n%s", srv.log.String())
}

// stop ends the server with SIGTERM, as Ctrl-C would.
func (s *server) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	waited := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(15 * time.Second):
		_ = s.cmd.Process.Kill()
		<-waited
	}
}
