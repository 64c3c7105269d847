package eval

import (
	"context"
	"fmt"
	"slices"
	"testing"
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
	w := NewWarm(NewInProcess(nil), train)
	if warm := recall(w); warm != 1 || w.Learned != 1 {
		t.Errorf("warm recall@1 %v with %d learned phrasings; want 1 and 1", warm, w.Learned)
	}
	bad := NewWarm(NewInProcess(nil), []Query{{ID: "x", Query: "q", Expected: []string{"nope/none"}}})
	defer bad.Close()
	if _, _, err := Run(context.Background(), &test, bad, Options{}); err == nil {
		t.Error("a training query naming an unknown tool was accepted")
	}
}
