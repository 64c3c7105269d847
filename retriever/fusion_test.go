package retriever

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func fuseCloneHits(hs []Hit) []Hit {
	if hs == nil {
		return nil
	}
	out := make([]Hit, len(hs))
	for i, h := range hs {
		out[i] = h
		out[i].Fields = slices.Clone(h.Fields)
	}
	return out
}

const fusionEps = 1e-12

func fuseSame(t *testing.T, got, want []Fused) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d results, want %d:\n got %+v\nwant %+v", len(got), len(want), got, want)
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.ID != w.ID || math.Abs(g.Score-w.Score) > fusionEps ||
			g.Lexical != w.Lexical || g.Semantic != w.Semantic ||
			g.LexicalRank != w.LexicalRank || g.SemanticRank != w.SemanticRank ||
			!slices.Equal(g.Fields, w.Fields) {
			t.Errorf("result %d:\n got %+v\nwant %+v", i, g, w)
		}
	}
}

func fuseRRFScore(k float64, ranks ...int) float64 {
	var s float64
	for _, r := range ranks {
		s += 1 / (k + float64(r))
	}
	return s
}

func TestFuseRRF(t *testing.T) {
	lex := []Hit{
		{ID: "t/gh/create_issue", Score: 9, Fields: []string{"name", "summary"}},
		{ID: "t/gh/list_issues", Score: 5, Fields: []string{"summary"}},
		{ID: "t/jira/create", Score: 2},
	}
	sem := []Hit{
		{ID: "t/jira/create", Score: 0.9},
		{ID: "t/gh/create_issue", Score: 0.8},
		{ID: "t/linear/new_ticket", Score: 0.7},
	}
	for _, tc := range []struct {
		name     string
		lex, sem []Hit
		k        float64
		want     []Fused
	}{
		{
			name: "both legs",
			lex:  lex, sem: sem, k: 60,
			want: []Fused{
				{ID: "t/gh/create_issue", Score: fuseRRFScore(60, 1, 2), Lexical: 9, Semantic: 0.8, LexicalRank: 1, SemanticRank: 2, Fields: []string{"name", "summary"}},
				{ID: "t/jira/create", Score: fuseRRFScore(60, 3, 1), Lexical: 2, Semantic: 0.9, LexicalRank: 3, SemanticRank: 1},
				{ID: "t/gh/list_issues", Score: fuseRRFScore(60, 2), Lexical: 5, LexicalRank: 2, Fields: []string{"summary"}},
				{ID: "t/linear/new_ticket", Score: fuseRRFScore(60, 3), Semantic: 0.7, SemanticRank: 3},
			},
		},
		{
			name: "k<=0 means default",
			lex:  lex[:1], sem: nil, k: 0,
			want: []Fused{
				{ID: "t/gh/create_issue", Score: fuseRRFScore(DefaultRRFK, 1), Lexical: 9, LexicalRank: 1, Fields: []string{"name", "summary"}},
			},
		},
		{
			name: "ties break by ID ascending",
			lex:  []Hit{{ID: "t/b/x", Score: 3}, {ID: "t/a/y", Score: 2}},
			sem:  []Hit{{ID: "t/a/y", Score: 0.5}, {ID: "t/b/x", Score: 0.4}},
			k:    60,
			want: []Fused{
				{ID: "t/a/y", Score: fuseRRFScore(60, 2, 1), Lexical: 2, Semantic: 0.5, LexicalRank: 2, SemanticRank: 1},
				{ID: "t/b/x", Score: fuseRRFScore(60, 1, 2), Lexical: 3, Semantic: 0.4, LexicalRank: 1, SemanticRank: 2},
			},
		},
		{
			name: "disjoint legs interleave by rank, ties by ID",
			lex:  []Hit{{ID: "t/s/l1", Score: 1}, {ID: "t/s/l2", Score: 0.5}},
			sem:  []Hit{{ID: "t/s/a1", Score: 1}, {ID: "t/s/a2", Score: 0.5}},
			k:    10,
			want: []Fused{
				{ID: "t/s/a1", Score: fuseRRFScore(10, 1), Semantic: 1, SemanticRank: 1},
				{ID: "t/s/l1", Score: fuseRRFScore(10, 1), Lexical: 1, LexicalRank: 1},
				{ID: "t/s/a2", Score: fuseRRFScore(10, 2), Semantic: 0.5, SemanticRank: 2},
				{ID: "t/s/l2", Score: fuseRRFScore(10, 2), Lexical: 0.5, LexicalRank: 2},
			},
		},
		{
			name: "empty lexical",
			lex:  nil, sem: sem[:2], k: 60,
			want: []Fused{
				{ID: "t/jira/create", Score: fuseRRFScore(60, 1), Semantic: 0.9, SemanticRank: 1},
				{ID: "t/gh/create_issue", Score: fuseRRFScore(60, 2), Semantic: 0.8, SemanticRank: 2},
			},
		},
		{
			name: "empty semantic",
			lex:  lex[:2], sem: []Hit{}, k: 60,
			want: []Fused{
				{ID: "t/gh/create_issue", Score: fuseRRFScore(60, 1), Lexical: 9, LexicalRank: 1, Fields: []string{"name", "summary"}},
				{ID: "t/gh/list_issues", Score: fuseRRFScore(60, 2), Lexical: 5, LexicalRank: 2, Fields: []string{"summary"}},
			},
		},
		{
			name: "both empty",
			k:    60,
			want: []Fused{},
		},
		{
			name: "duplicate ID in a leg counts once, at its best rank",
			lex:  []Hit{{ID: "t/s/a", Score: 2}, {ID: "t/s/a", Score: 1}},
			k:    60,
			want: []Fused{{ID: "t/s/a", Score: fuseRRFScore(60, 1), Lexical: 2, LexicalRank: 1}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lexIn, semIn := fuseCloneHits(tc.lex), fuseCloneHits(tc.sem)
			got := FuseRRF(tc.lex, tc.sem, tc.k)
			fuseSame(t, got, tc.want)
			if !reflect.DeepEqual(tc.lex, lexIn) || !reflect.DeepEqual(tc.sem, semIn) {
				t.Error("inputs modified")
			}
		})
	}
}

func TestFuseRelative(t *testing.T) {
	lex := []Hit{
		{ID: "t/s/a", Score: 10, Fields: []string{"name"}},
		{ID: "t/s/b", Score: 6},
		{ID: "t/s/c", Score: 2},
	}
	sem := []Hit{
		{ID: "t/s/c", Score: 0.9},
		{ID: "t/s/d", Score: 0.7},
		{ID: "t/s/a", Score: 0.5},
	}
	// Normalised: lex a=1, b=0.5, c=0; sem c=1, d=0.5, a=0.
	for _, tc := range []struct {
		name     string
		lex, sem []Hit
		alpha    float64
		want     []Fused
	}{
		{
			name: "alpha 0.5",
			lex:  lex, sem: sem, alpha: 0.5,
			want: []Fused{
				{ID: "t/s/a", Score: 0.5, Lexical: 10, Semantic: 0.5, LexicalRank: 1, SemanticRank: 3, Fields: []string{"name"}},
				{ID: "t/s/c", Score: 0.5, Lexical: 2, Semantic: 0.9, LexicalRank: 3, SemanticRank: 1},
				{ID: "t/s/b", Score: 0.25, Lexical: 6, LexicalRank: 2},
				{ID: "t/s/d", Score: 0.25, Semantic: 0.7, SemanticRank: 2},
			},
		},
		{
			name: "alpha 0 is pure lexical",
			lex:  lex, sem: sem, alpha: 0,
			want: []Fused{
				{ID: "t/s/a", Score: 1, Lexical: 10, Semantic: 0.5, LexicalRank: 1, SemanticRank: 3, Fields: []string{"name"}},
				{ID: "t/s/b", Score: 0.5, Lexical: 6, LexicalRank: 2},
				{ID: "t/s/c", Score: 0, Lexical: 2, Semantic: 0.9, LexicalRank: 3, SemanticRank: 1},
				{ID: "t/s/d", Score: 0, Semantic: 0.7, SemanticRank: 2},
			},
		},
		{
			name: "alpha 1 is pure semantic",
			lex:  lex, sem: sem, alpha: 1,
			want: []Fused{
				{ID: "t/s/c", Score: 1, Lexical: 2, Semantic: 0.9, LexicalRank: 3, SemanticRank: 1},
				{ID: "t/s/d", Score: 0.5, Semantic: 0.7, SemanticRank: 2},
				{ID: "t/s/a", Score: 0, Lexical: 10, Semantic: 0.5, LexicalRank: 1, SemanticRank: 3, Fields: []string{"name"}},
				{ID: "t/s/b", Score: 0, Lexical: 6, LexicalRank: 2},
			},
		},
		{
			name: "alpha clamped",
			lex:  lex[:1], sem: sem[:1], alpha: 7,
			want: []Fused{
				{ID: "t/s/c", Score: 1, Semantic: 0.9, SemanticRank: 1},
				{ID: "t/s/a", Score: 0, Lexical: 10, LexicalRank: 1, Fields: []string{"name"}},
			},
		},
		{
			name: "single-hit leg normalises to 1",
			lex:  []Hit{{ID: "t/s/x", Score: 0.01}}, sem: nil, alpha: 0.25,
			want: []Fused{{ID: "t/s/x", Score: 0.75, Lexical: 0.01, LexicalRank: 1}},
		},
		{
			name:  "all-equal leg normalises to 1, ties by ID",
			lex:   []Hit{{ID: "t/z/q", Score: 3}, {ID: "t/a/q", Score: 3}, {ID: "t/m/q", Score: 3}},
			alpha: 0.5,
			want: []Fused{
				{ID: "t/a/q", Score: 0.5, Lexical: 3, LexicalRank: 2},
				{ID: "t/m/q", Score: 0.5, Lexical: 3, LexicalRank: 3},
				{ID: "t/z/q", Score: 0.5, Lexical: 3, LexicalRank: 1},
			},
		},
		{
			name:  "disjoint legs",
			lex:   []Hit{{ID: "t/s/l1", Score: 4}, {ID: "t/s/l2", Score: 2}},
			sem:   []Hit{{ID: "t/s/s1", Score: 0.8}, {ID: "t/s/s2", Score: 0.4}},
			alpha: 0.6,
			want: []Fused{
				{ID: "t/s/s1", Score: 0.6, Semantic: 0.8, SemanticRank: 1},
				{ID: "t/s/l1", Score: 0.4, Lexical: 4, LexicalRank: 1},
				{ID: "t/s/l2", Score: 0, Lexical: 2, LexicalRank: 2},
				{ID: "t/s/s2", Score: 0, Semantic: 0.4, SemanticRank: 2},
			},
		},
		{
			name:  "both empty",
			alpha: 0.5,
			want:  []Fused{},
		},
		{
			name:  "a clear lexical first keeps the top",
			lex:   []Hit{{ID: "t/s/a", Score: 10, Evidence: ClearEvidence}, {ID: "t/s/b", Score: 6, Evidence: 0.9}},
			sem:   []Hit{{ID: "t/s/c", Score: 0.9}, {ID: "t/s/b", Score: 0.8}, {ID: "t/s/a", Score: 0.1}},
			alpha: 0.5,
			want: []Fused{
				{ID: "t/s/a", Score: 1, Lexical: 10, Semantic: 0.1, LexicalRank: 1, SemanticRank: 3, Evidence: ClearEvidence},
				{ID: "t/s/c", Score: 0.5, Semantic: 0.9, SemanticRank: 1},
				{ID: "t/s/b", Score: 0.4375, Lexical: 6, Semantic: 0.8, LexicalRank: 2, SemanticRank: 2, Evidence: 0.9},
			},
		},
		{
			name:  "an unclear lexical first is fused as usual",
			lex:   []Hit{{ID: "t/s/a", Score: 10, Evidence: 0.69}, {ID: "t/s/b", Score: 6}},
			sem:   []Hit{{ID: "t/s/c", Score: 0.9}, {ID: "t/s/a", Score: 0.1}},
			alpha: 0.5,
			want: []Fused{
				{ID: "t/s/a", Score: 0.5, Lexical: 10, Semantic: 0.1, LexicalRank: 1, SemanticRank: 2, Evidence: 0.69},
				{ID: "t/s/c", Score: 0.5, Semantic: 0.9, SemanticRank: 1},
				{ID: "t/s/b", Score: 0, Lexical: 6, LexicalRank: 2},
			},
		},
		{
			name:  "alpha 1 keeps nothing of the lexical leg",
			lex:   []Hit{{ID: "t/s/a", Score: 10, Evidence: 1}},
			sem:   []Hit{{ID: "t/s/c", Score: 0.9}},
			alpha: 1,
			want: []Fused{
				{ID: "t/s/c", Score: 1, Semantic: 0.9, SemanticRank: 1},
				{ID: "t/s/a", Score: 0, Lexical: 10, LexicalRank: 1, Evidence: 1},
			},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lexIn, semIn := fuseCloneHits(tc.lex), fuseCloneHits(tc.sem)
			got := FuseRelative(tc.lex, tc.sem, tc.alpha)
			fuseSame(t, got, tc.want)
			if !reflect.DeepEqual(tc.lex, lexIn) || !reflect.DeepEqual(tc.sem, semIn) {
				t.Error("inputs modified")
			}
		})
	}
}

func TestFuseFieldsAreCopied(t *testing.T) {
	lex := []Hit{{ID: "t/s/a", Score: 1, Fields: []string{"name", "summary"}}}
	for _, out := range [][]Fused{FuseRRF(lex, nil, 60), FuseRelative(lex, nil, 0.5)} {
		out[0].Fields[0] = "changed"
		if lex[0].Fields[0] != "name" {
			t.Fatal("output Fields alias the input")
		}
		lex[0].Fields[0] = "name"
	}
}

// TestFuseDeterministic builds legs with many equal scores (and thus many
// fused ties), feeds them in shuffled ID-equivalent forms and checks that the
// output order never depends on anything but scores and IDs.
func TestFuseDeterministic(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for trial := range 50 {
		n := 1 + r.IntN(40)
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("t/s%d/n%02d", r.IntN(3), i)
		}
		leg := func() []Hit {
			var hs []Hit
			for _, id := range ids {
				if r.IntN(3) > 0 {
					hs = append(hs, Hit{ID: id, Score: float64(r.IntN(3))})
				}
			}
			slices.SortStableFunc(hs, func(a, b Hit) int {
				if a.Score != b.Score {
					if a.Score > b.Score {
						return -1
					}
					return 1
				}
				return 0
			})
			return hs
		}
		lex, sem := leg(), leg()
		for _, fuse := range []func() []Fused{
			func() []Fused { return FuseRRF(lex, sem, DefaultRRFK) },
			func() []Fused { return FuseRelative(lex, sem, 0.5) },
		} {
			first := fuse()
			for i := 1; i < len(first); i++ {
				a, b := first[i-1], first[i]
				if a.Score < b.Score || (a.Score == b.Score && a.ID >= b.ID) {
					t.Fatalf("trial %d: out of order at %d: %+v then %+v", trial, i, a, b)
				}
			}
			for range 5 {
				if again := fuse(); !reflect.DeepEqual(again, first) {
					t.Fatalf("trial %d: repeated call gives a different result", trial)
				}
			}
		}
		// Fusion is symmetric in the legs apart from which raw score goes
		// where: swapping them must give the same IDs in the same order.
		ab, ba := FuseRRF(lex, sem, DefaultRRFK), FuseRRF(sem, lex, DefaultRRFK)
		for i := range ab {
			if ab[i].ID != ba[i].ID {
				t.Fatalf("trial %d: swapped legs order differs at %d", trial, i)
			}
		}
	}
}

// TestKeyTable: the request tables keyed by entry numbers hold every key
// given, through growth, and are empty after a reset; collisions (keys a
// power of two apart) are kept apart.
func TestKeyTable(t *testing.T) {
	var kt keyTable
	for _, n := range []int{0, 5, 300} {
		kt.reset(n)
		keys := []uint32{}
		for i := range 1000 {
			keys = append(keys, uint32(1+i*1024), uint32(7+i*3))
		}
		for i, k := range keys {
			if p := kt.slot(k); *p == 0 {
				*p = int32(i + 1)
			}
		}
		for i, k := range keys {
			first := slices.Index(keys, k)
			if got := kt.get(k); got != int32(first+1) || first > i {
				t.Fatalf("reset(%d): key %d holds %d, want %d", n, k, got, first+1)
			}
		}
		if kt.get(5) != 0 {
			t.Fatalf("reset(%d): an absent key has a value", n)
		}
	}
	kt.reset(0)
	if kt.n != 0 || kt.get(1) != 0 {
		t.Fatal("a reset table holds keys")
	}
}

// sortFusedReference is sortFused as it was before its integer keys: a
// sort by comparisons of score (a NaN last) and ID, of (score, position)
// pairs.
func sortFusedReference(out []Fused) {
	type key struct {
		score float64
		i     int32
	}
	keys := make([]key, len(out))
	for i := range out {
		keys[i] = key{out[i].Score, int32(i)}
	}
	slices.SortFunc(keys, func(a, b key) int {
		switch {
		case a.score > b.score:
			return -1
		case a.score < b.score:
			return 1
		case a.score == b.score:
			return strings.Compare(out[a.i].ID, out[b.i].ID)
		}
		return cmp.Compare(b.score, a.score)
	})
	sorted := make([]Fused, len(out))
	for k, x := range keys {
		sorted[k] = out[x.i]
	}
	copy(out, sorted)
}

// TestSortFusedKeys holds sortFused to the comparison sort it replaces
// over lists of every size up to 2·LegDepth and past it, with equal scores,
// scores that differ only in their last bits, -0 and 0, negative scores,
// and NaNs.
func TestSortFusedKeys(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 7))
	base := []float64{0, math.Copysign(0, -1), 1, 0.5, -0.25, 1e-300, -1e-300, math.SmallestNonzeroFloat64, math.MaxFloat64, math.Inf(1), math.Inf(-1)}
	for trial := range 3000 {
		n := r.IntN(2*LegDepth + 2)
		if trial%500 == 0 {
			n = 2*LegDepth + 100 + r.IntN(50)
		}
		list := make([]Fused, n)
		ids := r.Perm(2000) // unique, as a fused list's are
		for i := range list {
			var s float64
			switch r.IntN(6) {
			case 0:
				s = base[r.IntN(len(base))]
			case 1: // within the last 16 bits of another
				s = math.Float64frombits(math.Float64bits(0.75) + uint64(r.IntN(1<<17)))
			case 2:
				s = float64(r.IntN(4)) / 4
			default:
				s = r.Float64()*2 - 0.5
			}
			if trial%97 == 0 && r.IntN(20) == 0 {
				s = math.NaN()
			}
			list[i] = Fused{ID: fmt.Sprintf("t\x1fs%d\x1fn%04d", ids[i]%4, ids[i]), Score: s, LexicalRank: i + 1}
		}
		want := slices.Clone(list)
		sortFusedReference(want)
		sortFused(list)
		for i := range list {
			a, b := list[i], want[i]
			if a.ID != b.ID || math.Float64bits(a.Score) != math.Float64bits(b.Score) || a.LexicalRank != b.LexicalRank {
				t.Fatalf("trial %d (%d tools): position %d is %s %v #%d, want %s %v #%d", trial, n, i, a.ID, a.Score, a.LexicalRank, b.ID, b.Score, b.LexicalRank)
			}
		}
	}
}
