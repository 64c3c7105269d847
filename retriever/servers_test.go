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
	orig := slices.Clone(in)
	order := func(fs []Fused) []string {
		var out []string
		for _, f := range fs {
			k, _ := ParseDocID(f.ID)
			out = append(out, k.Server+"/"+k.Name)
		}
		return out
	}
	for _, tc := range []struct {
		name string
		lift map[string]float64
		want []string
	}{
		{"no lift", nil, []string{"maps/geocode", "web/search", "web/fetch", "maps/route", "maps/delete_map"}},
		// maps/route: 0.45 + 0.45×0.5 = 0.675 passes web/search (0.6); the
		// destructive delete_map is not lifted.
		{"lift maps", map[string]float64{"maps": 0.5}, []string{"maps/geocode", "maps/route", "web/search", "web/fetch", "maps/delete_map"}},
		// A lift of 5 is capped at maxLift: route gets close to geocode,
		// never past it.
		{"huge lift", map[string]float64{"maps": 5}, []string{"maps/geocode", "maps/route", "web/search", "web/fetch", "maps/delete_map"}},
		{"everyone lifted alike keeps the order", map[string]float64{"maps": 0.7, "web": 0.7},
			[]string{"maps/geocode", "web/search", "web/fetch", "maps/route", "maps/delete_map"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := liftServers(in, tc.lift, cands)
			if o := order(got); !slices.Equal(o, tc.want) {
				t.Errorf("order %v, want %v", o, tc.want)
			}
			for _, f := range got[1:] {
				if f.Score >= got[0].Score {
					t.Errorf("%s lifted to %v, not under the best %v", f.ID, f.Score, got[0].Score)
				}
			}
			if !reflect.DeepEqual(in, orig) {
				t.Error("input modified")
			}
		})
	}
}
