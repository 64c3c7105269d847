package pgtest

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// PGlite is a private PGlite server (PostgreSQL with pgvector, from the
// repository's node_modules) persisting to a temporary directory, that a
// test may stop and start again: a real database outage with real pgvector,
// without taking the shared test database from other tests.
type PGlite struct {
	URL    string
	script string
	root   string // the repository, holding node_modules
	dir    string
	port   int
	cmd    *exec.Cmd
	t      testing.TB
}

// pgliteScript finds the pglite-socket server in the node_modules of the
// repository (walking up from the test's directory).
func pgliteScript() (script, root string, err error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", "", err
	}
	for {
		p := filepath.Join(dir, "node_modules", "@electric-sql", "pglite-socket", "dist", "scripts", "server.js")
		if _, err := os.Stat(p); err == nil {
			return p, dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", "", fmt.Errorf("node_modules/@electric-sql/pglite-socket not found above the test directory (run npm ci, or ./scripts/test)")
		}
		dir = parent
	}
}

// StartPGlite starts a private PGlite; it is stopped and removed when the
// test ends.
func StartPGlite(t testing.TB) *PGlite {
	t.Helper()
	script, root, err := pgliteScript()
	if err == nil {
		_, err = exec.LookPath("node")
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: a private PGlite is needed: %v", err)
		}
		t.Skipf("a private PGlite is needed: %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	p := &PGlite{script: script, root: root, dir: t.TempDir(), port: port, t: t,
		URL: fmt.Sprintf("postgres://postgres:postgres@127.0.0.1:%d/postgres?sslmode=disable&default_query_exec_mode=simple_protocol&connect_timeout=2", port)}
	p.Start()
	t.Cleanup(func() {
		if p.cmd != nil {
			_ = p.cmd.Process.Kill()
			_ = p.cmd.Wait()
		}
	})
	return p
}

// Start starts the server (again, on the same data and port) and waits
// until it accepts connections.
func (p *PGlite) Start() {
	p.t.Helper()
	cmd := exec.Command("node", p.script, "-h", "127.0.0.1", "-p", fmt.Sprint(p.port),
		"-d", filepath.Join(p.dir, "data"), "-e", "@electric-sql/pglite-pgvector:vector", "-m", "16")
	cmd.Dir = p.root
	out, err := cmd.StdoutPipe()
	if err != nil {
		p.t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		p.t.Fatal(err)
	}
	ready := make(chan struct{})
	var log strings.Builder
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			log.WriteString(sc.Text() + "\n")
			if strings.Contains(sc.Text(), "listening") {
				close(ready)
				break
			}
		}
		for sc.Scan() {
		}
	}()
	select {
	case <-ready:
		p.cmd = cmd
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		p.t.Fatalf("private PGlite did not start within 2 minutes:\n%s", log.String())
	}
}

// Stop stops the server (SIGTERM, as an operator would) and waits for it
// to exit.
func (p *PGlite) Stop() {
	p.t.Helper()
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-done
	}
	p.cmd = nil
}
