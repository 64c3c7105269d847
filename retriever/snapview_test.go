package retriever_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/synth"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/retriever"
)

// readsCountingStore counts every read of cards, phrasings, co-usage
// tables, vectors and server entries a retriever makes (reads), and the
// vectors among them (embeddings).
type readsCountingStore struct {
	cards.Store
	reads, embeddings atomic.Int64
}

func (s *readsCountingStore) Get(ctx context.Context, k cards.Key) (cards.Card, error) {
	s.reads.Add(1)
	return s.Store.Get(ctx, k)
}

func (s *readsCountingStore) List(ctx context.Context, q cards.ListQuery) (cards.ListPage, error) {
	s.reads.Add(1)
	return s.Store.List(ctx, q)
}

func (s *readsCountingStore) Learned(ctx context.Context, keys []cards.Key) (map[cards.Key][]string, error) {
	s.reads.Add(int64(len(keys)))
	return s.Store.Learned(ctx, keys)
}

func (s *readsCountingStore) Companions(ctx context.Context, keys []cards.Key) (map[cards.Key]cards.Companions, error) {
	s.reads.Add(int64(len(keys)))
	return s.Store.Companions(ctx, keys)
}

func (s *readsCountingStore) Embeddings(ctx context.Context, model string, keys []cards.Key) (map[cards.Key]cards.Embedding, error) {
	s.reads.Add(int64(len(keys)))
	s.embeddings.Add(int64(len(keys)))
	return s.Store.Embeddings(ctx, model, keys)
}

func (s *readsCountingStore) GetServer(ctx context.Context, tenant, name string) (cards.ServerInfo, error) {
	s.reads.Add(1)
	return s.Store.GetServer(ctx, tenant, name)
}

func (s *readsCountingStore) Servers(ctx context.Context, tenant string) ([]cards.ServerInfo, error) {
	s.reads.Add(1)
	return s.Store.Servers(ctx, tenant)
}

// exactAnswers is every answer of a retriever to the synthetic queries, for
// an admin and a restricted caller, to the bit, without the companion step
// (whose weights decay with the time a view read them: ViewState compares
// the tables themselves).
func exactAnswers(t *testing.T, r *retriever.Retriever) string {
	t.Helper()
	var b strings.Builder
	for _, c := range []retriever.Caller{{Tenant: acme, Subject: "admin", Scopes: []string{"*"}}, {Tenant: acme, Subject: "agent", Scopes: synth.RestrictedScopes}} {
		for _, q := range synth.Queries(20, 4) {
			res, err := r.Discover(context.Background(), retriever.Request{Caller: c, Query: q, TopK: 10, NoCompanions: true})
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s %q %d %v %v:", c.Subject, q, res.CandidateCount, res.LowConfidence, res.Abstained)
			for _, tl := range res.Tools {
				s := tl.Scores
				fmt.Fprintf(&b, " %s/%s %x %x %x %v %d", tl.Card.Server, tl.Card.Name, math.Float64bits(s.Score), math.Float64bits(s.Lexical), math.Float64bits(s.Semantic), s.Fields, tl.Card.Version)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// view is what a retriever holds and answers, for comparing two of them.
func view(t *testing.T, r *retriever.Retriever) string {
	t.Helper()
	return retriever.ViewState(r) + exactAnswers(t, r)
}

// openLogged builds a retriever with a snapshot at snap, returning what it
// logged.
func openLogged(t *testing.T, st cards.Store, emb embed.Embedder, snap string, opts ...retriever.Option) (*retriever.Retriever, string) {
	t.Helper()
	var logs bytes.Buffer
	r, err := retriever.New(context.Background(), st, emb, slog.New(slog.NewTextHandler(&logs, nil)), append([]retriever.Option{retriever.WithSnapshot(snap)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return r, logs.String()
}

// storeView is the view of a retriever built from the store alone.
func storeView(t *testing.T, st cards.Store, emb embed.Embedder) string {
	t.Helper()
	r, err := retriever.New(context.Background(), st, emb, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	return view(t, r)
}

// TestSnapshotSeesEveryWrite: a current snapshot is the whole view — a
// restart from it reads nothing from the store and holds and answers
// exactly what a view built from the store does. Then every kind of store
// write the view depends on, made after the snapshot was written (as after
// a crash: nothing told the snapshot), makes it stale, and the restart
// holds the write.
func TestSnapshotSeesEveryWrite(t *testing.T) {
	ctx := context.Background()
	emb := embed.MustBuiltin()
	changed := func(c cards.Card, f func(*cards.Card)) cards.Card {
		c = c.Clone()
		c.Version = 0
		f(&c)
		return c
	}
	for _, tc := range []struct {
		name  string
		write func(st cards.Store, cs []cards.Card) error
	}{
		{"card replaced", func(st cards.Store, cs []cards.Card) error {
			_, err := st.Put(ctx, []cards.Card{changed(cs[1], func(c *cards.Card) { c.Summary = "Replaced after the snapshot: sends invoices." })})
			return err
		}},
		{"card created", func(st cards.Store, cs []cards.Card) error {
			_, err := st.Put(ctx, synth.Catalogue(121, 6, acme)[120:])
			return err
		}},
		{"card deleted", func(st cards.Store, cs []cards.Card) error { return st.Delete(ctx, cs[2].Key(), 0) }},
		{"card deprecated", func(st cards.Store, cs []cards.Card) error {
			_, err := st.Put(ctx, []cards.Card{changed(cs[3], func(c *cards.Card) { c.Tags = append(c.Tags, cards.TagDeprecated) })})
			return err
		}},
		{"card revoked", func(st cards.Store, cs []cards.Card) error {
			_, err := st.Put(ctx, []cards.Card{changed(cs[4], func(c *cards.Card) { c.Status = cards.StatusRevoked })})
			return err
		}},
		{"search examples", func(st cards.Store, cs []cards.Card) error {
			_, err := st.Put(ctx, []cards.Card{changed(cs[5], func(c *cards.Card) { c.SearchExamples = []string{"bill the customer for last month"} })})
			return err
		}},
		{"learned phrasing", func(st cards.Store, cs []cards.Card) error {
			_, err := st.AddLearned(ctx, cs[6].Key(), "a phrasing learned after the snapshot")
			return err
		}},
		{"co-usage", func(st cards.Store, cs []cards.Card) error {
			_, err := st.AddCompanions(ctx, []cards.CoUse{{Tools: []cards.Key{cs[7].Key(), cs[8].Key()}}, {Tools: []cards.Key{cs[7].Key(), cs[8].Key()}}})
			return err
		}},
		{"server entry put", func(st cards.Store, cs []cards.Card) error {
			_, err := st.PutServers(ctx, []cards.ServerInfo{{Tenant: acme, Name: cs[9].Server, Title: "Written after the snapshot"}})
			return err
		}},
		{"server entry deleted", func(st cards.Store, cs []cards.Card) error {
			return st.DeleteServer(ctx, acme, cs[0].Server, 0)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, st, cs := synthStore(t, 120, 6)
			// The snapshot holds every kind of thing the view keeps.
			must(t, errors2(st.AddLearned(ctx, cs[0].Key(), "a phrasing learned before")))
			must(t, errors2(st.AddCompanions(ctx, []cards.CoUse{{Tools: []cards.Key{cs[0].Key(), cs[1].Key()}}, {Tools: []cards.Key{cs[0].Key(), cs[1].Key()}}})))
			must(t, errors2(st.PutServers(ctx, []cards.ServerInfo{{Tenant: acme, Name: cs[0].Server, Title: "Written before"}})))
			_, err := st.Put(ctx, []cards.Card{changed(cs[10], func(c *cards.Card) { c.SearchExamples = []string{"an example written before"} })})
			must(t, err)
			snap := filepath.Join(dir, "retriever.snap")
			r, _ := openLogged(t, st, emb, snap)
			must(t, r.Close())

			counting := &readsCountingStore{Store: st}
			r, logs := openLogged(t, counting, emb, snap)
			if !strings.Contains(logs, "snapshot loaded") || counting.reads.Load() != 0 {
				t.Fatalf("snapshot not used: %d reads from the store; log:\n%s", counting.reads.Load(), logs)
			}
			before := view(t, r)
			if want := storeView(t, st, emb); before != want {
				t.Fatalf("the view loaded from the snapshot differs from the store's:\n%s", firstDiff(before, want))
			}
			must(t, r.Close()) // writes the snapshot again, at the same change

			must(t, tc.write(st, cs))
			r, logs = openLogged(t, st, emb, snap)
			defer r.Close()
			if !strings.Contains(logs, "stale") {
				t.Fatalf("the snapshot was used after a %s; log:\n%s", tc.name, logs)
			}
			after := view(t, r)
			if want := storeView(t, st, emb); after != want {
				t.Fatalf("after a %s, the restarted view differs from the store's:\n%s", tc.name, firstDiff(after, want))
			}
			if after == before {
				t.Fatalf("the %s changed nothing in the view", tc.name)
			}
		})
	}
}

// errors2 keeps the error of a (value, error) pair.
func errors2[T any](_ T, err error) error { return err }

// firstDiff is the first line where two descriptions differ.
func firstDiff(got, want string) string {
	g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := range min(len(g), len(w)) {
		if g[i] != w[i] {
			return fmt.Sprintf("line %d\n got: %s\nwant: %s", i, g[i], w[i])
		}
	}
	return fmt.Sprintf("%d lines, want %d", len(g), len(w))
}

// TestSnapshotRefusedWhenNotTheStores: a snapshot is not used when it is
// another store's that reached the same change sequence by other writes,
// when the view that wrote it was behind its store, or when it is of
// another embedder; the view is then the store's.
func TestSnapshotRefusedWhenNotTheStores(t *testing.T) {
	ctx := context.Background()
	emb := embed.MustBuiltin()

	t.Run("another store at the same sequence", func(t *testing.T) {
		dirA, stA, _ := synthStore(t, 80, 2)
		r, _ := openLogged(t, stA, emb, filepath.Join(dirA, "retriever.snap"))
		must(t, r.Close())
		dirB, stB, _ := synthStore(t, 80, 3) // other cards, the same number of changes
		seqA, err := stA.Seq(ctx)
		must(t, err)
		seqB, err := stB.Seq(ctx)
		must(t, err)
		if seqA != seqB {
			t.Fatalf("sequences %d and %d: the test needs them equal", seqA, seqB)
		}
		good, err := os.ReadFile(filepath.Join(dirA, "retriever.snap"))
		must(t, err)
		snapB := filepath.Join(dirB, "retriever.snap")
		must(t, os.WriteFile(snapB, good, 0o600))
		r, logs := openLogged(t, stB, emb, snapB)
		defer r.Close()
		if !strings.Contains(logs, "is not the one the snapshot saw") {
			t.Fatalf("another store's snapshot was not refused; log:\n%s", logs)
		}
		if got, want := view(t, r), storeView(t, stB, emb); got != want {
			t.Fatalf("the view differs from the store's:\n%s", firstDiff(got, want))
		}
	})

	t.Run("view behind its store at Close", func(t *testing.T) {
		dir, st, cs := synthStore(t, 80, 4)
		snap := filepath.Join(dir, "retriever.snap")
		r, _ := openLogged(t, st, emb, snap)
		must(t, st.Delete(ctx, cs[5].Key(), 0)) // not synced into r
		c := cs[6].Clone()
		c.Version, c.Summary = 0, "Changed while the view was behind."
		put(t, st, c)
		must(t, r.Close())
		r, logs := openLogged(t, st, emb, snap)
		defer r.Close()
		if strings.Contains(logs, "snapshot loaded") {
			t.Fatalf("the snapshot of a view behind its store was used; log:\n%s", logs)
		}
		if got, want := view(t, r), storeView(t, st, emb); got != want {
			t.Fatalf("the view differs from the store's:\n%s", firstDiff(got, want))
		}
	})

	t.Run("another embedder", func(t *testing.T) {
		dir, st, _ := synthStore(t, 80, 5)
		snap := filepath.Join(dir, "retriever.snap")
		r, _ := openLogged(t, st, emb, snap)
		must(t, r.Close())
		other := embed.NewHashed(emb.Dim())
		r, logs := openLogged(t, st, other, snap)
		defer r.Close()
		if !strings.Contains(logs, "snapshot not used") || !strings.Contains(logs, "embedder") {
			t.Fatalf("another embedder's snapshot was not refused; log:\n%s", logs)
		}
		if got, want := view(t, r), storeView(t, st, other); got != want {
			t.Fatalf("the view differs from the store's:\n%s", firstDiff(got, want))
		}
	})
}

// TestSnapshotWithResidency: a snapshot of every tenant, loaded by a view
// that holds only its assigned tenants (Residency), holds exactly what that
// view holds when built from the store, and loads the other tenants on
// demand as it would. Such a view writes no snapshot of its own: one of
// some tenants would not be the store's view for the next start.
func TestSnapshotWithResidency(t *testing.T) {
	ctx := context.Background()
	st, tenants := residencyTenants(t)
	emb := embed.NewHashed(embed.DefaultDim)
	snap := filepath.Join(t.TempDir(), "retriever.snap")
	must(t, errors2(st.PutServers(ctx, []cards.ServerInfo{{Tenant: tenants[0], Name: "srv", Title: "held"}, {Tenant: tenants[3], Name: "srv", Title: "not held"}})))
	r, _ := openLogged(t, st, emb, snap)
	must(t, r.Close())

	assigned := retriever.WithResidency(retriever.Residency{Assigned: func(t string) bool { return t == tenants[0] || t == tenants[1] }})
	fromStore, err := retriever.New(ctx, st, emb, nil, assigned)
	must(t, err)
	defer fromStore.Close()
	loaded, logs := openLogged(t, st, emb, snap, assigned)
	defer loaded.Close()
	if !strings.Contains(logs, "snapshot loaded") {
		t.Fatalf("snapshot not used; log:\n%s", logs)
	}
	if s, _ := loaded.Residency(); s.Tenants != 2 || s.Cards != 180 {
		t.Fatalf("the loaded view holds %+v, want the 2 assigned tenants' 180 cards", s)
	}
	if got, want := retriever.ViewState(loaded), retriever.ViewState(fromStore); got != want {
		t.Fatalf("the loaded view differs from the store's:\n%s", firstDiff(got, want))
	}
	for _, tenant := range []string{tenants[0], tenants[3]} {
		req := retriever.Request{Caller: retriever.Caller{Tenant: tenant, Subject: "s", Scopes: []string{"*"}}, Query: synth.Queries(1, 5)[0]}
		got, err := loaded.Discover(ctx, req)
		must(t, err)
		want, err := fromStore.Discover(ctx, req)
		must(t, err)
		if !reflect.DeepEqual(comparable(got), comparable(want)) {
			t.Fatalf("tenant %s: the loaded view answered\n%+v\nthe store's\n%+v", tenant, comparable(got), comparable(want))
		}
	}
	if got, want := retriever.ViewState(loaded), retriever.ViewState(fromStore); got != want {
		t.Fatalf("after loading a tenant on demand, the views differ:\n%s", firstDiff(got, want))
	}

	// A view of some tenants writes no snapshot: the one of every tenant
	// stays, and a view of every tenant loads it whole.
	must(t, loaded.Close())
	whole, logs := openLogged(t, st, emb, snap)
	defer whole.Close()
	if !strings.Contains(logs, "snapshot loaded") || whole.Len() != 268 {
		t.Fatalf("after a resident view's Close, a whole view holds %d cards; log:\n%s", whole.Len(), logs)
	}
	partial := filepath.Join(t.TempDir(), "retriever.snap")
	r, _ = openLogged(t, st, emb, partial, assigned)
	must(t, r.Close())
	if _, err := os.Stat(partial); !os.IsNotExist(err) {
		t.Fatalf("a view of some tenants wrote a snapshot: %v", err)
	}
}
