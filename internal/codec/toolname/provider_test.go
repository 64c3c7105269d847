package toolname

import (
	"strings"
	"testing"
)

func TestProvider(t *testing.T) {
	long := strings.Repeat("n", 70)
	for _, tc := range []struct {
		server, name string
		want         string // "" : hashed (checked by shape)
	}{
		{"files", "read_file", "files__read_file"},
		{"my-api", "get-user", "my-api__get-user"},
		{"github", "repo.list", ""},                                     // "." is not provider-safe
		{"files", long, ""},                                             // too long
		{"a", "x_h0123abcd", ""},                                        // the hashed shape itself is never a direct name
		{"cardex", "search_tools", ""},                                  // no qualified name (reserved prefix)
		{"my__srv", "x", ""},                                            // no qualified name (server holds "__")
		{"f", strings.Repeat("n", 61), "f__" + strings.Repeat("n", 61)}, // exactly 64
	} {
		got := Provider(tc.server, tc.name)
		if !ProviderSafe(got) {
			t.Errorf("Provider(%q, %q) = %q: not provider-safe", tc.server, tc.name, got)
		}
		if tc.want != "" {
			if got != tc.want {
				t.Errorf("Provider(%q, %q) = %q; want %q", tc.server, tc.name, got, tc.want)
			}
			s, n, ok := Direct(got)
			if !ok || s != tc.server || n != tc.name {
				t.Errorf("Direct(%q) = %q, %q, %v; want %q, %q", got, s, n, ok, tc.server, tc.name)
			}
			if Hashed(got) {
				t.Errorf("Hashed(%q) = true for a direct name", got)
			}
			continue
		}
		if !Hashed(got) {
			t.Errorf("Provider(%q, %q) = %q; want a hashed name", tc.server, tc.name, got)
		}
		if _, _, ok := Direct(got); ok {
			t.Errorf("Direct(%q) read a hashed name as a pair", got)
		}
		if Provider(tc.server, tc.name) != got {
			t.Errorf("Provider(%q, %q) is not stable", tc.server, tc.name)
		}
	}
	// The readable part keeps what it can.
	if got := Provider("github", "repo.list"); !strings.HasPrefix(got, "github__repo_list_h") {
		t.Errorf("Provider(github, repo.list) = %q; want github__repo_list_h…", got)
	}
}

// TestProviderUnique: distinct pairs get distinct provider names, even when
// their readable parts are the same.
func TestProviderUnique(t *testing.T) {
	parts := []string{"a", "a.b", "a_b", "a-b", "a__b", "b", "x.y.z", "x_y_z", strings.Repeat("q", 80), strings.Repeat("q", 81)}
	seen := map[string][2]string{}
	for _, s := range parts {
		for _, n := range parts {
			p := Provider(s, n)
			if prev, dup := seen[p]; dup {
				t.Fatalf("%q is the provider name of %v and of %v", p, prev, [2]string{s, n})
			}
			seen[p] = [2]string{s, n}
		}
	}
}

func TestReadings(t *testing.T) {
	for _, tc := range []struct {
		name, server string
		want         []Ref
	}{
		{"files__read_file", "", []Ref{{"files", "read_file"}, {"", "files__read_file"}}},
		{"files__read_file", "files", []Ref{{"files", "read_file"}, {"files", "files__read_file"}}},
		{"files__read_file", "other", []Ref{{"other", "files__read_file"}}},
		{"read_file", "", []Ref{{"", "read_file"}}},
	} {
		got := Readings(tc.name, tc.server)
		if len(got) != len(tc.want) {
			t.Errorf("Readings(%q, %q) = %v; want %v", tc.name, tc.server, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("Readings(%q, %q) = %v; want %v", tc.name, tc.server, got, tc.want)
			}
		}
	}
}
