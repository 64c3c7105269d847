package retriever_test

import (
	"context"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/retriever"
)

// TestLegsBeside: from BesideMin candidates on, with more than one core, a
// request's legs run on two goroutines (the semantic scan and lexical legs
// from the last list back on one, lexical legs from the first on on the
// other); the answers are the ones the legs give one after the other (one
// core), for a query alone, a query with intents, intents alone and a list
// narrowed by +word, and the legs' times are still reported. Run with -race, it also checks the two goroutines share
// nothing unguarded.
func TestLegsBeside(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a catalogue of BesideMin cards")
	}
	ctx := context.Background()
	st, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	putBatches(t, st, synthCatalogue(retriever.BesideMin+100, 1, benchTenant))
	r, err := retriever.New(ctx, st, embed.MustBuiltin(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	qs := synthQueries(12, 5)
	var reqs []retriever.Request
	for i := 0; i+3 < len(qs); i += 4 {
		admin := benchCallers()[0]
		reqs = append(reqs,
			retriever.Request{Caller: admin, Query: qs[i], TopK: 10},
			retriever.Request{Caller: admin, Query: qs[i], Intents: qs[i+1 : i+4], TopK: 10},
			retriever.Request{Caller: admin, Intents: qs[i+1 : i+3], TopK: 5},
			retriever.Request{Caller: admin, Query: "+" + strings.Fields(qs[i+1])[0] + " " + qs[i], Intents: qs[i+2 : i+3], TopK: 5},
			retriever.Request{Caller: benchCallers()[1], Query: qs[i], TopK: 5}, // under BesideMin
		)
	}
	answer := func(procs int) []retriever.Result {
		defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(procs))
		out := make([]retriever.Result, len(reqs))
		for i, req := range reqs {
			res, err := r.Discover(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if res.CandidateCount >= retriever.BesideMin && (res.Timings.Semantic <= 0 || res.Timings.Lexical <= 0) {
				t.Errorf("GOMAXPROCS %d, %q: legs' times %+v", procs, req.Query, res.Timings)
			}
			res.Timings = retriever.Timings{}
			out[i] = res
		}
		return out
	}
	one, two := answer(1), answer(2)
	for i := range reqs {
		if len(two[i].Tools) == 0 {
			t.Errorf("request %d (%q, %d intents): no tools", i, reqs[i].Query, len(reqs[i].Intents))
		}
		if !reflect.DeepEqual(one[i], two[i]) {
			t.Errorf("request %d (%q, %d intents): the legs side by side answer\n%+v\none after the other\n%+v", i, reqs[i].Query, len(reqs[i].Intents), two[i], one[i])
		}
	}
}
