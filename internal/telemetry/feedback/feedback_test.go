package feedback

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/seed0cff8200/cardex/cards"
)

// learner records what it is taught (a test double for the retriever; the
// recorder is what is under test here).
type learner struct {
	mu     sync.Mutex
	taught map[cards.Key][]string
}

func (l *learner) Learn(_ context.Context, k cards.Key, phrases ...string) (bool, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.taught == nil {
		l.taught = map[cards.Key][]string{}
	}
	l.taught[k] = append(l.taught[k], phrases...)
	return true, nil
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newRecorder(t *testing.T, dir string, raw bool, l Learner, c *clock) *Recorder {
	t.Helper()
	r, err := New(context.Background(), Config{Path: filepath.Join(dir, "feedback.jsonl"), LearnedPath: filepath.Join(dir, "learned.jsonl"),
		Hash: func(s string) string { return fmt.Sprintf("h%d", len(s)) }, RawQueries: raw, Learner: l, Now: c.now})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestOutcomeLearning(t *testing.T) {
	dir := t.TempDir()
	c := &clock{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := &learner{}
	r := newRecorder(t, dir, true, l, c)
	r.Remember(Discovery{ID: "d1", Tenant: "acme", Subject: "u", Query: "move my meeting", Returned: []Tool{{"cal", "list_events"}}})
	miss, err := r.Outcome(context.Background(), "acme", "u", "d1", &Tool{"cal", "update_event"}, false)
	if err != nil || !miss {
		t.Fatalf("Outcome = %v, %v", miss, err)
	}
	k := cards.Key{Tenant: "acme", Server: "cal", Name: "update_event"}
	if !slices.Equal(l.taught[k], []string{"move my meeting"}) {
		t.Fatalf("taught %v", l.taught)
	}
	r.Close()
	// Learned phrasings live in the store now: no learned.jsonl is written.
	if _, err := os.Stat(filepath.Join(dir, "learned.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("learned.jsonl was written: %v", err)
	}
	evs, err := ReadEvents(filepath.Join(dir, "feedback.jsonl"))
	if err != nil || len(evs) != 1 || evs[0].Query != "move my meeting" || evs[0].SubjectHash != "h1" {
		t.Fatalf("events %+v, %v", evs, err)
	}
}

func TestHashedQueriesAreNotLearnedOrLogged(t *testing.T) {
	dir := t.TempDir()
	c := &clock{time.Now()}
	l := &learner{}
	r := newRecorder(t, dir, false, l, c)
	defer r.Close()
	r.Remember(Discovery{ID: "d1", Tenant: "acme", Subject: "u", Query: "secret words"})
	if _, err := r.Outcome(context.Background(), "acme", "u", "d1", &Tool{"s", "t"}, false); err != nil {
		t.Fatal(err)
	}
	if len(l.taught) != 0 {
		t.Errorf("learned %v with queries not kept raw", l.taught)
	}
	evs, _ := ReadEvents(filepath.Join(dir, "feedback.jsonl"))
	if len(evs) != 1 || evs[0].Query != "" || evs[0].QueryHash != "h12" {
		t.Errorf("events %+v: want only the query's hash", evs)
	}
}

func TestMemoryIsBounded(t *testing.T) {
	c := &clock{time.Now()}
	r := newRecorder(t, t.TempDir(), true, nil, c)
	defer r.Close()
	ctx := context.Background()
	r.Remember(Discovery{ID: "old", Tenant: "acme", Subject: "u", SessionID: "s"})
	c.t = c.t.Add(RememberFor + time.Second)
	if _, err := r.Outcome(ctx, "acme", "u", "old", nil, true); err != ErrUnknownDiscovery {
		t.Errorf("an expired discovery answered %v", err)
	}
	if r.Used("acme", "u", "s", Tool{"a", "b"}) {
		t.Error("an expired session judged an implicit miss")
	}
	for i := range MaxRemembered + 10 {
		r.Remember(Discovery{ID: fmt.Sprint(i), Tenant: "acme", Subject: "u", SessionID: fmt.Sprint(i % 3)})
	}
	r.mu.Lock()
	n, sessions := len(r.recent), 0
	for _, ids := range r.sessions {
		sessions += len(ids)
	}
	r.mu.Unlock()
	if n != MaxRemembered || sessions != 3*SessionDiscoveries {
		t.Errorf("remembered %d discoveries and %d session entries; want %d and %d", n, sessions, MaxRemembered, 3*SessionDiscoveries)
	}
	if _, err := r.Outcome(ctx, "acme", "u", "0", nil, true); err != ErrUnknownDiscovery {
		t.Errorf("the oldest discovery beyond the bound answered %v", err)
	}
	if _, err := r.Outcome(ctx, "acme", "u", fmt.Sprint(MaxRemembered+9), nil, true); err != nil {
		t.Errorf("the newest discovery: %v", err)
	}
}
