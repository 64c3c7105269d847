package retriever

import (
	"reflect"
	"slices"
	"testing"

	"github.com/seed0cff8200/cardex/cards"
)

func TestLiftServers(t *testing.T) {
	yes := true
	cands := map[string]*entry{}
	for _, k := range []cards.Key{
		{Tenant: "t", Server: "maps", Name: "geocode"}, {Tenant: "t", Server: "web", Name: "search"},
		{Tenant: "t", Server: "web", Name: "fetch"}, {Tenant: "t", Server: "maps", Name: "route"},
		{Tenant: "t", Server: "maps", Name: "delete_map"},
	} {
		e := &entry{id: DocID(k), card: cards.Card{Tenant: k.Tenant, Server: k.Server, Name: k.Name}}
		if k.Name == "delete_map" {
			e.card.Annotations.Destructive = &yes
			e.destructive = true
		}
		cands[e.id] = e
	}
	id := func(s, n string) string { return DocID(cards.Key{Tenant: "t", Server: s, Name: n}) }
	in := []Fused{
		{ID: id("maps", "geocode"), Score: 0.9},
		{ID: id("web", "search"), Score: 0.6},
		{ID: id("web", "fetch"), Score: 0.5},
		{ID: id("maps", "route"), Score: 0.45},
		{ID: id("maps", "delete_map"), Score: 0.44},
	}
	for i := range in {
		in[i].e = cands[in[i].ID]
	}
	orig := slices.Clone(in)
	direct := slices.Clone(in)
	direct[1].Confidence = directConfidence
	order := func(fs []Fused) []string {
		var out []string
		for _, f := range fs {
			k, _ := ParseDocID(f.ID)
			out = append(out, k.Server+"/"+k.Name)
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		lift   map[string]float64
		want   []string
		direct bool // lift the list where web/search is a direct match
	}{
		{"no lift", nil, []string{"maps/geocode", "web/search", "web/fetch", "maps/route", "maps/delete_map"}, false},
		// maps/route: 0.45 + 0.45×0.5 = 0.675 passes web/search (0.6); the
		// destructive delete_map is not lifted.
		{"lift maps", map[string]float64{"maps": 0.5}, []string{"maps/geocode", "maps/route", "web/search", "web/fetch", "maps/delete_map"}, false},
		// A lift of 5 is capped at maxLift: route gets close to geocode,
		// never past it.
		{"huge lift", map[string]float64{"maps": 5}, []string{"maps/geocode", "maps/route", "web/search", "web/fetch", "maps/delete_map"}, false},
		{"everyone lifted alike keeps the order", map[string]float64{"maps": 0.7, "web": 0.7},
			[]string{"maps/geocode", "web/search", "web/fetch", "maps/route", "maps/delete_map"}, false},
		// web/search matched on its own (confidence ≥ directConfidence):
		// maps/route, lifted, passes web/fetch but not web/search.
		{"a direct match is never passed", map[string]float64{"maps": 0.9},
			[]string{"maps/geocode", "web/search", "maps/route", "web/fetch", "maps/delete_map"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The lift of each tool is its server's.
			var lifts []float64
			if tc.lift != nil {
				for _, f := range in {
					lifts = append(lifts, tc.lift[f.e.card.Server])
				}
			}
			got := liftServers(slices.Clone(in), lifts)
			if tc.direct {
				got = liftServers(slices.Clone(direct), lifts)
			}
			if o := order(got); !slices.Equal(o, tc.want) {
				t.Errorf("order %v, want %v", o, tc.want)
			}
			for _, f := range got[1:] {
				if f.Score >= got[0].Score {
					t.Errorf("%s lifted to %v, not under the best %v", f.ID, f.Score, got[0].Score)
				}
			}
			if !reflect.DeepEqual(in, orig) || direct[1].Score != orig[1].Score {
				t.Error("the test's lists changed")
			}
		})
	}
}
