package feedback

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seed0cff8200/cardex/cards"
)

// coUser records the sessions it is given (a test double for the
// retriever, whose side is tested in retriever/companions_test.go).
type coUser struct {
	mu   sync.Mutex
	uses []cards.CoUse
}

func (c *coUser) RecordCoUse(_ context.Context, uses []cards.CoUse) (bool, error) {
	if err := cards.ValidateCoUses(uses); err != nil {
		return false, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.uses = append(c.uses, uses...)
	return len(uses) > 0, nil
}

func (c *coUser) sessions() [][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out [][]string
	for _, u := range c.uses {
		var s []string
		for _, k := range u.Tools {
			s = append(s, k.Tenant+":"+k.Server+"/"+k.Name)
		}
		out = append(out, s)
	}
	return out
}

type safeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *safeClock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *safeClock) add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func TestCoUseBySessionAndTurn(t *testing.T) {
	dir := t.TempDir()
	c := &safeClock{t: time.Date(2025, 5, 1, 9, 0, 0, 0, time.UTC)}
	cu := &coUser{}
	r, err := New(context.Background(), Config{Path: filepath.Join(dir, "feedback.jsonl"),
		Hash: func(s string) string { return "h-" + s }, CoUse: cu, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	use := func(subject, discovery string, server, name string) {
		t.Helper()
		if _, err := r.Outcome(ctx, "acme", subject, discovery, &Tool{server, name}, false); err != nil {
			t.Fatal(err)
		}
	}
	// Session s1 of u1 over two discoveries: codes, tickets, codes again, pay.
	r.Remember(Discovery{ID: "d1", Tenant: "acme", Subject: "u1", SessionID: "s1", Returned: []Tool{{"rail", "codes"}}})
	r.Remember(Discovery{ID: "d2", Tenant: "acme", Subject: "u1", SessionID: "s1"})
	use("u1", "d1", "rail", "codes")
	use("u1", "d2", "rail", "tickets")
	use("u1", "d2", "rail", "codes")
	use("u1", "d2", "pay", "charge")
	// Another subject with the same session id is another session; one
	// tool teaches nothing.
	r.Remember(Discovery{ID: "d3", Tenant: "acme", Subject: "u2", SessionID: "s1"})
	use("u2", "d3", "rail", "tickets")
	// Without a session id, one discovery is one turn.
	r.Remember(Discovery{ID: "d4", Tenant: "acme", Subject: "u3"})
	r.Remember(Discovery{ID: "d5", Tenant: "acme", Subject: "u3"})
	use("u3", "d4", "maps", "geocode")
	use("u3", "d4", "maps", "route")
	use("u3", "d5", "weather", "now")
	// A none_fit outcome uses nothing.
	if _, err := r.Outcome(ctx, "acme", "u3", "d5", nil, true); err != nil {
		t.Fatal(err)
	}

	// Nothing is due before the sessions have been idle for SessionIdle.
	c.add(SessionIdle - time.Second)
	if n, err := r.FlushCoUse(ctx, false); err != nil || n != 0 {
		t.Fatalf("FlushCoUse before idle = %d, %v", n, err)
	}
	c.add(time.Second)
	if n, err := r.FlushCoUse(ctx, false); err != nil || n != 2 {
		t.Fatalf("FlushCoUse after idle = %d, %v; want 2 sessions", n, err)
	}
	want := [][]string{
		{"acme:rail/codes", "acme:rail/tickets", "acme:pay/charge"},
		{"acme:maps/geocode", "acme:maps/route"},
	}
	got := cu.sessions()
	slices.SortFunc(got, func(a, b []string) int { return len(b) - len(a) })
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("sessions %v, want %v", got, want)
	}
	if cu.uses[0].At.IsZero() {
		t.Error("a session is recorded without its time")
	}

	// The same sessions come out of the log.
	r2events := func() []Event {
		t.Helper()
		evs, err := ReadEvents(filepath.Join(dir, "feedback.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		return evs
	}
	var fromLog [][]string
	for _, u := range CoUsesFromEvents(r2events()) {
		var s []string
		for _, k := range u.Tools {
			s = append(s, k.Tenant+":"+k.Server+"/"+k.Name)
		}
		fromLog = append(fromLog, s)
	}
	slices.SortFunc(fromLog, func(a, b []string) int { return len(b) - len(a) })
	if fmt.Sprint(fromLog) != fmt.Sprint(want) {
		t.Errorf("from the log: %v, want %v", fromLog, want)
	}

	// Close records what is still open.
	r.Remember(Discovery{ID: "d6", Tenant: "acme", Subject: "u1", SessionID: "s9"})
	use("u1", "d6", "a", "x")
	use("u1", "d6", "b", "y")
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if got := cu.sessions(); len(got) != 3 || fmt.Sprint(got[2]) != "[acme:a/x acme:b/y]" {
		t.Errorf("after Close, sessions %v; want the open one recorded", got)
	}
}

func TestOpenSessionsAreBounded(t *testing.T) {
	var s sessions
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range MaxOpenSessions + 5 {
		k := fmt.Sprint(i)
		at := t0.Add(time.Duration(i) * time.Millisecond)
		s.add(k, cards.Key{Tenant: "t", Server: "s", Name: "a"}, at)
		s.add(k, cards.Key{Tenant: "t", Server: "s", Name: "b"}, at)
	}
	due := s.due(t0.Add(time.Minute), false)
	if len(due) != 5 || len(s.open) != MaxOpenSessions {
		t.Fatalf("due %d, open %d; want the 5 oldest out and %d open", len(due), len(s.open), MaxOpenSessions)
	}
	if !due[0].At.Equal(t0) || !due[4].At.Equal(t0.Add(4*time.Millisecond)) {
		t.Errorf("due sessions at %v … %v, want the oldest first", due[0].At, due[4].At)
	}
	// A session lists each tool once and at most MaxSessionTools.
	var one sessions
	for i := range cards.MaxSessionTools + 3 {
		one.add("k", cards.Key{Tenant: "t", Server: "s", Name: fmt.Sprint(i % (cards.MaxSessionTools + 2))}, t0)
	}
	if u := one.due(t0, true); len(u) != 1 || len(u[0].Tools) != cards.MaxSessionTools || cards.ValidateCoUses(u) != nil {
		t.Errorf("one long session = %+v", u)
	}
}
