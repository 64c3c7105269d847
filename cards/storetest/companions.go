package storetest

import (
	"context"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/seed0cff8200/cardex/cards"
)

// The co-usage cases of the suite.
var companionTests = []struct {
	name string
	fn   func(t *testing.T, s cards.Store)
}{
	{"CompanionsCounts", testCompanionsCounts},
	{"CompanionsBoundsAndDecay", testCompanionsBoundsAndDecay},
	{"CompanionsInvalidWritesNothing", testCompanionsInvalid},
	{"CompanionsChangeFeed", testCompanionsChangeFeed},
	{"CompanionsDeletedWithCard", testCompanionsDeletedWithCard},
}

func companions(t *testing.T, s cards.Store, keys ...cards.Key) map[cards.Key]cards.Companions {
	t.Helper()
	m, err := s.Companions(t.Context(), keys)
	if err != nil {
		t.Fatalf("Companions: %v", err)
	}
	return m
}

func addCompanions(t *testing.T, s cards.Store, uses ...cards.CoUse) bool {
	t.Helper()
	changed, err := s.AddCompanions(t.Context(), uses)
	if err != nil {
		t.Fatalf("AddCompanions: %v", err)
	}
	return changed
}

func session(at time.Time, tools ...cards.Key) cards.CoUse { return cards.CoUse{Tools: tools, At: at} }

// companion finds other in k's table.
func companion(m map[cards.Key]cards.Companions, k, other cards.Key) (cards.Companion, bool) {
	for _, c := range m[k].Tools {
		if c.Server == other.Server && c.Name == other.Name {
			return c, true
		}
	}
	return cards.Companion{}, false
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func testCompanionsCounts(t *testing.T, s cards.Store) {
	a, b, c := simple(tenant, "s", "a"), simple(tenant, "s", "b"), simple(tenant, "t", "c")
	revoked := simple(tenant, "s", "revoked")
	revoked.Status = cards.StatusRevoked
	put(t, s, a, b, c, revoked, simple("other", "s", "a"))
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	// Sessions: a, b, c; c, a; a, revoked, and one naming a missing card,
	// which is left out of it.
	if !addCompanions(t, s,
		session(at, a.Key(), b.Key(), c.Key()),
		session(at, c.Key(), a.Key()),
		session(at, a.Key(), key(tenant, "s", "missing"), revoked.Key()),
	) {
		t.Fatal("AddCompanions reported no change")
	}
	m := companions(t, s, a.Key(), b.Key(), c.Key(), revoked.Key(), key("other", "s", "a"), key(tenant, "s", "missing"))
	for _, tc := range []struct {
		of, other     cards.Key
		before, after float64
	}{
		{a.Key(), b.Key(), 0, 1},
		{a.Key(), c.Key(), 1, 1},
		{a.Key(), revoked.Key(), 0, 1},
		{b.Key(), a.Key(), 1, 0},
		{b.Key(), c.Key(), 0, 1},
		{c.Key(), a.Key(), 1, 1},
		{c.Key(), b.Key(), 1, 0},
		{revoked.Key(), a.Key(), 1, 0},
	} {
		got, ok := companion(m, tc.of, tc.other)
		if !ok || !near(got.Before, tc.before) || !near(got.After, tc.after) {
			t.Errorf("%s's companion %s = %+v (found %v), want before %g after %g", tc.of, tc.other, got, ok, tc.before, tc.after)
		}
	}
	if len(m) != 4 {
		t.Errorf("Companions answered %d tables, want a's, b's, c's and revoked's: %+v", len(m), m)
	}
	for k, uses := range map[cards.Key]float64{a.Key(): 3, b.Key(): 1, c.Key(): 2, revoked.Key(): 1} {
		if !near(m[k].Uses, uses) {
			t.Errorf("%s was used in %g sessions, want %g", k, m[k].Uses, uses)
		}
	}
	// Strongest first: a's companion c (2) before b and revoked (1 each,
	// by server and name).
	if got := m[a.Key()].Tools; len(got) != 3 || got[0].Name != "c" || got[1].Name != "b" || got[2].Name != "revoked" {
		t.Errorf("a's table = %+v, want c, b, revoked", got)
	}
	if !m[a.Key()].At.Equal(at) {
		t.Errorf("a's table is as of %v, want %v", m[a.Key()].At, at)
	}
	// Sessions left with fewer than two cards change nothing.
	for _, u := range []cards.CoUse{
		session(at, a.Key(), key(tenant, "s", "missing")),
		session(at, key("nobody", "s", "x"), key("nobody", "s", "y")),
		session(at, key(tenant, "s", "a\x00b"), a.Key()),
	} {
		if changed, err := s.AddCompanions(t.Context(), []cards.CoUse{u}); err != nil || changed {
			t.Errorf("AddCompanions(%v) = %v, %v; want no change and no error", u, changed, err)
		}
	}
	if m := companions(t, s); len(m) != 0 {
		t.Errorf("Companions() = %+v", m)
	}
	// An update of the card keeps its table.
	a.Summary = "reworded"
	put(t, s, a)
	if _, ok := companion(companions(t, s, a.Key()), a.Key(), c.Key()); !ok {
		t.Error("an update of the card dropped its co-usage")
	}
}

func testCompanionsBoundsAndDecay(t *testing.T, s cards.Store) {
	hub := simple(tenant, "s", "hub")
	put(t, s, hub)
	var others []cards.Card
	for i := range cards.MaxCompanions + 4 {
		others = append(others, simple(tenant, "s", fmt.Sprintf("t%02d", i)))
	}
	put(t, s, others...)
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var uses []cards.CoUse
	for i, o := range others {
		// t00 is used after hub most often, t01 next, and so on.
		for range len(others) - i {
			uses = append(uses, session(at, hub.Key(), o.Key()))
		}
	}
	for len(uses) > 0 {
		n := min(len(uses), cards.MaxCoUses)
		addCompanions(t, s, uses[:n]...)
		uses = uses[n:]
	}
	tab := companions(t, s, hub.Key())[hub.Key()]
	if len(tab.Tools) != cards.MaxCompanions {
		t.Fatalf("hub keeps %d companions, want %d", len(tab.Tools), cards.MaxCompanions)
	}
	total := float64(len(others) * (len(others) + 1) / 2)
	if !near(tab.Uses, total) {
		t.Errorf("hub used in %g sessions, want %g (forgotten companions' sessions too)", tab.Uses, total)
	}
	for i, c := range tab.Tools {
		if c.Name != others[i].Name || !near(c.After, float64(len(others)-i)) {
			t.Errorf("companion %d = %+v, want %s with %d", i, c, others[i].Name, len(others)-i)
		}
	}
	// One half-life later, t00 is used before hub: every count has halved
	// first.
	later := at.Add(cards.CompanionHalfLife)
	addCompanions(t, s, session(later, others[0].Key(), hub.Key()))
	tab = companions(t, s, hub.Key())[hub.Key()]
	if !tab.At.Equal(later) || !near(tab.Uses, total/2+1) {
		t.Errorf("table as of %v with %g uses, want %v and %g", tab.At, tab.Uses, later, total/2+1)
	}
	if c := tab.Tools[0]; c.Name != "t00" || !near(c.After, float64(len(others))/2) || !near(c.Before, 1) {
		t.Errorf("after a half-life, t00 = %+v; want after %g, before 1", c, float64(len(others))/2)
	}
	// A session older than the table counts decayed to the table's time.
	addCompanions(t, s, session(at, hub.Key(), others[1].Key()))
	tab = companions(t, s, hub.Key())[hub.Key()]
	if c, _ := companion(map[cards.Key]cards.Companions{hub.Key(): tab}, hub.Key(), others[1].Key()); !near(c.After, float64(len(others)-1)/2+0.5) {
		t.Errorf("an old session counted %+v, want after %g", c, float64(len(others)-1)/2+0.5)
	}
	// Decayed reads: after enough half-lives every companion is forgotten.
	if d := tab.Decayed(later.Add(10 * cards.CompanionHalfLife)); len(d.Tools) != 0 {
		t.Errorf("after ten half-lives, %d companions remain", len(d.Tools))
	}
}

func testCompanionsInvalid(t *testing.T, s cards.Store) {
	a, b := simple(tenant, "s", "a"), simple(tenant, "s", "b")
	put(t, s, a, b, simple("other", "s", "a"))
	s0 := seq(t, s)
	good := cards.CoUse{Tools: []cards.Key{a.Key(), b.Key()}}
	tooMany := make([]cards.CoUse, cards.MaxCoUses+1)
	for i := range tooMany {
		tooMany[i] = good
	}
	long := cards.CoUse{}
	for i := range cards.MaxSessionTools + 1 {
		long.Tools = append(long.Tools, key(tenant, "s", fmt.Sprintf("x%d", i)))
	}
	for _, tc := range []struct {
		name  string
		uses  []cards.CoUse
		field string
	}{
		{"two tenants", []cards.CoUse{good, {Tools: []cards.Key{a.Key(), key("other", "s", "a")}}}, "co_uses[1].tools"},
		{"a tool twice", []cards.CoUse{good, {Tools: []cards.Key{a.Key(), b.Key(), a.Key()}}}, "co_uses[1].tools"},
		{"one tool", []cards.CoUse{{Tools: []cards.Key{a.Key()}}}, "co_uses[0].tools"},
		{"too many tools", []cards.CoUse{long}, "co_uses[0].tools"},
		{"a server", []cards.CoUse{{Tools: []cards.Key{a.Key(), cards.ServerKey(tenant, "s")}}}, "co_uses[0].tools[1]"},
		{"too many sessions", tooMany, "co_uses"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changed, err := s.AddCompanions(t.Context(), tc.uses)
			if fe := fieldError(t, err); fe.Field != tc.field || changed {
				t.Errorf("field %q (changed %v), want %q", fe.Field, changed, tc.field)
			}
		})
	}
	if m := companions(t, s, a.Key(), b.Key()); len(m) != 0 {
		t.Errorf("a refused batch wrote %+v", m)
	}
	if n := seq(t, s); n != s0 {
		t.Errorf("Seq moved from %d to %d on refused batches", s0, n)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.AddCompanions(ctx, []cards.CoUse{good}); err == nil {
		t.Error("AddCompanions with a cancelled context succeeded")
	}
	if _, err := s.Companions(ctx, []cards.Key{a.Key()}); err == nil {
		t.Error("Companions with a cancelled context succeeded")
	}
}

func testCompanionsChangeFeed(t *testing.T, s cards.Store) {
	a, b, c := simple(tenant, "s", "a"), simple(tenant, "s", "b"), simple(tenant, "s", "c")
	put(t, s, a)
	put(t, s, b)
	put(t, s, c)
	va := get(t, s, a.Key())
	s0 := seq(t, s)
	if !addCompanions(t, s, session(time.Time{}, a.Key(), b.Key())) {
		t.Fatal("no change")
	}
	s1 := seq(t, s)
	ch := changes(t, s, s0, 100)
	if len(ch) != 2 || s1 != s0+2 {
		t.Fatalf("Changes after AddCompanions = %+v (seq %d→%d), want a's and b's entries", ch, s0, s1)
	}
	for _, e := range ch {
		if e.Deleted || (e.Key != a.Key() && e.Key != b.Key()) {
			t.Errorf("unexpected change %+v", e)
		}
	}
	// The card itself is untouched.
	if got := get(t, s, a.Key()); got.Version != va.Version || !got.UpdatedAt.Equal(va.UpdatedAt) {
		t.Errorf("AddCompanions changed the card: version %d→%d", va.Version, got.Version)
	}
	// One entry per key: c's is now the oldest.
	if all := changes(t, s, 0, 100); len(all) != 3 || all[0].Key != c.Key() {
		t.Errorf("Changes = %+v, want c first", all)
	}
	// Nothing recorded: no change.
	if addCompanions(t, s) {
		t.Error("an empty batch reported a change")
	}
	if n := seq(t, s); n != s1 {
		t.Errorf("Seq moved from %d to %d on an empty batch", s1, n)
	}
}

func testCompanionsDeletedWithCard(t *testing.T, s cards.Store) {
	a, b := simple(tenant, "s", "a"), simple(tenant, "s", "b")
	put(t, s, a, b)
	addCompanions(t, s, session(time.Time{}, a.Key(), b.Key()))
	if err := s.Delete(t.Context(), a.Key(), 0); err != nil {
		t.Fatal(err)
	}
	m := companions(t, s, a.Key(), b.Key())
	if _, ok := m[a.Key()]; ok || len(m) != 1 {
		t.Errorf("Companions after deleting a = %+v, want b's only", m)
	}
	// A deleted card is left out, and a re-created one starts empty.
	if changed, err := s.AddCompanions(t.Context(), []cards.CoUse{session(time.Time{}, a.Key(), b.Key())}); err != nil || changed {
		t.Errorf("AddCompanions naming a deleted card = %v, %v", changed, err)
	}
	put(t, s, a)
	if m := companions(t, s, a.Key()); len(m) != 0 {
		t.Errorf("co-usage survived delete + re-create: %+v", m)
	}
}
