// Package buildinfo says which cardex this is: the release version, and the
// version control information Go records in the binary (commit, its time,
// whether the work tree had changes).
package buildinfo

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
)

// version is the release, when the build sets it:
//
//	go build -ldflags "-X github.com/seed0cff8200/cardex/internal/buildinfo.version=v1.2.0" ./cmd/cardex
//
// Otherwise it is the module version (`go install ...@v1.2.0`), or "dev".
var version string

// Info describes the running binary.
type Info struct {
	Version   string `json:"version"`
	Revision  string `json:"revision,omitempty"`
	Time      string `json:"time,omitempty"`
	Modified  bool   `json:"modified,omitempty"`
	GoVersion string `json:"go_version"`
}

// Read reads the build's information.
func Read() Info {
	i := Info{Version: version, GoVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if ok {
		if i.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			i.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				i.Revision = s.Value
			case "vcs.time":
				i.Time = s.Value
			case "vcs.modified":
				i.Modified = s.Value == "true"
			}
		}
	}
	if i.Version == "" {
		i.Version = "dev"
	}
	return i
}

// Version is the version with the commit, as servers announce it (MCP
// serverInfo, the User-Agent of calls to upstreams): "v1.2.0",
// "dev+3f2a1b9c0d4e" or "dev+3f2a1b9c0d4e.dirty".
func Version() string {
	i := Read()
	v := i.Version
	if i.Revision != "" && !strings.Contains(v, i.Revision[:min(12, len(i.Revision))]) {
		v += "+" + i.Revision[:min(12, len(i.Revision))]
		if i.Modified {
			v += ".dirty"
		}
	}
	return v
}

// String is the one-line description `cardex version` prints.
func (i Info) String() string {
	s := "cardex " + i.Version
	var parts []string
	if i.Revision != "" {
		c := "commit " + i.Revision
		if i.Modified {
			c += " (with uncommitted changes)"
		}
		parts = append(parts, c)
	}
	if i.Time != "" {
		parts = append(parts, "committed "+i.Time)
	}
	parts = append(parts, "built with "+i.GoVersion)
	return fmt.Sprintf("%s (%s)", s, strings.Join(parts, ", "))
}
