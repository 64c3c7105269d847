package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
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

	yaml "go.yaml.in/yaml/v4"

	"github.com/seed0cff8200/cardex/internal/testkit/pgtest"
)

// composeFile is docker-compose.yml as far as the test reads it.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Secrets  map[string]struct {
		File string `yaml:"file"`
	} `yaml:"secrets"`
}

type composeService struct {
	Image       string            `yaml:"image"`
	Command     []string          `yaml:"command"`
	Environment map[string]string `yaml:"environment"`
	Secrets     []string          `yaml:"secrets"`
	Restart     string            `yaml:"restart"`
	Healthcheck struct {
		Test    []string `yaml:"test"`
		Disable bool     `yaml:"disable"`
	} `yaml:"healthcheck"`
	DependsOn map[string]struct {
		Condition string `yaml:"condition"`
	} `yaml:"depends_on"`
}

var composeVar = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-?])([^}]*))?\}`)

// interpolate expands compose's ${VAR}, ${VAR:-default} and ${VAR:?error}
// (https://docs.docker.com/reference/compose-file/interpolation/) with env.
func interpolate(s string, env map[string]string) (string, error) {
	var err error
	out := composeVar.ReplaceAllStringFunc(s, func(m string) string {
		p := composeVar.FindStringSubmatch(m)
		v, set := env[p[1]]
		if strings.HasPrefix(p[2], ":") && v == "" {
			set = false
		}
		switch {
		case set:
			return v
		case strings.HasSuffix(p[2], "-"):
			return p[3]
		case strings.HasSuffix(p[2], "?"):
			err = fmt.Errorf("required variable %s is missing a value: %s", p[1], p[3])
		}
		return ""
	})
	return out, err
}

func loadCompose(t *testing.T, env map[string]string) composeFile {
	t.Helper()
	raw, err := os.ReadFile("../../docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	text, err := interpolate(string(raw), env)
	if err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	var cf composeFile
	if err := yaml.Unmarshal([]byte(text), &cf); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return cf
}

// dockerfileEnv is the image's ENV (the Dockerfile's ENV lines).
func dockerfileEnv(t *testing.T) map[string]string {
	t.Helper()
	raw, err := os.ReadFile("../../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, "ENV "); ok {
			for _, kv := range strings.Fields(rest) {
				k, v, _ := strings.Cut(kv, "=")
				env[k] = v
			}
		}
	}
	return env
}

// TestComposeStarts runs docker-compose.yml here, without Docker: each
// cardex service's own command and environment (with the image's ENV),
// the built binary for the image, the test PostgreSQL (PGlite) for the db
// service and a fresh schema, the published ports remapped to free ones,
// the volumes and the mounted secret to temporary files. The one-shot
// migration must succeed, both replicas must become healthy (the compose
// healthcheck's own command, and /readyz) and serve a discovery. It also
// checks what makes the file safe: it holds no default credential (it does
// not even interpolate without CARDEX_DB_PASSWORD), a replica without its
// credential file exits with an error instead of serving, and no cardex
// service restarts without end.
func TestComposeStarts(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	if _, err := interpolate(mustRead(t, "../../docker-compose.yml"), map[string]string{}); err == nil || !strings.Contains(err.Error(), "CARDEX_DB_PASSWORD") {
		t.Fatalf("docker-compose.yml interpolates without CARDEX_DB_PASSWORD (%v): it has a default credential", err)
	}
	dbURL := pgtest.URL(t)
	cf := loadCompose(t, map[string]string{"CARDEX_DB_PASSWORD": "not-used-by-the-test"})
	var cardexServices []string
	for name, s := range cf.Services {
		if s.Image != "cardex:local" {
			continue
		}
		cardexServices = append(cardexServices, name)
		if r := s.Restart; r != "no" && !regexp.MustCompile(`^on-failure:[1-5]$`).MatchString(r) {
			t.Errorf("service %s: restart %q restarts without end on a configuration error (use \"no\" or on-failure:N, N ≤ 5)", name, r)
		}
	}
	slices.Sort(cardexServices)
	if !slices.Equal(cardexServices, []string{"cardex-1", "cardex-2", "migrate"}) {
		t.Fatalf("cardex services %v", cardexServices)
	}

	bin := buildBinary(t)
	dir := t.TempDir()
	// The service token file the compose file mounts, made the way its
	// header says.
	var tokens []string
	file := "tokens:\n"
	for _, role := range []string{"admin", "discover"} {
		cmd := exec.Command(bin, "token", "new", "--name", "compose-"+role, "--role", role)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("token new: %v\n%s", err, stderr.String())
		}
		file += string(out)
		tokens = append(tokens, strings.TrimSpace(stderr.String()[strings.LastIndex(stderr.String(), " ")+1:]))
	}
	secretFiles := map[string]string{}
	for name := range cf.Secrets {
		secretFiles[name] = filepath.Join(dir, "secret-"+name)
		if err := os.WriteFile(secretFiles[name], []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	schema := pgtest.NewSchemaName()
	t.Cleanup(func() { pgtest.Exec(t, dbURL, fmt.Sprintf("DROP SCHEMA IF EXISTS %q CASCADE", schema)) })

	// service is one cardex service made runnable here.
	type service struct {
		args    []string
		env     []string
		grpc    string // the remapped 127.0.0.1:PORT of its gRPC listener
		http    string
		health  []string
		dataDir string
	}
	portRE := regexp.MustCompile(`^(0\.0\.0\.0|127\.0\.0\.1):(\d+)$`)
	prepare := func(name string) service {
		s := cf.Services[name]
		sv := service{dataDir: filepath.Join(dir, name+"-data")}
		ports := map[string]string{} // container port → free port
		remap := func(v string) string {
			m := portRE.FindStringSubmatch(v)
			if m == nil {
				return v
			}
			if ports[m[2]] == "" {
				_, ports[m[2]], _ = net.SplitHostPort(freePort(t))
			}
			return m[1] + ":" + ports[m[2]]
		}
		env := dockerfileEnv(t)
		for k, v := range s.Environment {
			env[k] = v
		}
		for k, v := range env {
			v = remap(v)
			for secret, path := range secretFiles {
				if v == "/run/secrets/"+secret && slices.Contains(s.Secrets, secret) {
					v = path
				}
			}
			env[k] = v
		}
		u := env["CARDEX_DATABASE_URL"]
		if !strings.HasPrefix(u, "postgres://cardex:not-used-by-the-test@db:5432/") {
			t.Fatalf("%s: CARDEX_DATABASE_URL %q does not reach the db service with CARDEX_DB_PASSWORD", name, u)
		}
		env["CARDEX_DATABASE_URL"] = dbURL
		env["CARDEX_DATABASE_SCHEMA"] = schema
		env["CARDEX_DATA_DIR"] = sv.dataDir // the volume
		for k, v := range env {
			sv.env = append(sv.env, k+"="+v)
		}
		sv.env = append(sv.env, "PATH="+os.Getenv("PATH"), "HOME="+dir, "TMPDIR="+os.TempDir())
		for _, a := range s.Command {
			sv.args = append(sv.args, remap(a))
		}
		if hc := s.Healthcheck.Test; len(hc) > 2 && hc[0] == "CMD" && hc[1] == "cardex" {
			for _, a := range hc[2:] {
				sv.health = append(sv.health, remap(a))
			}
		}
		for port, free := range ports {
			switch port {
			case "50051":
				sv.grpc = "127.0.0.1:" + free
			case "8080":
				sv.http = "127.0.0.1:" + free
			}
		}
		return sv
	}
	runOnce := func(sv service, args ...string) (string, int) {
		cmd := exec.Command(bin, args...)
		cmd.Env = sv.env
		out, err := cmd.CombinedOutput()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}

	// migrate: a one-shot that must complete (depends_on: service_completed_successfully).
	if c := cf.Services["cardex-1"].DependsOn["migrate"].Condition; c != "service_completed_successfully" {
		t.Fatalf("cardex-1 depends on migrate with %q", c)
	}
	mig := prepare("migrate")
	if out, code := runOnce(mig, mig.args...); code != 0 || !strings.Contains(out, "now at version") {
		t.Fatalf("migrate %v: exit %d\n%s", mig.args, code, out)
	}

	type replica struct {
		service
		stderr *syncBuffer
		exited chan struct{}
	}
	var replicas []replica
	for _, name := range []string{"cardex-1", "cardex-2"} {
		sv := prepare(name)
		if sv.grpc == "" || sv.http == "" || len(sv.health) == 0 {
			t.Fatalf("%s: gRPC %q, HTTP %q, healthcheck %v", name, sv.grpc, sv.http, sv.health)
		}
		cmd := exec.Command(bin, sv.args...)
		cmd.Env = sv.env
		buf := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = buf, buf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(15 * time.Second):
				cmd.Process.Kill()
			}
		})
		replicas = append(replicas, replica{sv, buf, exited})
	}
	for i, r := range replicas {
		deadline := time.Now().Add(90 * time.Second)
		for {
			resp, err := http.Get("http://" + r.http + "/readyz")
			ready := err == nil && resp.StatusCode == http.StatusOK
			if err == nil {
				resp.Body.Close()
			}
			if ready {
				if out, code := runOnce(r.service, r.health...); code != 0 || !strings.Contains(out, "SERVING") {
					t.Fatalf("replica %d: /readyz is 200 but the compose healthcheck %v says: exit %d %s", i+1, r.health, code, out)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %d is not ready after 90 s (/readyz: %v)\n%s", i+1, err, r.stderr.String())
			}
			select {
			case <-r.exited:
				t.Fatalf("replica %d exited:\n%s", i+1, r.stderr.String())
			case <-time.After(300 * time.Millisecond):
			}
		}
	}

	// Serve: the admin token writes through replica 1, the discover token
	// discovers through both; no credential, no answer.
	admin, discover := tokens[0], tokens[1]
	if out, code := runOnce(replicas[0].service, "cards", "apply", "-f", "../../examples/catalog/", "--addr", replicas[0].grpc, "--token", admin); code != 0 {
		t.Fatalf("cards apply through replica 1: exit %d\n%s", code, out)
	}
	for i, r := range replicas {
		deadline := time.Now().Add(30 * time.Second) // replica 2 follows the change sequence
		for {
			out, code := runOnce(r.service, "discover", "restart a service", "--tenant", "acme", "--scopes", "*", "--addr", r.grpc, "--token", discover, "-o", "json")
			var res struct {
				Tools []struct {
					Name string `json:"name"`
				} `json:"tools"`
			}
			if code == 0 && json.Unmarshal([]byte(out), &res) == nil && len(res.Tools) > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("replica %d: no discovery: exit %d\n%s", i+1, code, out)
			}
			time.Sleep(time.Second)
		}
		if out, code := runOnce(r.service, "discover", "restart a service", "--tenant", "acme", "--scopes", "*", "--addr", r.grpc); code == 0 || !strings.Contains(out, "needs a service token") {
			t.Errorf("replica %d answered a discovery without a credential: exit %d\n%s", i+1, code, out)
		}
	}

	// Without its credential file a replica refuses to start (and says why).
	sv := prepare("cardex-1")
	for i, kv := range sv.env {
		if k, _, _ := strings.Cut(kv, "="); k == "CARDEX_SERVICE_TOKENS" {
			sv.env[i] = k + "=" + filepath.Join(dir, "missing-secret")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, sv.args...)
	cmd.Env = sv.env
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil || err == nil || !strings.Contains(string(out), "service-tokens") {
		t.Fatalf("a replica without its service token file: %v (%v)\n%s", err, ctx.Err(), out)
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// syncBuffer is a bytes buffer safe for a process's output and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
