package internal_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/seed0cff8200/cardex"

// pkg is one package of the module and the module packages it imports.
type pkg struct {
	path        string   // relative to the module: "internal/faces/server"
	imports     []string // from non-test files
	testImports []string // from _test.go files (both test packages)
}

// rules is what may import what.
type rules struct {
	// groups: for each internal group, the other groups it may import.
	groups map[string][]string
	// core: for each core package prefix, the module prefixes it may import.
	core map[string][]string
}

// coreRules are the packages below internal/, as DESIGN.md's layout says:
// retriever and eval speak cards and embed; cards imports nothing of ours
// but its own backends' migrations.
var coreRules = map[string][]string{
	"proto":      {"proto"},
	"migrations": {"migrations"},
	"embed":      {"embed"},
	"cards":      {"cards", "migrations"},
	"retriever":  {"retriever", "cards", "embed"},
	"eval":       {"eval", "retriever", "cards", "embed"},
}

// coreNames are the module's top-level folders below internal/.
func coreNames() []string {
	var names []string
	for n := range coreRules {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// under reports whether path is prefix or inside it.
func under(path, prefix string) bool {
	return path == prefix || strings.HasPrefix(path, prefix+"/")
}

// group names the internal group of path ("" when it is not in internal/).
func group(path string) string {
	rest, ok := strings.CutPrefix(path, "internal/")
	if !ok {
		return ""
	}
	g, _, _ := strings.Cut(rest, "/")
	return g
}

// topCore names the core folder of path ("" when it is not in the core).
func topCore(path string) string {
	for _, n := range coreNames() {
		if under(path, n) {
			return n
		}
	}
	return ""
}

// violations lists every import that runs against the rules.
func violations(pkgs []pkg, r rules) []string {
	var out []string
	bad := func(from, to, why string) { out = append(out, fmt.Sprintf("%s imports %s: %s", from, to, why)) }
	for _, p := range pkgs {
		for _, imp := range p.imports {
			switch {
			case under(imp, "cmd"):
				bad(p.path, imp, "nothing imports a command")
			case under(p.path, "cmd"):
				// The binary wires everything.
			case group(imp) == "testkit" && group(p.path) != "testkit":
				bad(p.path, imp, "testkit is for _test.go files only")
			case topCore(p.path) != "":
				allowed := r.core[topCore(p.path)]
				if !slices.ContainsFunc(allowed, func(a string) bool { return under(imp, a) }) {
					bad(p.path, imp, fmt.Sprintf("%s may import only %s", topCore(p.path), strings.Join(allowed, ", ")))
				}
			case group(p.path) != "":
				from, to := group(p.path), group(imp)
				switch {
				case to == "" && topCore(imp) != "":
					// The core is below every group.
				case to == "":
					bad(p.path, imp, "not in a group of internal/ nor in the core")
				case to == from:
				case !slices.Contains(r.groups[from], to):
					bad(p.path, imp, fmt.Sprintf("internal/%s may import only %s (its doc.go)", from, strings.Join(r.groups[from], ", ")))
				}
			case p.path == "internal":
				bad(p.path, imp, "internal's own package documents the layout and imports nothing")
			default:
				bad(p.path, imp, "the package is in no known place of the layout")
			}
		}
		for _, imp := range p.testImports {
			if under(imp, "cmd") {
				bad(p.path, imp, "nothing imports a command, not even a test")
			}
		}
	}
	slices.Sort(out)
	return out
}

// readGroupRules reads the "May import:" line of every group's doc.go.
func readGroupRules(t *testing.T) map[string][]string {
	t.Helper()
	entries, err := os.ReadDir(".")
	if err != nil {
		t.Fatal(err)
	}
	groups := map[string][]string{}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		doc := filepath.Join(e.Name(), "doc.go")
		f, err := os.Open(doc)
		if err != nil {
			t.Errorf("internal/%s has no doc.go saying what it holds and may import: %v", e.Name(), err)
			continue
		}
		var found bool
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			line, ok := strings.CutPrefix(sc.Text(), "// May import: ")
			if !ok {
				continue
			}
			found = true
			for _, name := range strings.Split(strings.TrimSuffix(line, "."), ",") {
				name = strings.TrimSpace(name)
				if name == "core" {
					continue // the core is below every group
				}
				if _, err := os.Stat(name); err != nil {
					t.Errorf("%s: may import %q, which is no group of internal/", doc, name)
				}
				groups[e.Name()] = append(groups[e.Name()], name)
			}
		}
		f.Close()
		if !found {
			t.Errorf("%s has no \"// May import: ...\" line", doc)
		}
	}
	return groups
}

// modulePackages lists the module's packages with `go list`.
func modulePackages(t *testing.T) []pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "./...")
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	local := func(paths []string) []string {
		var ours []string
		for _, p := range paths {
			if rel, ok := strings.CutPrefix(p, module+"/"); ok {
				ours = append(ours, rel)
			}
		}
		return ours
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath                         string
			Imports, TestImports, XTestImports []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		pkgs = append(pkgs, pkg{
			path:        rel,
			imports:     local(p.Imports),
			testImports: local(append(p.TestImports, p.XTestImports...)),
		})
	}
	return pkgs
}

func TestImportsFollowTheLayout(t *testing.T) {
	pkgs := modulePackages(t)
	if len(pkgs) < 30 {
		t.Fatalf("go list found %d packages; expected the whole module", len(pkgs))
	}
	for _, v := range violations(pkgs, rules{groups: readGroupRules(t), core: coreRules}) {
		t.Error(v)
	}
}

// TestWrongImportsAreCaught adds one wrong import at a time to the real
// graph and expects exactly that import to be reported.
func TestWrongImportsAreCaught(t *testing.T) {
	r := rules{groups: readGroupRules(t), core: coreRules}
	real := modulePackages(t)
	tests := []struct{ from, to, why string }{
		{"internal/execution/rest", "internal/sources/openapiimport", "internal/execution may import only"},
		{"internal/codec/toolname", "internal/access/tokens", "internal/codec may import only"},
		{"internal/access/tokens", "internal/telemetry/metrics", "internal/access may import only"},
		{"internal/faces/server", "internal/testkit/pgtest", "testkit is for _test.go files only"},
		{"cards", "retriever", "cards may import only"},
		{"retriever", "internal/codec/apiconv", "retriever may import only"},
		{"embed", "cards", "embed may import only"},
		{"internal/ops/lint", "cmd/cardex", "nothing imports a command"},
	}
	for _, tt := range tests {
		t.Run(tt.from+"→"+tt.to, func(t *testing.T) {
			pkgs := slices.Clone(real)
			i := slices.IndexFunc(pkgs, func(p pkg) bool { return p.path == tt.from })
			if i < 0 {
				t.Fatalf("no package %s", tt.from)
			}
			pkgs[i].imports = append(slices.Clone(pkgs[i].imports), tt.to)
			got := violations(pkgs, r)
			if len(got) != 1 || !strings.HasPrefix(got[0], tt.from+" imports "+tt.to+": ") || !strings.Contains(got[0], tt.why) {
				t.Errorf("violations = %q, want only %s → %s (%s)", got, tt.from, tt.to, tt.why)
			}
		})
	}
}
