package retriever

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestCandKey: the key of a caller's candidate set is the tenant and the
// sorted set of its scopes, whatever their order and repetitions, so that
// callers holding the same scopes share a set and callers holding other
// scopes never do.
func TestCandKey(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	pool := []string{"*", "a:read", "a:*", "b:write", "billing:*", "z", "a", "a:"}
	want := func(c Caller) string {
		s := slices.Compact(slices.Sorted(slices.Values(c.Scopes)))
		return c.Tenant + idSep + strings.Join(s, idSep)
	}
	seen := map[string]string{} // key → the sorted set it stands for
	for range 5000 {
		c := Caller{Tenant: []string{"acme", "globex"}[r.IntN(2)]}
		for range r.IntN(6) {
			c.Scopes = append(c.Scopes, pool[r.IntN(len(pool))])
		}
		got := string(appendCandKey(nil, c))
		if got != want(c) {
			t.Fatalf("key of %s %q = %q, want %q", c.Tenant, c.Scopes, got, want(c))
		}
		set := c.Tenant + "|" + strings.Join(slices.Compact(slices.Sorted(slices.Values(c.Scopes))), "|")
		if other, ok := seen[got]; ok && other != set {
			t.Fatalf("%q and %q share the key %q", set, other, got)
		}
		seen[got] = set
	}
}
