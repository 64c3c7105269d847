package pgtest

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"testing"
	"time"
)

// Native is a private native PostgreSQL server (initdb + pg_ctl in a
// temporary directory) that a test may stop and start: for outage tests
// that must not take a shared database away from other tests.
type Native struct {
	URL  string
	bin  string
	dir  string
	port int
	t    testing.TB
}

// pgBin is where Debian puts the PostgreSQL 15 server binaries.
func pgBin() string {
	if b := os.Getenv("PG_BIN"); b != "" {
		return b
	}
	return "/usr/lib/postgresql/15/bin"
}

// StartNative starts a private PostgreSQL; it is stopped and removed when
// the test ends. initdb and postgres refuse to run as root, so as root they
// run as the postgres user.
func StartNative(t testing.TB) *Native {
	t.Helper()
	bin := pgBin()
	if _, err := os.Stat(filepath.Join(bin, "initdb")); err != nil {
		msg := fmt.Sprintf("%s/initdb not found: this test needs PostgreSQL server binaries (apt-get install postgresql-15)", bin)
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true: %s", msg)
		}
		t.Skip(msg)
	}
	dir, err := os.MkdirTemp("", "cardex-native-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root needs a postgres user: %v", err)
		}
		var uid, gid int
		fmt.Sscan(u.Uid, &uid)
		fmt.Sscan(u.Gid, &gid)
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	n := &Native{bin: bin, dir: dir, port: port, t: t,
		URL: fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&connect_timeout=2", port)}
	if err := n.run("initdb", "-D", filepath.Join(dir, "data"), "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale=C"); err != nil {
		t.Fatal(err)
	}
	n.Start()
	t.Cleanup(func() { _ = n.pgCtl("stop", "-m", "immediate") })
	return n
}

func (n *Native) run(prog string, args ...string) error {
	name := filepath.Join(n.bin, prog)
	if os.Geteuid() == 0 {
		args = append([]string{"-u", "postgres", "--", name}, args...)
		name = "runuser"
	}
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %v\n%s", prog, err, out)
	}
	return nil
}

func (n *Native) pgCtl(args ...string) error {
	return n.run("pg_ctl", append([]string{"-D", filepath.Join(n.dir, "data"), "-w", "-t", "60"}, args...)...)
}

// Start starts the server (again) and waits until it accepts connections.
func (n *Native) Start() {
	n.t.Helper()
	if err := n.pgCtl("-l", filepath.Join(n.dir, "log"), "-o",
		fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c fsync=off", n.port, n.dir), "start"); err != nil {
		n.t.Fatal(err)
	}
}

// Stop stops the server the way a crash or an operator would: immediately,
// dropping every connection.
func (n *Native) Stop() {
	n.t.Helper()
	if err := n.pgCtl("stop", "-m", "immediate"); err != nil {
		n.t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
}
