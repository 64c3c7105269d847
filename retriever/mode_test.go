package retriever

import (
	"context"
	"errors"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/embed"
)

// TestDiscoverModes: the single-leg modes rank by their own leg alone (the
// order of LexicalIndex.Search or of the vector scan), hybrid fuses both,
// and an unknown mode is invalid.
func TestDiscoverModes(t *testing.T) {
	ctx := context.Background()
	store, err := embedded.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cs := []cards.Card{
		{Tenant: "t", Server: "weather", Name: "get_forecast", Summary: "Weather forecast for a city: rain, sun, wind."},
		{Tenant: "t", Server: "weather", Name: "get_alerts", Summary: "Severe weather alerts for a region."},
		{Tenant: "t", Server: "files", Name: "write_file", Summary: "Write text into a file."},
		{Tenant: "t", Server: "mail", Name: "send_mail", Summary: "Send an e-mail message about the forecast."},
		{Tenant: "t", Server: "maps", Name: "forecasting_zone", Summary: "Zones used for forecasting."},
	}
	if _, err := store.Put(ctx, cs); err != nil {
		t.Fatal(err)
	}
	emb := embed.NewHashed(0)
	r, err := New(ctx, store, emb, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	caller := Caller{Tenant: "t"}
	query := "weather forecast"
	ids := func(res Result) []string {
		out := make([]string, len(res.Tools))
		for i, s := range res.Tools {
			out[i] = DocID(s.Card.Key())
		}
		return out
	}

	lexHits, err := r.lex.Search(query, Filter{Tenant: "t"}, LegDepth)
	if err != nil {
		t.Fatal(err)
	}
	qv, _ := emb.Embed(ctx, []string{query})
	semHits, err := r.vec.Search(ctx, qv[0], Filter{Tenant: "t"}, LegDepth)
	if err != nil {
		t.Fatal(err)
	}
	var semPos []Hit
	for _, h := range semHits {
		if h.Score > 0 {
			semPos = append(semPos, h)
		}
	}
	for _, tc := range []struct {
		mode   Mode
		fusion string
		leg    []Hit
	}{
		{ModeLexical, "", lexHits},
		{ModeSemantic, "", semPos},
		{ModeLexical, FusionRelative, lexHits}, // a single leg ignores relative fusion
		{ModeSemantic, FusionRelative, semPos},
	} {
		res, err := r.Discover(ctx, Request{Caller: caller, Query: query, TopK: MaxTopK, Mode: tc.mode, Fusion: tc.fusion, Alpha: 1, AlphaSet: true})
		if err != nil {
			t.Fatal(err)
		}
		got := ids(res)
		if len(got) != len(tc.leg) {
			t.Fatalf("%s/%s: %d tools, leg has %d", tc.mode, tc.fusion, len(got), len(tc.leg))
		}
		for i, h := range tc.leg {
			if got[i] != h.ID {
				t.Errorf("%s/%s: #%d is %q, leg has %q", tc.mode, tc.fusion, i+1, got[i], h.ID)
			}
		}
		for _, s := range res.Tools {
			if (tc.mode == ModeLexical && s.Scores.SemanticRank != 0) || (tc.mode == ModeSemantic && s.Scores.LexicalRank != 0) {
				t.Errorf("%s: %s carries the other leg's rank: %+v", tc.mode, s.Card.Name, s.Scores)
			}
		}
	}

	def, err := r.Discover(ctx, Request{Caller: caller, Query: query, TopK: MaxTopK})
	if err != nil {
		t.Fatal(err)
	}
	hyb, err := r.Discover(ctx, Request{Caller: caller, Query: query, TopK: MaxTopK, Mode: ModeHybrid})
	if err != nil {
		t.Fatal(err)
	}
	if a, b := ids(def), ids(hyb); len(a) != len(b) || len(a) < len(lexHits) {
		t.Errorf("default %v, hybrid %v", a, b)
	} else {
		for i := range a {
			if a[i] != b[i] {
				t.Errorf("default and hybrid differ at #%d: %s vs %s", i+1, a[i], b[i])
			}
		}
	}

	_, err = r.Discover(ctx, Request{Caller: caller, Query: query, Mode: "fuzzy"})
	if !errors.Is(err, cards.ErrInvalid) {
		t.Errorf("unknown mode: err = %v, want invalid", err)
	}
	if got := Modes(); len(got) != 3 || got[2] != ModeHybrid {
		t.Errorf("Modes() = %v", got)
	}
}
