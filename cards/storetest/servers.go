package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/seed0cff8200/cardex/cards"
)

// The server-entry and learned-phrasing cases of the suite.
var serverTests = []struct {
	name string
	fn   func(t *testing.T, s cards.Store)
}{
	{"ServersPutGetList", testServersPutGetList},
	{"ServersInvalid", testServersInvalid},
	{"ServersUnchangedAndVersions", testServersUnchangedAndVersions},
	{"ServersOptimisticConcurrency", testServersOptimisticConcurrency},
	{"ServersAtomicBatch", testServersAtomicBatch},
	{"ServersDelete", testServersDelete},
	{"ServersChangeFeed", testServersChangeFeed},
	{"ServersCancelledContext", testServersCancelledContext},
	{"LearnedBounds", testLearnedBounds},
	{"LearnedChangeFeed", testLearnedChangeFeed},
	{"LearnedDeletedWithCard", testLearnedDeletedWithCard},
}

func srv(tenant, name, title string) cards.ServerInfo {
	return cards.ServerInfo{Tenant: tenant, Name: name, Title: title, Description: "The " + title + " server."}
}

func putServers(t *testing.T, s cards.Store, ss ...cards.ServerInfo) []cards.PutResult {
	t.Helper()
	res, err := s.PutServers(t.Context(), ss)
	if err != nil {
		t.Fatalf("PutServers: %v", err)
	}
	if len(res) != len(ss) {
		t.Fatalf("PutServers returned %d results for %d entries", len(res), len(ss))
	}
	return res
}

func getServer(t *testing.T, s cards.Store, tenant, name string) cards.ServerInfo {
	t.Helper()
	si, err := s.GetServer(t.Context(), tenant, name)
	if err != nil {
		t.Fatalf("GetServer(%s/%s): %v", tenant, name, err)
	}
	return si
}

func mustNoServer(t *testing.T, s cards.Store, tenant, name string) {
	t.Helper()
	si, err := s.GetServer(t.Context(), tenant, name)
	if !errors.Is(err, cards.ErrNotFound) {
		t.Fatalf("GetServer(%s/%s) = %+v, %v; want ErrNotFound", tenant, name, si, err)
	}
}

func serverNames(ss []cards.ServerInfo) []string {
	out := make([]string, len(ss))
	for i := range ss {
		out[i] = ss[i].Name
	}
	return out
}

func listServers(t *testing.T, s cards.Store, tenant string) []cards.ServerInfo {
	t.Helper()
	ss, err := s.Servers(t.Context(), tenant)
	if err != nil {
		t.Fatalf("Servers(%s): %v", tenant, err)
	}
	return ss
}

func testServersPutGetList(t *testing.T, s cards.Store) {
	in := cards.ServerInfo{
		Tenant:      " acme ",
		Name:        "12306-mcp ",
		Title:       "12306\u200b Train\u202e Tickets\n",
		Description: "Search China Railway\t tickets.\x07 Query  stations.",
	}
	before := time.Now().Add(-time.Millisecond)
	res := putServers(t, s, in)
	after := time.Now().Add(time.Millisecond)
	if want := (cards.PutResult{Key: cards.ServerKey(tenant, "12306-mcp"), Version: 1, Outcome: cards.Created}); res[0] != want {
		t.Fatalf("result = %+v, want %+v", res[0], want)
	}
	if !res[0].Key.IsServer() {
		t.Errorf("result key %v is not a server key", res[0].Key)
	}
	got := getServer(t, s, tenant, "12306-mcp")
	if got.Tenant != tenant || got.Name != "12306-mcp" || got.Title != "12306 Train Tickets" ||
		got.Description != "Search China Railway tickets. Query stations." || got.Version != 1 {
		t.Errorf("stored entry = %+v; want it sanitised, version 1", got)
	}
	if got.UpdatedAt.Before(before) || got.UpdatedAt.After(after) || !got.UpdatedAt.Equal(got.UpdatedAt.Truncate(time.Microsecond)) {
		t.Errorf("updated_at = %v, want between %v and %v in microseconds", got.UpdatedAt, before, after)
	}

	// Names that sort differently as bytes than case-insensitively, and
	// neighbouring tenants.
	putServers(t, s, srv(tenant, "b", "B"), srv(tenant, "B", "Upper B"), srv(tenant, "a-b", "A-B"), srv(tenant, "a", "A"),
		srv(tenant, "a.b", "A.B"), srv("acme2", "x", "X"), srv("acm", "y", "Y"))
	want := []string{"12306-mcp", "B", "a", "a-b", "a.b", "b"}
	if got := serverNames(listServers(t, s, tenant)); !slices.Equal(got, want) {
		t.Errorf("Servers(acme) = %v, want %v (byte order)", got, want)
	}
	if got := serverNames(listServers(t, s, "acme2")); !slices.Equal(got, []string{"x"}) {
		t.Errorf("Servers(acme2) = %v", got)
	}
	if got := listServers(t, s, "nobody"); got == nil || len(got) != 0 {
		t.Errorf("Servers(nobody) = %#v, want an empty list", got)
	}
	listed := listServers(t, s, tenant)[0]
	if listed != getServer(t, s, tenant, listed.Name) {
		t.Errorf("listed entry %+v differs from GetServer's", listed)
	}
	for _, k := range [][2]string{{tenant, "missing"}, {"acme2", "a"}, {tenant, "A"}, {"", ""}, {tenant, "a\x00b"}, {"acme\x00a", "b"}} {
		mustNoServer(t, s, k[0], k[1])
	}
	_, err := s.Servers(t.Context(), "")
	if fe := fieldError(t, err); fe.Field != "tenant" {
		t.Errorf("Servers(\"\") = %v, want tenant is required", err)
	}
	// Server entries are not cards: they do not show in List or Get.
	if p, err := s.List(t.Context(), cards.ListQuery{Tenant: tenant}); err != nil || len(p.Cards) != 0 {
		t.Errorf("List after server puts = %v, %v; want no cards", keysOf(p.Cards), err)
	}
	mustNotFound(t, s, cards.ServerKey(tenant, "a"))
	// Empty batch.
	if res, err := s.PutServers(t.Context(), nil); err != nil || len(res) != 0 {
		t.Errorf("PutServers(nil) = %+v, %v", res, err)
	}
}

func testServersInvalid(t *testing.T, s cards.Store) {
	tests := []struct {
		name  string
		bad   func(si *cards.ServerInfo)
		field string
		limit int
	}{
		{"no tenant", func(si *cards.ServerInfo) { si.Tenant = " " }, "tenant", 0},
		{"bad tenant", func(si *cards.ServerInfo) { si.Tenant = "a/b" }, "tenant", cards.MaxNameLen},
		{"no name", func(si *cards.ServerInfo) { si.Name = "" }, "name", 0},
		{"bad name", func(si *cards.ServerInfo) { si.Name = "has space" }, "name", cards.MaxNameLen},
		{"long name", func(si *cards.ServerInfo) { si.Name = strings.Repeat("n", cards.MaxNameLen+1) }, "name", cards.MaxNameLen},
		{"long title", func(si *cards.ServerInfo) { si.Title = strings.Repeat("é", cards.MaxSummaryLen+1) }, "title", cards.MaxSummaryLen},
		{"long description", func(si *cards.ServerInfo) {
			si.Description = strings.Repeat("d", cards.MaxDescriptionLen+1)
		}, "description", cards.MaxDescriptionLen},
		{"negative version", func(si *cards.ServerInfo) { si.Version = -1 }, "version", 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bad := srv(tenant, "broken", "Broken")
			tc.bad(&bad)
			_, err := s.PutServers(t.Context(), []cards.ServerInfo{srv(tenant, "fine", "Fine"), bad})
			fe := fieldError(t, err)
			if fe.Field != tc.field || !strings.Contains(fe.Item, "servers[1]") {
				t.Errorf("error %v: field %q item %q; want field %s of servers[1]", err, fe.Field, fe.Item, tc.field)
			}
			if tc.limit > 0 && !containsNumber(fe.Msg, int64(tc.limit)) {
				t.Errorf("error %q should name the limit %d", err, tc.limit)
			}
			mustNoServer(t, s, tenant, "fine")
		})
	}
	// A title of exactly the limit, counted in code points, is fine.
	ok := srv(tenant, "ok", strings.Repeat("é", cards.MaxSummaryLen))
	putServers(t, s, ok)

	// The same key twice, also after trimming.
	_, err := s.PutServers(t.Context(), []cards.ServerInfo{srv(tenant, "x", "X"), srv(tenant, "y", "Y"), srv(" "+tenant, "x ", "X again")})
	fe := fieldError(t, err)
	if !strings.Contains(err.Error(), "servers[0]") || !strings.Contains(err.Error(), "servers[2]") || fe.Field != "name" {
		t.Errorf("duplicate error %q should name servers[0] and servers[2]", err)
	}
	mustNoServer(t, s, tenant, "x")
	// The same name in two tenants is no duplicate.
	putServers(t, s, srv(tenant, "x", "X"), srv("other", "x", "X"))
}

func testServersUnchangedAndVersions(t *testing.T, s cards.Store) {
	si := srv(tenant, "github", "GitHub")
	putServers(t, s, si)
	first := getServer(t, s, tenant, "github")
	seq0 := seq(t, s)
	// The same entry, and one that sanitises to the same, are unchanged.
	respelled := si
	respelled.Title = " Git\u200bHub "
	for i, again := range []cards.ServerInfo{si, respelled} {
		time.Sleep(2 * time.Millisecond)
		if res := putServers(t, s, again); res[0].Outcome != cards.Unchanged || res[0].Version != 1 {
			t.Errorf("put #%d = %+v, want unchanged version 1", i, res[0])
		}
	}
	if got := getServer(t, s, tenant, "github"); got != first {
		t.Errorf("unchanged puts changed the entry: %+v, was %+v", got, first)
	}
	if n := seq(t, s); n != seq0 {
		t.Errorf("Seq moved from %d to %d on unchanged puts", seq0, n)
	}
	prev := first
	for v := int64(2); v <= 4; v++ {
		time.Sleep(2 * time.Millisecond)
		si.Description = fmt.Sprintf("Revision %d.", v)
		if res := putServers(t, s, si); res[0].Outcome != cards.Updated || res[0].Version != v {
			t.Fatalf("update = %+v, want updated version %d", res[0], v)
		}
		got := getServer(t, s, tenant, "github")
		if got.Version != v || got.Description != si.Description || !got.UpdatedAt.After(prev.UpdatedAt) {
			t.Errorf("after update %d: %+v (previous updated_at %v)", v, got, prev.UpdatedAt)
		}
		prev = got
	}
	// Results follow the input order.
	res := putServers(t, s, srv(tenant, "zeta", "Z"), si, srv(tenant, "alpha", "A"))
	want := []cards.PutResult{
		{Key: cards.ServerKey(tenant, "zeta"), Version: 1, Outcome: cards.Created},
		{Key: cards.ServerKey(tenant, "github"), Version: 4, Outcome: cards.Unchanged},
		{Key: cards.ServerKey(tenant, "alpha"), Version: 1, Outcome: cards.Created},
	}
	if !slices.Equal(res, want) {
		t.Errorf("results = %+v, want %+v", res, want)
	}
}

func testServersOptimisticConcurrency(t *testing.T, s cards.Store) {
	si := srv(tenant, "jira", "Jira")
	putServers(t, s, si)
	si.Title = "Jira Cloud"
	putServers(t, s, si) // version 2
	stored := getServer(t, s, tenant, "jira")

	stale := si
	stale.Version, stale.Title = 1, "lost update"
	_, err := s.PutServers(t.Context(), []cards.ServerInfo{stale})
	if !errors.Is(err, cards.ErrConflict) {
		t.Fatalf("stale put = %v, want ErrConflict", err)
	}
	if !strings.Contains(err.Error(), "jira") || !containsNumber(err.Error(), 1) || !containsNumber(err.Error(), 2) {
		t.Errorf("conflict %q should name the server and versions 1 and 2", err)
	}
	if got := getServer(t, s, tenant, "jira"); got != stored {
		t.Errorf("a conflicting put changed the entry: %+v", got)
	}
	current := si
	current.Version, current.Title = 2, "Jira Data Center"
	if res := putServers(t, s, current); res[0].Outcome != cards.Updated || res[0].Version != 3 {
		t.Errorf("put with the current version = %+v, want updated version 3", res[0])
	}
	ghost := srv(tenant, "ghost", "Ghost")
	ghost.Version = 3
	if _, err := s.PutServers(t.Context(), []cards.ServerInfo{ghost}); !errors.Is(err, cards.ErrConflict) || !strings.Contains(err.Error(), "ghost") {
		t.Errorf("put with version 3 of a missing entry = %v, want ErrConflict naming it", err)
	}
	mustNoServer(t, s, tenant, "ghost")
}

func testServersAtomicBatch(t *testing.T, s cards.Store) {
	a, b := srv(tenant, "a", "A"), srv(tenant, "b", "B")
	putServers(t, s, a, b)
	beforeA, beforeB := getServer(t, s, tenant, "a"), getServer(t, s, tenant, "b")
	seq0 := seq(t, s)
	update := a
	update.Title = "should not be written"
	staleB := b
	staleB.Title, staleB.Version = "stale", 9
	for _, tc := range []struct {
		name     string
		last     cards.ServerInfo
		conflict bool
	}{
		{"invalid", cards.ServerInfo{Tenant: tenant, Name: "bad name"}, false},
		{"conflict", staleB, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := s.PutServers(t.Context(), []cards.ServerInfo{srv(tenant, "new_one", "New"), update, tc.last})
			if err == nil {
				t.Fatalf("PutServers succeeded: %+v", res)
			}
			if tc.conflict && (!errors.Is(err, cards.ErrConflict) || !strings.Contains(err.Error(), "servers[2]")) {
				t.Errorf("error = %v, want ErrConflict naming servers[2]", err)
			}
			if !tc.conflict {
				if fe := fieldError(t, err); !strings.Contains(fe.Item, "servers[2]") {
					t.Errorf("FieldError.Item = %q, want servers[2]", fe.Item)
				}
			}
			mustNoServer(t, s, tenant, "new_one")
			if got := getServer(t, s, tenant, "a"); got != beforeA {
				t.Errorf("a failed batch changed a: %+v", got)
			}
			if got := getServer(t, s, tenant, "b"); got != beforeB {
				t.Errorf("a failed batch changed b: %+v", got)
			}
			if n := seq(t, s); n != seq0 {
				t.Errorf("Seq moved from %d to %d on a failed batch", seq0, n)
			}
		})
	}
}

func testServersDelete(t *testing.T, s cards.Store) {
	si := srv(tenant, "ops", "Ops")
	putServers(t, s, si)
	si.Title = "Operations"
	putServers(t, s, si) // version 2
	putServers(t, s, srv(tenant, "keeper", "Keeper"))
	tool := simple(tenant, "ops", "restart")
	put(t, s, tool)

	err := s.DeleteServer(t.Context(), tenant, "ops", 1)
	if !errors.Is(err, cards.ErrConflict) || !containsNumber(err.Error(), 1) || !containsNumber(err.Error(), 2) {
		t.Fatalf("DeleteServer with a stale version = %v, want ErrConflict naming 1 and 2", err)
	}
	getServer(t, s, tenant, "ops")
	if err := s.DeleteServer(t.Context(), tenant, "ops", 2); err != nil {
		t.Fatalf("DeleteServer with the current version: %v", err)
	}
	mustNoServer(t, s, tenant, "ops")
	getServer(t, s, tenant, "keeper")
	get(t, s, tool.Key()) // its cards stay
	for _, v := range []int64{0, 2} {
		if err := s.DeleteServer(t.Context(), tenant, "ops", v); !errors.Is(err, cards.ErrNotFound) {
			t.Errorf("DeleteServer(missing, %d) = %v, want ErrNotFound", v, err)
		}
	}
	for _, k := range [][2]string{{"other", "keeper"}, {tenant, "bad name"}, {"", "keeper"}} {
		if err := s.DeleteServer(t.Context(), k[0], k[1], 0); !errors.Is(err, cards.ErrNotFound) {
			t.Errorf("DeleteServer(%s/%s) = %v, want ErrNotFound", k[0], k[1], err)
		}
	}
	getServer(t, s, tenant, "keeper")
	// Deleting a card does not delete its server entry.
	if err := s.Delete(t.Context(), tool.Key(), 0); err != nil {
		t.Fatal(err)
	}
	// A client holding the deleted entry's version conflicts; a re-created
	// entry continues after it.
	stale := si
	stale.Version = 2
	if _, err := s.PutServers(t.Context(), []cards.ServerInfo{stale}); !errors.Is(err, cards.ErrConflict) {
		t.Errorf("put of a deleted entry with its old version = %v, want ErrConflict", err)
	}
	if res := putServers(t, s, si); res[0].Outcome != cards.Created || res[0].Version != 3 {
		t.Errorf("re-create = %+v, want created version 3", res[0])
	}
	if got := serverNames(listServers(t, s, tenant)); !slices.Equal(got, []string{"keeper", "ops"}) {
		t.Errorf("Servers = %v", got)
	}
}

func testServersChangeFeed(t *testing.T, s cards.Store) {
	// A card and a server entry of the same name are different keys.
	c := simple(tenant, "github", "search")
	put(t, s, c)
	s1 := seq(t, s)
	putServers(t, s, srv(tenant, "github", "GitHub"), srv("other", "github", "GitHub"))
	s2 := seq(t, s)
	if s2 <= s1 {
		t.Fatalf("Seq did not move on a server put: %d then %d", s1, s2)
	}
	ch := changes(t, s, s1, 100)
	want := []cards.Change{
		{Key: cards.ServerKey(tenant, "github")},
		{Key: cards.ServerKey("other", "github")},
	}
	if len(ch) != 2 {
		t.Fatalf("Changes after a server put = %+v, want %+v", ch, want)
	}
	for i := range ch {
		if ch[i].Key != want[i].Key || ch[i].Deleted || ch[i].Key.Name != "" || ch[i].Seq <= s1 || ch[i].Seq > s2 {
			t.Errorf("change %d = %+v, want %+v", i, ch[i], want[i])
		}
	}
	// An update replaces the entry's change; a deletion replaces it too.
	si := srv(tenant, "github", "GitHub")
	si.Description = "Repositories, issues and pull requests."
	putServers(t, s, si)
	s3 := seq(t, s)
	if err := s.DeleteServer(t.Context(), "other", "github", 0); err != nil {
		t.Fatal(err)
	}
	s4 := seq(t, s)
	ch = changes(t, s, 0, 100)
	type entry struct {
		key     cards.Key
		deleted bool
		seq     uint64
	}
	var got []entry
	for _, e := range ch {
		got = append(got, entry{e.Key, e.Deleted, e.Seq})
	}
	wantAll := []entry{{c.Key(), false, s1}, {cards.ServerKey(tenant, "github"), false, s3}, {cards.ServerKey("other", "github"), true, s4}}
	if !slices.Equal(got, wantAll) {
		t.Errorf("Changes = %+v, want the latest change per key %+v", got, wantAll)
	}
	// Failed and unchanged server writes add nothing.
	putServers(t, s, si)
	_ = s.DeleteServer(t.Context(), tenant, "nope", 0)
	if n := seq(t, s); n != s4 {
		t.Errorf("Seq moved from %d to %d on an unchanged put and a failed delete", s4, n)
	}
}

func testServersCancelledContext(t *testing.T, s cards.Store) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.PutServers(ctx, []cards.ServerInfo{srv(tenant, "a", "A")}); err == nil {
		t.Errorf("PutServers with a cancelled context succeeded")
	}
	mustNoServer(t, s, tenant, "a")
	if _, err := s.Servers(ctx, tenant); err == nil {
		t.Errorf("Servers with a cancelled context succeeded")
	}
	put(t, s, simple(tenant, "s", "a"))
	if _, err := s.AddLearned(ctx, key(tenant, "s", "a"), "x"); err == nil {
		t.Errorf("AddLearned with a cancelled context succeeded")
	}
}

// --- learned phrasings --------------------------------------------------

func learned(t *testing.T, s cards.Store, keys ...cards.Key) map[cards.Key][]string {
	t.Helper()
	m, err := s.Learned(t.Context(), keys)
	if err != nil {
		t.Fatalf("Learned: %v", err)
	}
	return m
}

func addLearned(t *testing.T, s cards.Store, k cards.Key, phrases ...string) bool {
	t.Helper()
	changed, err := s.AddLearned(t.Context(), k, phrases...)
	if err != nil {
		t.Fatalf("AddLearned(%s): %v", k, err)
	}
	return changed
}

func testLearnedBounds(t *testing.T, s cards.Store) {
	a := simple(tenant, "s", "a")
	revoked := simple(tenant, "s", "revoked")
	revoked.Status = cards.StatusRevoked
	put(t, s, a, revoked, simple("other", "s", "a"))
	k := a.Key()
	for _, tc := range []struct {
		name    string
		key     cards.Key
		phrases []string
		changed bool
		want    []string
	}{
		{"nothing", k, nil, false, nil},
		{"empty after sanitising", k, []string{"  \u200b\u202e ", ""}, false, nil},
		{"first, sanitised", k, []string{"where\u200b is  my\nparcel "}, true, []string{"where is my parcel"}},
		{"duplicate in another case", k, []string{"WHERE IS MY PARCEL"}, false, []string{"where is my parcel"}},
		{"two, one repeated", k, []string{"track my order", "Track My Order", "where is my parcel"}, true, []string{"where is my parcel", "track my order"}},
		{"a card of any status", revoked.Key(), []string{"old tool"}, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := addLearned(t, s, tc.key, tc.phrases...); got != tc.changed {
				t.Errorf("changed = %v, want %v", got, tc.changed)
			}
			if tc.want != nil {
				if got := learned(t, s, k)[k]; !slices.Equal(got, tc.want) {
					t.Errorf("learned = %q, want %q", got, tc.want)
				}
			}
		})
	}
	for _, missing := range []cards.Key{key(tenant, "s", "missing"), key("nobody", "s", "a"), cards.ServerKey(tenant, "s"), key(tenant, "s", "a\x00b")} {
		if changed, err := s.AddLearned(t.Context(), missing, "x"); !errors.Is(err, cards.ErrNotFound) || changed {
			t.Errorf("AddLearned(%q) = %v, %v; want ErrNotFound", missing, changed, err)
		}
	}
	// Cut to MaxLearnedLen code points; the latest MaxLearned are kept.
	long := strings.Repeat("é", cards.MaxLearnedLen+50)
	var many []string
	for i := range cards.MaxLearned + 10 {
		many = append(many, fmt.Sprintf("phrasing number %d", i))
	}
	if !addLearned(t, s, k, append([]string{long}, many...)...) {
		t.Fatal("AddLearned of new phrasings reported no change")
	}
	got := learned(t, s, k)[k]
	if len(got) != cards.MaxLearned || !slices.Equal(got, many[len(many)-cards.MaxLearned:]) {
		t.Errorf("kept %d phrasings %q; want the latest %d", len(got), got, cards.MaxLearned)
	}
	addLearned(t, s, k, long)
	got = learned(t, s, k)[k]
	if n := len([]rune(got[len(got)-1])); n != cards.MaxLearnedLen {
		t.Errorf("a long phrasing was kept with %d characters, want %d", n, cards.MaxLearnedLen)
	}
	// Learned answers for the keys asked, and only those with phrasings.
	m := learned(t, s, k, revoked.Key(), key("other", "s", "a"), key(tenant, "s", "missing"))
	if len(m) != 2 || !slices.Equal(m[revoked.Key()], []string{"old tool"}) {
		t.Errorf("Learned = %q; want a's and revoked's only", m)
	}
	if m := learned(t, s); len(m) != 0 {
		t.Errorf("Learned() = %q", m)
	}
	// Updating the card keeps its phrasings.
	a.Summary = "reworded"
	put(t, s, a)
	if got := learned(t, s, k)[k]; len(got) != cards.MaxLearned {
		t.Errorf("after an update, %d phrasings", len(got))
	}
}

func testLearnedChangeFeed(t *testing.T, s cards.Store) {
	a, b := simple(tenant, "s", "a"), simple(tenant, "s", "b")
	put(t, s, a)
	put(t, s, b)
	c0 := get(t, s, a.Key())
	s0 := seq(t, s)
	if !addLearned(t, s, a.Key(), "first phrasing") {
		t.Fatal("no change")
	}
	s1 := seq(t, s)
	if s1 <= s0 {
		t.Fatalf("Seq did not move on a learned change: %d then %d", s0, s1)
	}
	ch := changes(t, s, s0, 100)
	if len(ch) != 1 || ch[0].Key != a.Key() || ch[0].Deleted || ch[0].Seq != s1 {
		t.Fatalf("Changes after AddLearned = %+v, want a's entry at %d", ch, s1)
	}
	// The card itself is untouched: same version, same updated_at.
	if c1 := get(t, s, a.Key()); c1.Version != c0.Version || !c1.UpdatedAt.Equal(c0.UpdatedAt) {
		t.Errorf("AddLearned changed the card: version %d→%d, updated_at %v→%v", c0.Version, c1.Version, c0.UpdatedAt, c1.UpdatedAt)
	}
	// Nothing new: no change.
	if addLearned(t, s, a.Key(), "First Phrasing", "") {
		t.Error("a repeated phrasing reported a change")
	}
	if n := seq(t, s); n != s1 {
		t.Errorf("Seq moved from %d to %d on an unchanged AddLearned", s1, n)
	}
	// The change sequence still holds one entry per key, a's now after b's.
	all := changes(t, s, 0, 100)
	if len(all) != 2 || all[0].Key != b.Key() || all[1].Key != a.Key() {
		t.Errorf("Changes = %+v, want b then a", all)
	}
	// A later put of the card keeps versions monotonic.
	a.Summary = "a, v2"
	if res := put(t, s, a); res[0].Version != c0.Version+1 {
		t.Errorf("put after AddLearned = %+v, want version %d", res[0], c0.Version+1)
	}
}

func testLearnedDeletedWithCard(t *testing.T, s cards.Store) {
	a, b := simple(tenant, "s", "a"), simple(tenant, "s", "b")
	put(t, s, a, b)
	addLearned(t, s, a.Key(), "phrase for a")
	addLearned(t, s, b.Key(), "phrase for b")
	if err := s.Delete(t.Context(), a.Key(), 0); err != nil {
		t.Fatal(err)
	}
	m := learned(t, s, a.Key(), b.Key())
	if _, ok := m[a.Key()]; ok || len(m) != 1 {
		t.Errorf("Learned after deleting a = %q, want b's only", m)
	}
	if ch := changes(t, s, 0, 100); ch[len(ch)-1].Key != a.Key() || !ch[len(ch)-1].Deleted {
		t.Errorf("the deletion is not the latest change: %+v", ch)
	}
	// A deleted card learns nothing, and a re-created one starts empty.
	if _, err := s.AddLearned(t.Context(), a.Key(), "x"); !errors.Is(err, cards.ErrNotFound) {
		t.Errorf("AddLearned on a deleted card = %v, want ErrNotFound", err)
	}
	put(t, s, a)
	if m := learned(t, s, a.Key()); len(m) != 0 {
		t.Errorf("phrasings survived delete + re-create: %q", m)
	}
}
