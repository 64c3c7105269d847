package embedded_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/cards/storetest"
)

func open(t *testing.T, dir string, opts ...embedded.Option) *embedded.Store {
	t.Helper()
	s, err := embedded.Open(dir, opts...)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	return s
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) cards.Store {
		s := open(t, t.TempDir())
		t.Cleanup(func() { _ = s.Close() })
		return s
	})
}

func TestOpenCreatesDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b", "data")
	s := open(t, dir)
	defer s.Close()
	if _, err := os.Stat(filepath.Join(dir, embedded.FileName)); err != nil {
		t.Fatalf("database file: %v", err)
	}
}

func TestPersistsAcrossReopen(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := open(t, dir)
	c := cards.Card{
		Tenant: "acme", Server: "billing", Name: "refund", Summary: "Refund a payment",
		InputSchema: []byte(`{"type":"object","properties":{"amount":{"maximum":1.0e6,"description":"<a>&"}}}`),
	}
	if _, err := s.Put(ctx, []cards.Card{c, {Tenant: "acme", Server: "billing", Name: "gone", Summary: "x"}}); err != nil {
		t.Fatal(err)
	}
	c.Summary = "Refund a payment, v2"
	if _, err := s.Put(ctx, []cards.Card{c}); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, cards.Key{Tenant: "acme", Server: "billing", Name: "gone"}, 0); err != nil {
		t.Fatal(err)
	}
	emb := cards.Embedding{Key: c.Key(), Model: "m", TextHash: "h", Vector: []float32{0.5, -2}}
	if err := s.PutEmbeddings(ctx, []cards.Embedding{emb}); err != nil {
		t.Fatal(err)
	}
	before, err := s.Get(ctx, c.Key())
	if err != nil {
		t.Fatal(err)
	}
	seqBefore, _ := s.Seq(ctx)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	s = open(t, dir)
	defer s.Close()
	after, err := s.Get(ctx, c.Key())
	if err != nil {
		t.Fatalf("after reopen: %v", err)
	}
	if after.Version != 2 || after.Summary != before.Summary || string(after.InputSchema) != string(before.InputSchema) ||
		!after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Errorf("after reopen = %+v, want %+v", after, before)
	}
	if _, err := s.Get(ctx, cards.Key{Tenant: "acme", Server: "billing", Name: "gone"}); !errors.Is(err, cards.ErrNotFound) {
		t.Errorf("deleted card after reopen: %v", err)
	}
	if n, _ := s.Seq(ctx); n != seqBefore {
		t.Errorf("Seq after reopen = %d, want %d", n, seqBefore)
	}
	ch, err := s.Changes(ctx, 0, 0)
	if err != nil || len(ch) != 2 || !ch[1].Deleted {
		t.Errorf("Changes after reopen = %+v, %v", ch, err)
	}
	m, err := s.Embeddings(ctx, "m", []cards.Key{c.Key()})
	if err != nil || len(m[c.Key()].Vector) != 2 || m[c.Key()].Vector[1] != -2 {
		t.Errorf("Embeddings after reopen = %+v, %v", m, err)
	}
	// The sequence continues where it was.
	c.Summary = "v3"
	if _, err := s.Put(ctx, []cards.Card{c}); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.Seq(ctx); n != seqBefore+1 {
		t.Errorf("Seq after a write = %d, want %d", n, seqBefore+1)
	}
}

func TestSecondOpenFailsClearly(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	defer s.Close()

	start := time.Now()
	s2, err := embedded.Open(dir, embedded.WithLockTimeout(300*time.Millisecond))
	elapsed := time.Since(start)
	if err == nil {
		s2.Close()
		t.Fatal("a second Open of the same directory succeeded")
	}
	if !errors.Is(err, embedded.ErrLocked) || !strings.Contains(err.Error(), "data directory is in use by another cardex process") {
		t.Errorf("error = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), dir) {
		t.Errorf("error %q should name the directory", err)
	}
	if elapsed > 2*time.Second {
		t.Errorf("second Open took %s with a 300ms timeout", elapsed)
	}

	// The default timeout applies too, and the lock is released on Close.
	start = time.Now()
	if _, err := embedded.Open(dir); !errors.Is(err, embedded.ErrLocked) {
		t.Errorf("default-timeout second Open = %v", err)
	} else if d := time.Since(start); d < embedded.DefaultLockTimeout/2 || d > embedded.DefaultLockTimeout+2*time.Second {
		t.Errorf("default-timeout second Open took %s", d)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s3 := open(t, dir)
	s3.Close()
}

// TestSecondProcessFailsClearly opens the directory from another process
// (this test binary, re-executed) while this one holds it.
func TestSecondProcessFailsClearly(t *testing.T) {
	if dir := os.Getenv("CARDEX_EMBEDDED_CHILD_DIR"); dir != "" {
		s, err := embedded.Open(dir, embedded.WithLockTimeout(300*time.Millisecond))
		if err != nil {
			fmt.Println("child:", err)
			os.Exit(3)
		}
		s.Close()
		os.Exit(0)
	}
	dir := t.TempDir()
	s := open(t, dir)
	defer s.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSecondProcessFailsClearly$")
	cmd.Env = append(os.Environ(), "CARDEX_EMBEDDED_CHILD_DIR="+dir)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 3 {
		t.Fatalf("child: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "data directory is in use by another cardex process") {
		t.Errorf("child output %q lacks the clear message", out)
	}
}

func TestClosedStoreIsUnavailable(t *testing.T) {
	s := open(t, t.TempDir())
	s.Close()
	_, err := s.Get(context.Background(), cards.Key{Tenant: "a", Server: "b", Name: "c"})
	if !errors.Is(err, cards.ErrUnavailable) {
		t.Errorf("Get on a closed store = %v, want ErrUnavailable", err)
	}
	if _, err := s.Put(context.Background(), []cards.Card{{Tenant: "a", Server: "b", Name: "c", Summary: "x"}}); !errors.Is(err, cards.ErrUnavailable) {
		t.Errorf("Put on a closed store = %v, want ErrUnavailable", err)
	}
}

func TestConcurrentPuts(t *testing.T) {
	ctx := context.Background()
	s := open(t, t.TempDir())
	defer s.Close()
	const workers, perWorker = 8, 25
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				c := cards.Card{Tenant: "acme", Server: fmt.Sprintf("w%d", w), Name: fmt.Sprintf("t%03d", i), Summary: "tool"}
				if _, err := s.Put(ctx, []cards.Card{c}); err != nil {
					errs <- err
					return
				}
				// Readers run alongside the writers.
				if _, err := s.List(ctx, cards.ListQuery{Tenant: "acme", Server: c.Server}); err != nil {
					errs <- err
					return
				}
				// Everyone also rewrites one shared card.
				shared := cards.Card{Tenant: "acme", Server: "shared", Name: "x", Summary: fmt.Sprintf("w%d i%d", w, i)}
				if _, err := s.Put(ctx, []cards.Card{shared}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var n int
	for q := (cards.ListQuery{Tenant: "acme", Limit: 100}); ; {
		p, err := s.List(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		n += len(p.Cards)
		if p.NextCursor == "" {
			break
		}
		q.Cursor = p.NextCursor
	}
	if want := workers*perWorker + 1; n != want {
		t.Errorf("%d cards, want %d", n, want)
	}
	shared, err := s.Get(ctx, cards.Key{Tenant: "acme", Server: "shared", Name: "x"})
	if err != nil {
		t.Fatal(err)
	}
	// Every write of the shared card has a distinct summary, so each bumped it.
	if shared.Version != workers*perWorker {
		t.Errorf("shared card version %d, want %d", shared.Version, workers*perWorker)
	}
	ch, err := s.Changes(ctx, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ch) != workers*perWorker+1 {
		t.Errorf("%d changes, want one per key (%d)", len(ch), workers*perWorker+1)
	}
	if seq, _ := s.Seq(ctx); seq != uint64(2*workers*perWorker) {
		t.Errorf("Seq = %d, want %d", seq, 2*workers*perWorker)
	}
}
