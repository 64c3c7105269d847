package retriever_test

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/synth"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/retriever"
)

// answers is every answer of a retriever to the synthetic queries, for an
// admin and a restricted caller, as text: tools, scores to the bit, flags.
func answers(t *testing.T, r *retriever.Retriever) string {
	t.Helper()
	var b strings.Builder
	for _, c := range []retriever.Caller{{Tenant: acme, Subject: "admin", Scopes: []string{"*"}}, {Tenant: acme, Subject: "agent", Scopes: synth.RestrictedScopes}} {
		for _, q := range synth.Queries(25, 3) {
			res, err := r.Discover(context.Background(), retriever.Request{Caller: c, Query: q, TopK: 10})
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s %q %d %v %v:", c.Subject, q, res.CandidateCount, res.LowConfidence, res.Abstained)
			for _, tl := range res.Tools {
				s := tl.Scores
				fmt.Fprintf(&b, " %s/%s %x %x %x %v", tl.Card.Server, tl.Card.Name, math.Float64bits(s.Score), math.Float64bits(s.Lexical), math.Float64bits(s.Semantic), s.Fields)
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// TestSnapshotRestart: a retriever with a snapshot writes it at Close; the
// next one loads it and answers exactly as one built from the store alone,
// without reading a single vector from the store. A snapshot that is stale
// (the store moved on), corrupt, truncated, of other lexical fields or of
// another embedder is not used, and the answers are still exact.
func TestSnapshotRestart(t *testing.T) {
	ctx := context.Background()
	dir, st, cs := synthStore(t, 400, 5)
	if _, err := st.AddLearned(ctx, cs[0].Key(), "phrase learned from use"); err != nil {
		t.Fatal(err)
	}
	emb := embed.MustBuiltin()
	snap := filepath.Join(dir, "retriever.snap")
	reference := func() string { // from the store alone
		t.Helper()
		r, err := retriever.New(ctx, st, emb, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		return answers(t, r)
	}

	// The first start has no snapshot; its Close writes one.
	r, _ := openLogged(t, st, emb, snap)
	want := answers(t, r)
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(snap); err != nil {
		t.Fatalf("no snapshot after Close: %v", err)
	}
	if want != reference() {
		t.Fatal("a retriever with a snapshot path answers differently from one without")
	}

	// Loaded: the same answers, and no vector read from the store, whether
	// the re-rank reads the floats through the mapping (a tenant this
	// small) or from the file; each Close writes the snapshot again.
	for _, opts := range [][]retriever.Option{nil, {retriever.WithFloatMapMax(0)}} {
		counting := &readsCountingStore{Store: st}
		r, logs := openLogged(t, counting, emb, snap, opts...)
		if !strings.Contains(logs, "snapshot loaded") || counting.embeddings.Load() != 0 {
			t.Fatalf("snapshot not used: %d embeddings read from the store; log:\n%s", counting.embeddings.Load(), logs)
		}
		if got := answers(t, r); got != want {
			t.Fatal("answers after loading the snapshot differ")
		}
		if err := r.Close(); err != nil {
			t.Fatal(err)
		}
	}

	good, err := os.ReadFile(snap)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		spoil  func()
		opts   []retriever.Option
		reason string
	}{
		{"corrupt", func() {
			bad := bytes.Clone(good)
			bad[len(bad)/2] ^= 0x40
			must(t, os.WriteFile(snap, bad, 0o600))
		}, nil, "corrupt"},
		{"truncated", func() { must(t, os.WriteFile(snap, good[:len(good)*2/3], 0o600)) }, nil, "corrupt"},
		{"empty", func() { must(t, os.WriteFile(snap, nil, 0o600)) }, nil, "corrupt"},
		{"other fields", func() { must(t, os.WriteFile(snap, good, 0o600)) },
			[]retriever.Option{retriever.WithLexicalWeights(retriever.LexicalWeights{Name: 1, Summary: 1})}, "lexical fields"},
		{"stale", func() {
			must(t, os.WriteFile(snap, good, 0o600))
			changed := cs[1]
			changed.Summary = "a summary changed after the snapshot was written"
			put(t, st, changed)
			if err := st.Delete(ctx, cs[2].Key(), 0); err != nil {
				t.Fatal(err)
			}
		}, nil, "stale"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.spoil()
			want := reference()
			if len(tc.opts) > 0 {
				ref, err := retriever.New(ctx, st, emb, nil, tc.opts...)
				if err != nil {
					t.Fatal(err)
				}
				want = answers(t, ref)
				ref.Close()
			}
			r, logs := openLogged(t, st, emb, snap, tc.opts...)
			defer r.Close()
			if !strings.Contains(logs, "snapshot not used") || !strings.Contains(logs, tc.reason) {
				t.Fatalf("the %s snapshot was not refused for %q; log:\n%s", tc.name, tc.reason, logs)
			}
			if got := answers(t, r); got != want {
				t.Fatalf("answers with a %s snapshot differ from the store's", tc.name)
			}
		})
	}
}

// TestSnapshotThenChanges: a view loaded from a snapshot (its floats
// mapped from the file, and read through the mapping or from the file)
// takes later changes — replaced, deleted and new cards, in a tenant of the
// snapshot — and answers as a view built from the store; its own Close
// writes the next snapshot over the mapped one.
func TestSnapshotThenChanges(t *testing.T) {
	ctx := context.Background()
	dir, st, cs := synthStore(t, 600, 8)
	emb := embed.MustBuiltin()
	snap := retriever.WithSnapshot(filepath.Join(dir, "retriever.snap"))
	r, err := retriever.New(ctx, st, emb, nil, snap)
	if err != nil {
		t.Fatal(err)
	}
	must(t, r.Close())
	for round := range 4 {
		mapMax := int64(retriever.FloatMapMax)
		if round%2 == 1 { // read the floats from the file
			mapMax = 0
		}
		r, err := retriever.New(ctx, st, emb, nil, snap, retriever.WithFloatMapMax(mapMax))
		if err != nil {
			t.Fatal(err)
		}
		changed := cs[10+round]
		changed.Summary = fmt.Sprintf("replaced after the snapshot, round %d", round)
		fresh := synth.Catalogue(700+round, 9, acme)[600+round:] // cards the catalogue did not have
		put(t, st, append([]cards.Card{changed}, fresh...)...)
		must(t, st.Delete(ctx, cs[20+round].Key(), 0))
		must(t, r.Sync(ctx))
		ref, err := retriever.New(ctx, st, emb, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, want := answers(t, r), answers(t, ref); got != want {
			t.Fatalf("round %d: answers after changes to a loaded snapshot differ from the store's", round)
		}
		must(t, ref.Close())
		must(t, r.Close())
		must(t, r.Close()) // a second Close writes nothing
	}
}

// synthStore is an embedded store in a fresh directory holding n synthetic
// cards of tenant acme (closed at the end of the test).
func synthStore(t *testing.T, n int, seed int64) (string, cards.Store, []cards.Card) {
	t.Helper()
	dir := t.TempDir()
	st := openStore(t, dir)
	t.Cleanup(func() { _ = st.Close() })
	cs := synth.Catalogue(n, seed, acme)
	put(t, st, cs...)
	return dir, st, cs
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestSnapshotFloatsStayOffResidentMemory: after a restart from a snapshot
// and answers whose quantised scans re-rank rows of it, the pages of the
// snapshot's float vectors resident in the process are at most one folio
// (the one they share with the quantisations the load reads; 2 MiB at
// most), however many rows were re-ranked: the re-rank reads the rows it
// scores from the file (a fault on the mapping would map the whole
// page-cache folio around the row). The codes every scan reads are resident
// (which shows the count sees mapped pages). A row written since the load
// (a card replaced) is a private copy in the mapping: two more pages at
// most. Linux only, where the page table is readable (/proc/self/pagemap);
// mincore would not do, as it reports the page cache, which holds the whole
// file after the load's checksum read.
func TestSnapshotFloatsStayOffResidentMemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads the page table from /proc/self/pagemap, which only Linux has")
	}
	ctx := context.Background()
	emb := embed.MustBuiltin()
	// A tenant whose floats are more than FloatMapMax bytes: the re-rank
	// reads them from the file, and no scan of it is exact for being
	// cheaper (exactCheaper).
	dir, st, cs := synthStore(t, int(retriever.FloatMapMax/(4*int64(emb.Dim())))+500, 4)
	snap := filepath.Join(dir, "retriever.snap")
	r, _ := openLogged(t, st, emb, snap)
	must(t, r.Close())
	r, logs := openLogged(t, st, emb, snap)
	defer r.Close()
	if !strings.Contains(logs, "snapshot loaded") {
		t.Fatalf("snapshot not loaded; log:\n%s", logs)
	}
	resident := func(written int) {
		t.Helper()
		kept := retriever.KeptRows(r)
		answers(t, r)
		floats, codes, err := retriever.ResidentPages(r)
		if err != nil {
			t.Fatal(err)
		}
		if retriever.KeptRows(r) == kept {
			t.Fatal("the answers re-ranked no row")
		}
		if codes == 0 {
			t.Fatal("no page of the codes the scans read is resident: the count does not see mapped pages")
		}
		t.Logf("%d of the floats' pages, %d of the codes' are resident after answers re-ranked %d rows", floats, codes, retriever.KeptRows(r))
		if folio := 2 << 20 / os.Getpagesize(); floats > folio+2*written {
			t.Errorf("%d pages of the mapped floats are resident after answers re-ranked %d rows, with %d rows written since the load; want %d at most", floats, retriever.KeptRows(r), written, folio+2*written)
		}
	}
	resident(0)
	changed := cs[7]
	changed.Summary = "a summary replaced after the restart"
	put(t, st, changed)
	must(t, r.Sync(ctx))
	resident(1)
}
