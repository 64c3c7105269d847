package eval

import (
	"fmt"
	"math"
	"testing"
)

func TestScore(t *testing.T) {
	// Gains at positions 1..10 are 1/log2(pos+1): 1, 0.63093, 0.5,
	// 0.43068, 0.38685, 0.35621, 0.33333, ...; the ideal DCG of two needs
	// is 1 + 0.63093 = 1.63093.
	ranks := func(n int) []string { // x1, x2, ... xn
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("x%d", i+1)
		}
		return out
	}
	twelve := make([][]string, 12)
	for i := range twelve {
		twelve[i] = []string{fmt.Sprintf("x%d", i+1)}
	}
	tests := []struct {
		name   string
		needs  [][]string
		ranked []string
		want   Metrics
	}{
		{"hit at 1", [][]string{{"a"}}, []string{"a", "b", "c"},
			Metrics{1, 1, 1, 1, 1, 1}},
		{"hit at 3", [][]string{{"a"}}, []string{"b", "c", "a"},
			// nDCG = 0.5 / 1
			Metrics{0, 1, 1, 1, 1.0 / 3, 0.5}},
		{"any group member counts", [][]string{{"a", "a2"}, {"b"}}, []string{"a2", "x", "b"},
			// DCG 1 + 0.5 = 1.5; 1.5 / 1.63093 = 0.91972
			Metrics{0.5, 1, 1, 1, 1, 0.91972}},
		{"second member of a met group gains nothing", [][]string{{"a", "a2"}, {"b"}}, []string{"a", "a2", "b"},
			Metrics{0.5, 1, 1, 1, 1, 0.91972}},
		{"a repeated result gains once", [][]string{{"a"}, {"b"}}, []string{"a", "a", "b"},
			Metrics{0.5, 1, 1, 1, 1, 0.91972}},
		{"hits at 5 and 7", [][]string{{"a"}, {"b"}}, []string{"x", "y", "z", "w", "a", "v", "b"},
			// DCG 0.38685 + 0.33333 = 0.72019; / 1.63093 = 0.44158
			Metrics{0, 0, 0.5, 1, 0.2, 0.44158}},
		{"total miss", [][]string{{"a"}, {"b"}}, []string{"x", "y", "z"},
			Metrics{}},
		{"hit at 11 is outside every metric", [][]string{{"x11"}}, ranks(11),
			Metrics{}},
		{"nothing returned", [][]string{{"a"}}, nil,
			Metrics{}},
		{"more needs than 10: ideal DCG stops at 10", twelve, ranks(12),
			// 10 of 12 needs in the top 10; DCG = ideal DCG
			Metrics{1.0 / 12, 3.0 / 12, 5.0 / 12, 10.0 / 12, 1, 1}},
		{"one result in two groups meets both for recall, credits one for nDCG", [][]string{{"a"}, {"a", "b"}}, []string{"a", "x"},
			// recall: both groups have a member in the top 1; nDCG 1 / 1.63093 = 0.61315
			Metrics{1, 1, 1, 1, 1, 0.61315}},
		{"no needs", nil, []string{"a"},
			Metrics{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Score(tc.needs, tc.ranked)
			if !near(got, tc.want) {
				t.Errorf("Score = %+v\nwant    %+v", got, tc.want)
			}
			for _, v := range []float64{got.Recall1, got.Recall3, got.Recall5, got.Recall10, got.MRR, got.NDCG10} {
				if v < 0 || v > 1 {
					t.Errorf("metric %v outside [0,1]", v)
				}
			}
		})
	}
}

func TestNeedRanks(t *testing.T) {
	got := NeedRanks([][]string{{"a", "b"}, {"c"}, {"d"}}, []string{"x", "b", "c", "a"})
	want := []int{2, 3, 0}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("NeedRanks = %v, want %v", got, want)
	}
}

func TestMeanAndRecall(t *testing.T) {
	m := Mean([]Metrics{{1, 1, 1, 1, 1, 1}, {0, 0, 0.5, 1, 0.2, 0.4}})
	want := Metrics{0.5, 0.5, 0.75, 1, 0.6, 0.7}
	if !near(m, want) {
		t.Errorf("Mean = %+v, want %+v", m, want)
	}
	if Mean(nil) != (Metrics{}) {
		t.Error("Mean(nil) is not zero")
	}
	for _, k := range Ks {
		if m.Recall(k) == 0 {
			t.Errorf("Recall(%d) = 0", k)
		}
	}
	if m.Recall(2) != 0 {
		t.Error("Recall(2) should be 0: not a reported cut-off")
	}
}

func near(a, b Metrics) bool {
	x := []float64{a.Recall1, a.Recall3, a.Recall5, a.Recall10, a.MRR, a.NDCG10}
	y := []float64{b.Recall1, b.Recall3, b.Recall5, b.Recall10, b.MRR, b.NDCG10}
	for i := range x {
		if math.Abs(x[i]-y[i]) > 5e-5 {
			return false
		}
	}
	return true
}
