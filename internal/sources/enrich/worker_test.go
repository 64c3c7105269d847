package enrich

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/postgres/leader"
	"github.com/seed0cff8200/cardex/internal/testkit/chatfake"
	"github.com/seed0cff8200/cardex/internal/testkit/pgtest"
)

// waitFor polls cond for up to 20 seconds.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func enriched(t *testing.T, st cards.Store, tenant string) int {
	t.Helper()
	cs, err := NewStoreCatalog(st).List(context.Background(), tenant, "")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, c := range cs {
		if c.ExamplesSource != nil && c.ExamplesSource.Author == cards.AuthorModel && !c.ExamplesStale() {
			n++
		}
	}
	return n
}

func TestWorkerFollowsChanges(t *testing.T) {
	f := newFixture(t)
	w, err := NewWorker(WorkerConfig{Store: f.store, Enricher: f.enricher(nil), PerMinute: 60000, Poll: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { w.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()

	// Every card that needs examples gets them, once.
	waitFor(t, "the catalogue's examples", func() bool { return enriched(t, f.store, "acme") == 9 })
	waitFor(t, "other tenant", func() bool { return enriched(t, f.store, "other") == 1 })
	waitFor(t, "an empty backlog", func() bool { return w.Status().Backlog == 0 })
	st := w.Status()
	if !st.Leader || st.Written != 10 || st.Calls != 10 || st.Failed != 0 || st.Model != "fake-llm" || st.PromptVersion != PromptVersion {
		t.Errorf("status %+v", st)
	}
	if p := f.get("curated"); !slices.Equal(p.SearchExamples, []string{"my own phrase", "another of mine"}) {
		t.Errorf("the worker touched a person's examples: %q", p.SearchExamples)
	}

	// A new card, and a changed one: both are enriched, nothing else.
	ctx0 := context.Background()
	c := f.get("tool_1")
	c.Description = "Now with a description."
	if _, err := f.store.Put(ctx0, []cards.Card{c, {Tenant: "acme", Server: "files", Name: "newcomer", Summary: "Arrived later."}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new and the changed card", func() bool {
		c := f.get("tool_1")
		return enriched(t, f.store, "acme") == 10 && !c.ExamplesStale()
	})
	// The store has both writes before the worker counts them (under load,
	// a while before).
	waitFor(t, "both writes counted", func() bool { st := w.Status(); return st.Backlog == 0 && st.Written >= 12 })
	time.Sleep(100 * time.Millisecond) // its own writes come back as changes: they must cost nothing
	if st := w.Status(); st.Written != 12 || st.Calls != 12 {
		t.Errorf("after two changes: %+v", st)
	}

	// A failure is recorded and retried later, not in a loop.
	f.model.Content(func(chatfake.Request) string { return `{"phrases": []}` })
	if _, err := f.store.Put(ctx0, []cards.Card{{Tenant: "acme", Server: "files", Name: "stubborn", Summary: "Never answered well."}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the failure", func() bool { return w.Status().Failed == 1 })
	calls := f.model.Calls()
	time.Sleep(200 * time.Millisecond)
	if st := w.Status(); f.model.Calls() != calls || st.LastError == "" {
		t.Errorf("a failed card was retried at once (%d calls) or not reported: %+v", f.model.Calls()-calls, st)
	}

	// The console's button: a fresh answer for one card, never over a
	// person's examples.
	f.model.Content(func(r chatfake.Request) string { return `{"phrases": ["a brand new phrase for this"]}` })
	it, err := w.EnrichNow(ctx0, cards.Key{Tenant: "acme", Server: "files", Name: "tool_2"})
	if err != nil || it.Outcome != Written || f.get("tool_2").SearchExamples[0] != "a brand new phrase for this" {
		t.Errorf("EnrichNow: %+v, %v", it, err)
	}
	if _, err := w.EnrichNow(ctx0, cards.Key{Tenant: "acme", Server: "files", Name: "curated"}); !errors.Is(err, ErrPersonExamples) {
		t.Errorf("EnrichNow over a person's examples: %v", err)
	}
}

// TestWorkerOneLeaderAmongReplicas runs two replicas' workers on one
// PostgreSQL catalogue (the native server: the advisory lock needs real
// sessions): one leads and enriches each card once; when it stops, the
// other takes over.
func TestWorkerOneLeaderAmongReplicas(t *testing.T) {
	url := pgtest.NativeURL(t)
	schema := pgtest.NewSchemaName()
	a := pgtest.WithoutVectors(pgtest.Open(t, pgtest.Options{URL: url, Schema: schema, MigrateTo: 1}))
	b := pgtest.WithoutVectors(pgtest.Open(t, pgtest.Options{URL: url, Schema: schema, NoMigrate: true, KeepSchema: true}))
	ctx := context.Background()
	var cs []cards.Card
	for i := range 6 {
		cs = append(cs, cards.Card{Tenant: "acme", Server: "files", Name: fmt.Sprintf("tool_%d", i), Summary: fmt.Sprintf("Does thing %d.", i)})
	}
	if _, err := a.Put(ctx, cs); err != nil {
		t.Fatal(err)
	}
	model := chatfake.New(t)
	var answered atomic.Int32
	model.Content(func(r chatfake.Request) string { answered.Add(1); return chatfake.Phrases(r) })
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	replica := func(st cards.Store) (*Worker, func()) {
		chat, _ := NewChat(ChatConfig{BaseURL: model.URL, Model: "fake-llm"})
		e, _ := NewEnricher(chat, nil, 0, nil)
		w, err := NewWorker(WorkerConfig{Store: st, Enricher: e, PerMinute: 60000, Poll: 20 * time.Millisecond,
			// The lock's check (a ping with the same timeout) is long
			// enough that a loaded machine does not lose the leadership in
			// the middle of a model request, which would be asked again;
			// a released lock is taken at the other's next Poll anyway.
			Leader: leader.New(cfg, "enrichment "+schema, time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { w.Run(wctx); close(done) }()
		stop := func() { cancel(); <-done }
		t.Cleanup(stop)
		return w, stop
	}
	wa, stopA := replica(a)
	wb, stopB := replica(b)
	waitFor(t, "the catalogue's examples", func() bool { return enriched(t, a, "acme") == 6 })
	time.Sleep(200 * time.Millisecond)
	if wa.Status().Leader == wb.Status().Leader {
		t.Fatalf("leaders: a %t, b %t; want exactly one", wa.Status().Leader, wb.Status().Leader)
	}
	if answered.Load() != 6 {
		t.Errorf("%d answers for 6 cards: a card was enriched twice", answered.Load())
	}
	// The leader stops; the other takes over and enriches what comes next.
	next, stopLeader := wb, stopA
	if wb.Status().Leader {
		next, stopLeader = wa, stopB
	}
	stopLeader()
	if _, err := b.Put(ctx, []cards.Card{{Tenant: "acme", Server: "files", Name: "later", Summary: "Came after the leader left."}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new leader", func() bool { return next.Status().Leader })
	waitFor(t, "the later card", func() bool { return enriched(t, a, "acme") == 7 })
	if answered.Load() != 7 {
		t.Errorf("%d answers for 7 cards", answered.Load())
	}
}
