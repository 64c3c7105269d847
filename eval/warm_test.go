package eval

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
)

func TestSplitQueries(t *testing.T) {
	var qs []Query
	for i := range 200 {
		qs = append(qs, Query{ID: fmt.Sprintf("q%d", i)})
	}
	train, test := SplitQueries(qs)
	if len(train)+len(test) != len(qs) || len(train) < 70 || len(test) < 70 {
		t.Fatalf("split %d/%d of %d: want two halves covering everything", len(train), len(test), len(qs))
	}
	ids := func(qs []Query) []string {
		var out []string
		for _, q := range qs {
			out = append(out, q.ID)
		}
		return out
	}
	for _, q := range train {
		if slices.Contains(ids(test), q.ID) {
			t.Fatalf("%s is in both halves", q.ID)
		}
	}
	// Fixed by id, not by order.
	rev := slices.Clone(qs)
	slices.Reverse(rev)
	train2, _ := SplitQueries(rev)
	a, b := ids(train), ids(train2)
	slices.Sort(a)
	slices.Sort(b)
	if !slices.Equal(a, b) {
		t.Error("the split depends on the order of the queries")
	}
}

// Replaying a training query's outcome makes the test query that repeats its
// odd wording find the tool: the warm backend really learns.
func TestWarmReplaysOutcomes(t *testing.T) {
	d, err := Load("testdata/tiny")
	if err != nil {
		t.Fatal(err)
	}
	train := []Query{{ID: "t1", Query: "zzqx plorb", Expected: []string{"github/search"}}}
	test := *d
	test.Queries = []Query{{ID: "q5", Query: "zzqx plorb", Expected: []string{"github/search"}}}
	recall := func(b Backend) float64 {
		defer b.Close()
		rep, _, err := Run(context.Background(), &test, b, Options{Workers: 1})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range rep.Subsets[0].Modes {
			if m.Mode == "hybrid" {
				return m.Recall1
			}
		}
		t.Fatal("no hybrid row")
		return 0
	}
	if cold := recall(NewInProcess(nil)); cold != 0 {
		t.Fatalf("precondition: cold recall@1 %v for a query with no words in common", cold)
	}
	w := NewWarm(NewInProcess(nil), QueryLessons(train))
	if warm := recall(w); warm != 1 || w.Learned != 1 {
		t.Errorf("warm recall@1 %v with %d learned phrasings; want 1 and 1", warm, w.Learned)
	}
	bad := NewWarm(NewInProcess(nil), QueryLessons([]Query{{ID: "x", Query: "q", Expected: []string{"nope/none"}}}))
	defer bad.Close()
	if _, _, err := Run(context.Background(), &test, bad, Options{}); err == nil {
		t.Error("a training query naming an unknown tool was accepted")
	}
}

// A training query of two needs is one session of co-usage; one of a
// single need is none. Turned off, nothing is recorded.
func TestWarmReplaysCoUsage(t *testing.T) {
	d, err := Load("testdata/tiny")
	if err != nil {
		t.Fatal(err)
	}
	train := []Query{
		{ID: "t1", Query: "alerts then a file", Expected: []string{"weather/get_alerts", "filesystem/write_file", "weather/get_alerts"}},
		{ID: "t2", Query: "a quote", Expected: []string{"stocks/get_quote"}},
	}
	if got := SessionCoUses(nil); got != nil {
		t.Errorf("SessionCoUses(nil) = %v", got)
	}
	for _, off := range []bool{false, true} {
		w := NewWarm(NewInProcess(nil), QueryLessons(train))
		w.NoCompanions = off
		test := *d
		if _, _, err := Run(context.Background(), &test, w, Options{Workers: 1}); err != nil {
			t.Fatal(err)
		}
		want := 1
		if off {
			want = 0
		}
		if w.CoUses != want || w.Learned != 3 {
			t.Errorf("companions off %v: %d sessions, %d phrasings; want %d and 3", off, w.CoUses, w.Learned, want)
		}
		if !off {
			tab, _ := w.ret.CompanionsOf(cards.Key{Tenant: "eval-tiny", Server: "weather", Name: "get_alerts"})
			if len(tab.Tools) != 1 || tab.Tools[0].Name != "write_file" || tab.Tools[0].After < 0.99 {
				t.Errorf("get_alerts' co-usage = %+v, want write_file after it once", tab)
			}
		}
		w.Close()
	}
}
