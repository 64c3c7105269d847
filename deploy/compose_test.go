package deploy_test

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v4"
)

// settings is what a replica is started with: serve's flags by name, set by
// an argument or by the flag's environment variable (the image's own ENV
// included), with the value given ("(secret)" for one read from a secret).
type settings map[string]string

// envFlags maps each environment variable `cardex serve --help` names
// ("(env CARDEX_X)") to its flag.
func envFlags(t *testing.T, help string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, line := range strings.Split(help, "\n") {
		f := regexp.MustCompile(`^\s+(?:-\w, )?--([a-z0-9-]+)`).FindStringSubmatch(line)
		e := regexp.MustCompile(`\(env (CARDEX_[A-Z0-9_]+)`).FindStringSubmatch(line)
		if f != nil && e != nil {
			out[e[1]] = f[1]
		}
	}
	if len(out) < 10 {
		t.Fatalf("serve --help names %d environment variables; the help's format changed?", len(out))
	}
	return out
}

// apply adds the environment (variables that are set and not empty) and
// then the arguments, which take precedence as they do in cardex.
func (s settings) apply(t *testing.T, where string, env map[string]string, args []string, byEnv map[string]string, flags []string) {
	t.Helper()
	for k, v := range env {
		if !strings.HasPrefix(k, "CARDEX_") || v == "" {
			continue
		}
		f, ok := byEnv[k]
		if !ok {
			t.Errorf("%s: %s is no environment variable of cardex serve", where, k)
			continue
		}
		s[f] = v
	}
	for i := 0; i < len(args); i++ {
		a := strings.TrimPrefix(args[i], "--")
		if a == args[i] {
			t.Errorf("%s: serve argument %q is not a flag", where, args[i])
			continue
		}
		name, v, ok := strings.Cut(a, "=")
		if !ok && i+1 < len(args) && !strings.HasPrefix(args[i+1], "--") {
			v, i = args[i+1], i+1
		}
		if !slices.Contains(flags, name) {
			t.Errorf("%s: --%s is not a flag of cardex serve", where, name)
		}
		s[name] = v
	}
}

// imageEnv is the Dockerfile's ENV: both start the same image.
func imageEnv(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^ENV (.+)$`).FindAllStringSubmatch(string(b), -1) {
		for _, kv := range strings.Fields(m[1]) {
			if k, v, ok := strings.Cut(kv, "="); ok {
				env[k] = v
			}
		}
	}
	return env
}

// TestComposeAndChartStartTheSameServe: the compose file's replicas and the
// chart's (one-company shape, the compose file's shape) run the same
// binary with the same settings: the same serve flags, set by argument or
// environment; only values that name a place (a path, an address) may
// differ.
func TestComposeAndChartStartTheSameServe(t *testing.T) {
	h := helm(t)
	help := serveHelp(t)
	flags, byEnv := flagNames(help), envFlags(t, help)
	image := imageEnv(t)

	raw, err := os.ReadFile(filepath.Join("..", "docker-compose.yml"))
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Command     []string          `yaml:"command"`
			Environment map[string]string `yaml:"environment"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatal(err)
	}
	// ${VAR:-} is unset unless the operator sets it; ${VAR:?...} is a
	// value the operator must give.
	unset := regexp.MustCompile(`^\$\{[A-Za-z_0-9]+:-\}$`)
	var replicas []settings
	for _, name := range slices.Sorted(maps.Keys(compose.Services)) {
		svc := compose.Services[name]
		if len(svc.Command) == 0 || svc.Command[0] != "serve" {
			continue
		}
		env := maps.Clone(image)
		for k, v := range svc.Environment {
			if unset.MatchString(v) {
				v = ""
			}
			env[k] = v
		}
		s := settings{}
		s.apply(t, "docker-compose.yml "+name, env, svc.Command[1:], byEnv, flags)
		replicas = append(replicas, s)
	}
	if len(replicas) < 2 {
		t.Fatalf("docker-compose.yml runs %d serve replicas, want 2", len(replicas))
	}

	var charted settings
	for _, o := range render(t, h, filepath.Join(chart, "ci", "one-company-values.yaml")) {
		if o.Kind != "Deployment" {
			continue
		}
		c := o.Spec.Template.Spec.Containers[0]
		env := maps.Clone(image)
		for _, e := range c.Env {
			v := e.Value
			if e.ValueFrom != nil {
				v = "(secret)"
			}
			env[e.Name] = v
		}
		if c.Args[0] != "serve" {
			t.Fatalf("the chart runs %q", c.Args)
		}
		charted = settings{}
		charted.apply(t, "chart", env, c.Args[1:], byEnv, flags)
	}
	if charted == nil {
		t.Fatal("the chart rendered no Deployment")
	}
	for i, r := range replicas {
		if a, b := slices.Sorted(maps.Keys(r)), slices.Sorted(maps.Keys(charted)); !slices.Equal(a, b) {
			t.Errorf("compose replica %d sets %v; the chart sets %v", i+1, a, b)
		}
		for k, v := range r {
			if place(v) || place(charted[k]) || v == "(secret)" || charted[k] == "(secret)" || strings.HasPrefix(v, "postgres://") {
				continue
			}
			if charted[k] != v {
				t.Errorf("--%s: compose %q, chart %q", k, v, charted[k])
			}
		}
	}
}

// place says whether a value names a place (a path or an address), which
// differs between a compose host and a pod.
func place(v string) bool {
	return strings.HasPrefix(v, "/") || strings.Contains(v, ":")
}
