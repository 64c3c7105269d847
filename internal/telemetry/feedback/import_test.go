package feedback

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
)

// legacyLog writes a learned.jsonl as earlier versions did.
func legacyLog(t *testing.T, path string, lines ...learnedLine) {
	t.Helper()
	var b strings.Builder
	for _, l := range lines {
		fmt.Fprintf(&b, `{"key":{"tenant":%q,"server":%q,"name":%q},"phrase":%q}`+"\n", l.Key.Tenant, l.Key.Server, l.Key.Name, l.Phrase)
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
}

func openStore(t *testing.T, cs ...cards.Card) *embedded.Store {
	t.Helper()
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if _, err := st.Put(context.Background(), cs); err != nil {
		t.Fatal(err)
	}
	return st
}

func TestImportLearnedOnce(t *testing.T) {
	ctx := context.Background()
	upd := cards.Key{Tenant: "acme", Server: "cal", Name: "update_event"}
	list := cards.Key{Tenant: "acme", Server: "cal", Name: "list_events"}
	gone := cards.Key{Tenant: "acme", Server: "cal", Name: "deleted_since"}
	st := openStore(t,
		cards.Card{Tenant: "acme", Server: "cal", Name: "update_event", Summary: "Move an event."},
		cards.Card{Tenant: "acme", Server: "cal", Name: "list_events", Summary: "List events."})
	dir := t.TempDir()
	path := filepath.Join(dir, "learned.jsonl")
	legacyLog(t, path,
		learnedLine{upd, "move my meeting"}, learnedLine{list, "what is on today"}, learnedLine{gone, "old"},
		learnedLine{upd, "push the standup to 3pm"}, learnedLine{upd, "MOVE MY MEETING"})
	// A crash may have cut the last line.
	f, _ := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	_, _ = f.WriteString(`{"key":{"tenant":"acme","ser`)
	f.Close()
	seq0, _ := st.Seq(ctx)

	cfg := Config{Path: filepath.Join(dir, "feedback.jsonl"), LearnedPath: path, Store: st, Hash: func(s string) string { return s }}
	r, err := New(ctx, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if err := r.WaitImported(ctx); err != nil {
		t.Fatal(err)
	}
	r.Close()
	got, err := st.Learned(ctx, []cards.Key{upd, list, gone})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got[upd], []string{"move my meeting", "push the standup to 3pm"}) || !slices.Equal(got[list], []string{"what is on today"}) || len(got) != 2 {
		t.Errorf("store learned %q after the import", got)
	}
	if seq, _ := st.Seq(ctx); seq != seq0+2 {
		t.Errorf("Seq %d → %d; want one change per imported card", seq0, seq)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("learned.jsonl still there after the import: %v", err)
	}
	if _, err := os.Stat(path + ".imported"); err != nil {
		t.Errorf("learned.jsonl.imported: %v", err)
	}

	// The next start finds nothing to import and changes nothing.
	seq1, _ := st.Seq(ctx)
	r2, err := New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	r2.Close()
	if seq, _ := st.Seq(ctx); seq != seq1 {
		t.Errorf("a second start changed the store: Seq %d → %d", seq1, seq)
	}
	// Without a store, a legacy file is an error, not silently ignored.
	legacyLog(t, path, learnedLine{upd, "x"})
	if _, err := New(ctx, Config{Path: cfg.Path, LearnedPath: path, Hash: cfg.Hash}); err == nil {
		t.Error("New with a learned.jsonl and no store succeeded")
	}
}

// gatedStore is the store as a replica sees it before its database schema
// is current: Unavailable until opened (what cmd/cardex's schema gate
// answers).
type gatedStore struct {
	*embedded.Store
	open  atomic.Bool
	tries atomic.Int32
}

func (g *gatedStore) AddLearned(ctx context.Context, k cards.Key, phrases ...string) (bool, error) {
	g.tries.Add(1)
	if !g.open.Load() {
		return false, fmt.Errorf("%w: schema not current", cards.ErrUnavailable)
	}
	return g.Store.AddLearned(ctx, k, phrases...)
}

func TestImportLearnedWaitsForTheStore(t *testing.T) {
	ctx := context.Background()
	k := cards.Key{Tenant: "acme", Server: "cal", Name: "update_event"}
	g := &gatedStore{Store: openStore(t, cards.Card{Tenant: "acme", Server: "cal", Name: "update_event", Summary: "Move an event."})}
	dir := t.TempDir()
	path := filepath.Join(dir, "learned.jsonl")
	legacyLog(t, path, learnedLine{k, "move my meeting"})
	r, err := New(ctx, Config{Path: filepath.Join(dir, "feedback.jsonl"), LearnedPath: path, Store: g, Hash: func(s string) string { return s }})
	if err != nil {
		t.Fatalf("New with an unavailable store: %v (it should retry in the background)", err)
	}
	defer r.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("learned.jsonl must stay while the store is unavailable: %v", err)
	}
	g.open.Store(true)
	wctx, cancel := context.WithTimeout(ctx, 10*ImportRetry)
	defer cancel()
	if err := r.WaitImported(wctx); err != nil {
		t.Fatalf("import not done after the store opened: %v", err)
	}
	if got, _ := g.Learned(ctx, []cards.Key{k}); !slices.Equal(got[k], []string{"move my meeting"}) {
		t.Errorf("learned %q", got)
	}
	if _, err := os.Stat(path + ".imported"); err != nil {
		t.Errorf("not renamed: %v", err)
	}
	if g.tries.Load() < 2 {
		t.Errorf("%d tries; want a retry after the first failure", g.tries.Load())
	}
}

// Close while the store is still unavailable stops the retry and keeps the
// file for the next start.
func TestImportLearnedCloseKeepsTheFile(t *testing.T) {
	k := cards.Key{Tenant: "acme", Server: "cal", Name: "update_event"}
	g := &gatedStore{Store: openStore(t)}
	dir := t.TempDir()
	path := filepath.Join(dir, "learned.jsonl")
	legacyLog(t, path, learnedLine{k, "move my meeting"})
	r, err := New(context.Background(), Config{Path: filepath.Join(dir, "feedback.jsonl"), LearnedPath: path, Store: g, Hash: func(s string) string { return s }})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { r.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not stop the pending import")
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("learned.jsonl gone without an import: %v", err)
	}
}
