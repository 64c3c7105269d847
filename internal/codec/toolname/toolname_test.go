package toolname

import (
	"strings"
	"testing"
)

func TestQualify(t *testing.T) {
	long := strings.Repeat("n", 122)
	for _, tc := range []struct {
		server, name, want string
		ok                 bool
	}{
		{"files", "read_file", "files__read_file", true},
		{"github", "repo.list", "github__repo.list", true},
		{"my-api.v2", "get-user", "my-api.v2__get-user", true},
		{"a", "_b", "a___b", true},            // the name may start with "_"
		{"a", "b__c", "a__b__c", true},        // and hold "__"
		{"a_", "b", "", false},                // a server ending in "_" would split wrong
		{"my__srv", "x", "", false},           // so would one holding "__"
		{"cardex", "search_tools", "", false}, // the reserved prefix
		{"CardEx", "x", "", false},
		{"files", long, "", false}, // 5 + 2 + 122 > 128
		{"f", strings.Repeat("n", 125), "f__" + strings.Repeat("n", 125), true},
		{"", "x", "", false},
		{"files", "", "", false},
		{"files", "bad name", "", false},
	} {
		got, ok := Qualify(tc.server, tc.name)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Qualify(%q, %q) = %q, %v; want %q, %v", tc.server, tc.name, got, ok, tc.want, tc.ok)
		}
		if !ok {
			continue
		}
		s, n, ok := Split(got)
		if !ok || s != tc.server || n != tc.name {
			t.Errorf("Split(%q) = %q, %q, %v; want %q, %q", got, s, n, ok, tc.server, tc.name)
		}
	}
}

func TestSplit(t *testing.T) {
	for _, tc := range []struct {
		q, server, name string
		ok              bool
	}{
		{"files__read_file", "files", "read_file", true},
		{"a___b", "a", "_b", true},
		{"read_file", "", "", false},
		{"__x", "", "", false},
		{"x__", "", "", false},
		{"cardex__search_tools", "", "", false},
		{"search_tools", "", "", false},
		{"files__bad name", "", "", false},
	} {
		s, n, ok := Split(tc.q)
		if s != tc.server || n != tc.name || ok != tc.ok {
			t.Errorf("Split(%q) = %q, %q, %v; want %q, %q, %v", tc.q, s, n, ok, tc.server, tc.name, tc.ok)
		}
	}
}

// TestUnique: no two pairs share a qualified name.
func TestUnique(t *testing.T) {
	parts := []string{"a", "a_", "_a", "a__b", "b", "a.b", "a-", "__", "_", "x_y"}
	seen := map[string][2]string{}
	for _, s := range parts {
		for _, n := range parts {
			q, ok := Qualify(s, n)
			if !ok {
				continue
			}
			if prev, dup := seen[q]; dup {
				t.Fatalf("%q is the qualified name of %v and of %v", q, prev, [2]string{s, n})
			}
			seen[q] = [2]string{s, n}
		}
	}
}
