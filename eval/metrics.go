package eval

import "math"

// Ks are the cut-offs of recall@K.
var Ks = []int{1, 3, 5, 10}

// MetricDepth is the depth of MRR and nDCG (first 10 results).
const MetricDepth = 10

// Metrics are the scores of one query, or their mean over a set of queries.
type Metrics struct {
	Recall1  float64 `json:"recall@1"`
	Recall3  float64 `json:"recall@3"`
	Recall5  float64 `json:"recall@5"`
	Recall10 float64 `json:"recall@10"`
	MRR      float64 `json:"mrr"`
	NDCG10   float64 `json:"ndcg@10"`
}

// Recall returns recall@k for k in Ks (0 for any other k).
func (m Metrics) Recall(k int) float64 {
	switch k {
	case 1:
		return m.Recall1
	case 3:
		return m.Recall3
	case 5:
		return m.Recall5
	case 10:
		return m.Recall10
	}
	return 0
}

func (m *Metrics) add(o Metrics) {
	m.Recall1 += o.Recall1
	m.Recall3 += o.Recall3
	m.Recall5 += o.Recall5
	m.Recall10 += o.Recall10
	m.MRR += o.MRR
	m.NDCG10 += o.NDCG10
}

func (m *Metrics) scale(f float64) {
	m.Recall1 *= f
	m.Recall3 *= f
	m.Recall5 *= f
	m.Recall10 *= f
	m.MRR *= f
	m.NDCG10 *= f
}

// Mean averages per-query metrics (the zero Metrics for none).
func Mean(ms []Metrics) Metrics {
	var sum Metrics
	for _, m := range ms {
		sum.add(m)
	}
	if len(ms) > 0 {
		sum.scale(1 / float64(len(ms)))
	}
	return sum
}

// NeedRanks returns, for each need (a group of interchangeable labels), the
// 1-based position of the first result that is a member of the group, or 0
// when no result is. Positions are those of ranked as given.
func NeedRanks(needs [][]string, ranked []string) []int {
	out := make([]int, len(needs))
	for i, g := range needs {
		for pos, name := range ranked {
			if contains(g, name) {
				out[i] = pos + 1
				break
			}
		}
	}
	return out
}

// Score computes the metrics of one query from its needs and the ranked
// labels that came back, best first:
//
//   - recall@K: the fraction of needs with a member among the first K
//     results;
//   - MRR: 1/position of the first result that is a member of any need,
//     within the first MetricDepth results (0 if none);
//   - nDCG@10 with one relevant item per need: walking the first 10
//     results, a result gains 1/log2(pos+1) when it is a member of a need
//     not credited yet, and credits the first such need (so neither a
//     repeated result nor a second member of a met need gains again, and
//     one result credits at most one need); the ideal DCG puts min(needs,
//     10) gains at positions 1, 2, ….
//
// A query without needs scores zero everywhere.
func Score(needs [][]string, ranked []string) Metrics {
	var m Metrics
	if len(needs) == 0 {
		return m
	}
	ranks := NeedRanks(needs, ranked)
	recall := func(k int) float64 {
		n := 0
		for _, r := range ranks {
			if r > 0 && r <= k {
				n++
			}
		}
		return float64(n) / float64(len(needs))
	}
	m.Recall1, m.Recall3, m.Recall5, m.Recall10 = recall(1), recall(3), recall(5), recall(10)

	depth := min(len(ranked), MetricDepth)
	for pos := 0; pos < depth; pos++ {
		if inAny(needs, ranked[pos]) {
			m.MRR = 1 / float64(pos+1)
			break
		}
	}

	credited := make([]bool, len(needs))
	var dcg float64
	for pos := 0; pos < depth; pos++ {
		for i, g := range needs {
			if !credited[i] && contains(g, ranked[pos]) {
				credited[i] = true
				dcg += 1 / math.Log2(float64(pos+2))
				break
			}
		}
	}
	var idcg float64
	for pos := 0; pos < min(len(needs), MetricDepth); pos++ {
		idcg += 1 / math.Log2(float64(pos+2))
	}
	m.NDCG10 = dcg / idcg
	return m
}

func contains(g []string, name string) bool {
	for _, x := range g {
		if x == name {
			return true
		}
	}
	return false
}

func inAny(needs [][]string, name string) bool {
	for _, g := range needs {
		if contains(g, name) {
			return true
		}
	}
	return false
}
