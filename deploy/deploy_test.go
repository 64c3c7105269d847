// Package deploy_test checks the deployment files: the Helm chart lints and
// renders, and the cardex commands it runs are ones the binary accepts.
package deploy_test

import (
	"bytes"
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
	"testing"

	"go.yaml.in/yaml/v4"
)

const chart = "helm/cardex"

// helm finds the helm binary: $CARDEX_HELM, the repository's .bin/helm
// (scripts/test installs it there) or PATH. Without one the test is
// skipped, except in CI, where it fails.
func helm(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("CARDEX_HELM"), filepath.Join("..", ".bin", "helm")} {
		if p != "" {
			if _, err := os.Stat(p); err == nil {
				return p
			}
		}
	}
	if p, err := exec.LookPath("helm"); err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("helm not found: scripts/test installs it into .bin (go install helm.sh/helm/v3/cmd/helm), or set CARDEX_HELM")
	}
	t.Skip("helm not found (scripts/test installs it into .bin; or set CARDEX_HELM)")
	return ""
}

func run(t *testing.T, name string, args ...string) (string, error) {
	t.Helper()
	var out, errb bytes.Buffer
	cmd := exec.Command(name, args...)
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		err = errors.New(err.Error() + ": " + errb.String() + out.String())
	}
	return out.String(), err
}

// valueFiles are the chart's CI values: one per deployment shape.
func valueFiles(t *testing.T) []string {
	t.Helper()
	fs, err := filepath.Glob(filepath.Join(chart, "ci", "*.yaml"))
	if err != nil || len(fs) < 2 {
		t.Fatalf("want the chart's ci/*.yaml values (one company, platform): %v %v", fs, err)
	}
	return fs
}

func TestChartLints(t *testing.T) {
	h := helm(t)
	for _, vf := range valueFiles(t) {
		t.Run(filepath.Base(vf), func(t *testing.T) {
			if out, err := run(t, h, "lint", "--strict", chart, "-f", vf); err != nil {
				t.Fatalf("helm lint: %v\n%s", err, out)
			}
		})
	}
	// No insecure default: without a database URL and a credential the
	// chart refuses to render.
	_, err := run(t, h, "template", "t", chart)
	if err == nil || !strings.Contains(err.Error(), "databaseURL") {
		t.Errorf("helm template without values: err = %v, want a refusal naming databaseURL", err)
	}
	_, err = run(t, h, "template", "t", chart, "--set", "databaseURL.value=postgres://x")
	if err == nil || !strings.Contains(err.Error(), "serviceTokens") {
		t.Errorf("helm template without a credential: err = %v, want a refusal naming serviceTokens", err)
	}
}

type object struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name        string            `yaml:"name"`
		Annotations map[string]string `yaml:"annotations"`
	} `yaml:"metadata"`
	Spec struct {
		Template struct {
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
		MaxUnavailable any `yaml:"maxUnavailable"`
	} `yaml:"spec"`
}

type podSpec struct {
	Containers []struct {
		Name string   `yaml:"name"`
		Args []string `yaml:"args"`
		Env  []struct {
			Name      string `yaml:"name"`
			Value     string `yaml:"value"`
			ValueFrom any    `yaml:"valueFrom"`
		} `yaml:"env"`
		ReadinessProbe *probe `yaml:"readinessProbe"`
		LivenessProbe  *probe `yaml:"livenessProbe"`
		Resources      struct {
			Requests map[string]string `yaml:"requests"`
		} `yaml:"resources"`
	} `yaml:"containers"`
}

type probe struct {
	HTTPGet struct {
		Path string `yaml:"path"`
	} `yaml:"httpGet"`
}

func render(t *testing.T, h, values string) []object {
	t.Helper()
	out, err := run(t, h, "template", "t", chart, "-f", values)
	if err != nil {
		t.Fatalf("helm template: %v", err)
	}
	var objs []object
	dec := yaml.NewDecoder(strings.NewReader(out))
	for {
		var o object
		if err := dec.Decode(&o); err == io.EOF {
			break
		} else if err != nil {
			t.Fatalf("rendered YAML: %v", err)
		}
		if o.Kind != "" {
			objs = append(objs, o)
		}
	}
	return objs
}

// serveHelp is what `cardex serve --help` prints, from a binary built
// from this tree once for the package's tests.
func serveHelp(t *testing.T) string {
	t.Helper()
	help.once.Do(func() {
		dir, err := os.MkdirTemp("", "cardex-deploy-test")
		if err != nil {
			help.err = err
			return
		}
		defer os.RemoveAll(dir)
		bin := filepath.Join(dir, "cardex")
		if out, err := run(t, "go", "build", "-o", bin, "../cmd/cardex"); err != nil {
			help.err = fmt.Errorf("go build: %v\n%s", err, out)
			return
		}
		help.text, help.err = run(t, bin, "serve", "--help")
	})
	if help.err != nil {
		t.Fatal(help.err)
	}
	return help.text
}

var help struct {
	once sync.Once
	text string
	err  error
}

// flagNames are the flags a help text lists.
func flagNames(help string) []string {
	var flags []string
	for _, m := range regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9-]+)`).FindAllStringSubmatch(help, -1) {
		flags = append(flags, m[1])
	}
	return flags
}

func TestChartRendersEachShape(t *testing.T) {
	h := helm(t)
	flags := flagNames(serveHelp(t))
	for _, vf := range valueFiles(t) {
		t.Run(filepath.Base(vf), func(t *testing.T) {
			objs := render(t, h, vf)
			kinds := map[string]int{}
			for _, o := range objs {
				kinds[o.Kind]++
			}
			workload := "Deployment"
			if strings.Contains(vf, "platform") {
				workload = "StatefulSet"
			}
			for _, k := range []string{workload, "Service", "Job", "PodDisruptionBudget"} {
				if kinds[k] == 0 {
					t.Errorf("no %s rendered (kinds: %v)", k, kinds)
				}
			}
			for _, o := range objs {
				switch o.Kind {
				case "Job":
					if !strings.Contains(o.Metadata.Annotations["helm.sh/hook"], "pre-install") {
						t.Errorf("the migrations Job is not a pre-install hook: %v", o.Metadata.Annotations)
					}
					if args := o.Spec.Template.Spec.Containers[0].Args; !slices.Equal(args, []string{"migrate", "up"}) {
						t.Errorf("the Job runs %q, want migrate up", args)
					}
				case workload:
					c := o.Spec.Template.Spec.Containers[0]
					if c.Args[0] != "serve" {
						t.Fatalf("the replicas run %q, want serve", c.Args)
					}
					for _, a := range c.Args[1:] {
						name, _, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
						if !strings.HasPrefix(a, "--") || !slices.Contains(flags, name) {
							t.Errorf("serve argument %q is not a flag of cardex serve", a)
						}
					}
					if c.ReadinessProbe == nil || c.ReadinessProbe.HTTPGet.Path != "/readyz" ||
						c.LivenessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" {
						t.Errorf("probes: readiness %+v liveness %+v, want /readyz and /healthz", c.ReadinessProbe, c.LivenessProbe)
					}
					if c.Resources.Requests["memory"] == "" {
						t.Errorf("no memory request")
					}
				}
			}
		})
	}
}
