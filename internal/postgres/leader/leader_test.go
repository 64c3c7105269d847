package leader_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/seed0cff8200/cardex/internal/postgres/leader"
	"github.com/seed0cff8200/cardex/internal/testkit/pgtest"
)

// TestOneLeader runs on the native PostgreSQL: PGlite shares one session
// among all connections, so an advisory lock there never excludes anyone.
func TestOneLeader(t *testing.T) {
	url := pgtest.NativeURL(t)
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	name := "enrichment " + pgtest.NewSchemaName()
	a := leader.New(cfg, name, 100*time.Millisecond)
	b := leader.New(cfg, name, 100*time.Millisecond)

	leadA, releaseA, ok, err := a.TryLead(ctx)
	if err != nil || !ok {
		t.Fatalf("A: %v, %t", err, ok)
	}
	if _, _, ok, err := b.TryLead(ctx); err != nil || ok {
		t.Fatalf("B leads while A does: %v, %t", err, ok)
	}
	// Another name is another lock.
	if _, rel, ok, err := leader.New(cfg, name+" other", 0).TryLead(ctx); err != nil || !ok {
		t.Fatalf("another lock: %v, %t", err, ok)
	} else {
		rel()
	}
	releaseA()
	if leadA.Err() == nil {
		t.Error("A's lead context lives after its release")
	}
	leadB, releaseB, ok, err := b.TryLead(ctx)
	if err != nil || !ok {
		t.Fatalf("B after A's release: %v, %t", err, ok)
	}
	defer releaseB()

	// B's session dies (a crash, a partition, an operator): B knows it has
	// lost the lead, and A may take it.
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	var n int
	if err := admin.QueryRow(ctx, `SELECT count(pg_terminate_backend(pid)) FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND ((classid::bigint << 32) | objid::bigint) = $1`, b.Key()).Scan(&n); err != nil || n != 1 {
		t.Fatalf("terminate B's session: %v, %d sessions", err, n)
	}
	select {
	case <-leadB.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("B did not notice that its session ended")
	}
	_, releaseA, ok, err = a.TryLead(ctx)
	if err != nil || !ok {
		t.Fatalf("A after B's session ended: %v, %t", err, ok)
	}
	releaseA()
}
