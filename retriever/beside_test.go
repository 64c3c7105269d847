package retriever_test

import (
	"context"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed0cff8200/cardex/cards"
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
			t0 := time.Now()
			res, err := r.Discover(ctx, req)
			took := time.Since(t0)
			if err != nil {
				t.Fatal(err)
			}
			if res.CandidateCount >= retriever.BesideMin && (res.Timings.Semantic <= 0 || res.Timings.Lexical <= 0) {
				t.Errorf("GOMAXPROCS %d, %q: legs' times %+v", procs, req.Query, res.Timings)
			}
			// The semantic leg's time is its scan's, counted once: not
			// the scan and again the wait for it.
			if res.Timings.Semantic > took {
				t.Errorf("GOMAXPROCS %d, %q: semantic leg %v, longer than the whole discovery (%v)", procs, req.Query, res.Timings.Semantic, took)
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

// remoteVectors is a vector index that is not the retriever's in-memory
// one (as PostgreSQL's is not): the same vectors and answers, or, when
// down, the error of a backend that went away (a test double: the
// retriever is under test).
type remoteVectors struct {
	m    *retriever.MemoryVectors
	down atomic.Bool
}

func (v *remoteVectors) Upsert(_ context.Context, id, tenant string, vec []float32) error {
	return v.m.Upsert(id, tenant, vec)
}
func (v *remoteVectors) Delete(_ context.Context, id string) { v.m.Delete(id) }
func (v *remoteVectors) Search(_ context.Context, q []float32, f retriever.Filter, k int) ([]retriever.Hit, error) {
	if v.down.Load() {
		return nil, fmt.Errorf("vector backend: %w", cards.ErrUnavailable)
	}
	return v.m.Search(q, f, k)
}

// TestRemoteVectorsBeside: another vector index's searches run on a second
// goroutine, one per list, while the lexical legs are searched; the answers
// are the in-memory index's, a list narrowed by +word included, and a
// backend that went away still gives the lexical answer, flagged degraded.
func TestRemoteVectorsBeside(t *testing.T) {
	ctx := context.Background()
	st := newStore(t,
		card("ship", "track_parcel", "Track a parcel by its tracking number."),
		card("ship", "create_label", "Create a shipping label for a parcel.", "ship:write"),
		card("crm", "get_contact", "Read one contact record."),
		card("crm", "update_contact", "Update a contact's email or phone.", "crm:write"),
		card("billing", "issue_refund", "Refund a paid invoice.", "billing:admin"),
		card("billing", "list_invoices", "List a customer's invoices."))
	remote := &remoteVectors{m: retriever.NewMemoryVectors(embed.DefaultDim)}
	local, far := newRetriever(t, st, nil), newRetrieverWith(t, st, retriever.WithVectors(remote))
	for _, req := range []retriever.Request{
		{Caller: admin, Query: "where is my parcel"},
		{Caller: admin, Query: "refund the customer", Intents: []string{"find the invoice", "change the contact's email"}},
		{Caller: caller("crm:write"), Intents: []string{"print a shipping label", "update a phone number"}},
		{Caller: admin, Query: "+contact read the record", Intents: []string{"track a parcel"}},
	} {
		want, err := local.Discover(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		got, err := far.Discover(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if len(want.Tools) == 0 || got.Timings.Semantic <= 0 {
			t.Errorf("%q %q: %d tools, semantic time %v", req.Query, req.Intents, len(want.Tools), got.Timings.Semantic)
		}
		want.Timings, got.Timings = retriever.Timings{}, retriever.Timings{}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q %q: another vector index answers\n%+v\nthe in-memory one\n%+v", req.Query, req.Intents, got, want)
		}
	}
	remote.down.Store(true)
	res, err := far.Discover(ctx, retriever.Request{Caller: admin, Query: "track my parcel", Intents: []string{"read a contact"}})
	if err != nil || !res.Degraded || len(res.Tools) == 0 || res.Tools[0].Card.Name != "track_parcel" {
		t.Fatalf("vector backend down: %v, degraded %v, tools %+v; want track_parcel from the lexical leg", err, res.Degraded, res.Tools)
	}
}
