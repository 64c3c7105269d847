package eval

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"slices"

	"github.com/seed0cff8200/cardex/retriever"
)

// ConfidenceSample is one ranked tool of a labelled query: the confidence
// model's inputs and whether the tool meets one of the query's needs.
type ConfidenceSample struct {
	Features [4]float64 // retriever.ConfidenceFeatures
	Relevant bool
	// Confidence is what the retriever's current model said.
	Confidence float64
}

// ConfidenceSamples runs every query of d through the in-process hybrid
// pipeline, once as its query and once per intent (each ranked alone, as an
// intent's list is), with no minimum confidence, and returns one sample per
// ranked tool of the top depth: a tool is relevant when it meets any need of
// the query. b must be registered with d's catalogue (tenant cat.Tenant).
func ConfidenceSamples(ctx context.Context, d *Dataset, b *InProcess, cat *Catalog, depth int) ([]ConfidenceSample, error) {
	if b.ret == nil {
		return nil, errors.New("confidence samples: nothing registered")
	}
	zero := 0.0
	var out []ConfidenceSample
	for qi := range d.Queries {
		q := &d.Queries[qi]
		relevant := map[string]bool{}
		for _, need := range q.Needs() {
			for _, label := range need {
				relevant[label] = true
			}
		}
		texts := append([]string{q.Query}, q.Intents...)
		for _, text := range texts {
			res, err := b.ret.Discover(ctx, retriever.Request{
				Caller: retriever.Caller{Tenant: cat.Tenant, Subject: "eval"}, Query: cutQuery(text),
				TopK: depth, MinConfidence: &zero, NoReformulate: true,
			})
			if err != nil {
				return nil, fmt.Errorf("query %s: %w", q.ID, err)
			}
			for i, t := range res.Tools {
				out = append(out, ConfidenceSample{
					Features:   retriever.ConfidenceFeatures(t.Scores, i+1),
					Relevant:   relevant[cat.Label(t.Card.Server, t.Card.Name)],
					Confidence: t.Scores.Confidence,
				})
			}
		}
	}
	return out, nil
}

// cutQuery cuts a query to the retriever's limit (MaxQueryLen code points),
// as the service would refuse it longer.
func cutQuery(s string) string {
	if r := []rune(s); len(r) > retriever.MaxQueryLen {
		return string(r[:retriever.MaxQueryLen])
	}
	return s
}

// FitConfidence fits the logistic confidence model to sample sets by
// Newton's method (iteratively reweighted least squares) with a small ridge
// penalty. Every set weighs the same in total, so a dataset with many
// queries does not decide the fit alone. The fit is deterministic.
func FitConfidence(sets [][]ConfidenceSample) (retriever.ConfidenceModel, error) {
	const k = 5 // bias + 4 features
	var w [k]float64
	total := 0
	for _, s := range sets {
		total += len(s)
	}
	if total == 0 {
		return retriever.ConfidenceModel{}, errors.New("fit confidence: no samples")
	}
	const ridge = 1e-3
	for iter := 0; iter < 50; iter++ {
		var g [k]float64
		var h [k][k]float64
		for _, set := range sets {
			if len(set) == 0 {
				continue
			}
			sw := 1 / float64(len(set))
			for _, s := range set {
				x := [k]float64{1, s.Features[0], s.Features[1], s.Features[2], s.Features[3]}
				z := 0.0
				for i := range x {
					z += w[i] * x[i]
				}
				p := 1 / (1 + math.Exp(-z))
				y := 0.0
				if s.Relevant {
					y = 1
				}
				for i := range x {
					g[i] += sw * (p - y) * x[i]
					for j := range x {
						h[i][j] += sw * p * (1 - p) * x[i] * x[j]
					}
				}
			}
		}
		for i := range k {
			g[i] += ridge * w[i]
			h[i][i] += ridge
		}
		step, err := solve(h, g)
		if err != nil {
			return retriever.ConfidenceModel{}, err
		}
		change := 0.0
		for i := range w {
			w[i] -= step[i]
			change = max(change, math.Abs(step[i]))
		}
		if change < 1e-9 {
			break
		}
	}
	return retriever.ConfidenceModel{Bias: w[0], Evidence: w[1], Cosine: w[2], Fused: w[3], InvPosition: w[4]}, nil
}

// solve solves h·x = g by Gaussian elimination with partial pivoting.
func solve(h [5][5]float64, g [5]float64) ([5]float64, error) {
	const n = 5
	var a [n][n + 1]float64
	for i := range n {
		copy(a[i][:n], h[i][:])
		a[i][n] = g[i]
	}
	for c := range n {
		p := c
		for r := c + 1; r < n; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[p][c]) {
				p = r
			}
		}
		if math.Abs(a[p][c]) < 1e-15 {
			return [n]float64{}, errors.New("fit confidence: singular system (too few or constant samples)")
		}
		a[c], a[p] = a[p], a[c]
		for r := range n {
			if r == c {
				continue
			}
			f := a[r][c] / a[c][c]
			for cc := c; cc <= n; cc++ {
				a[r][cc] -= f * a[c][cc]
			}
		}
	}
	var x [n]float64
	for i := range n {
		x[i] = a[i][n] / a[i][i]
	}
	return x, nil
}

// Reliability is a calibration table: samples binned by predicted
// confidence, with the observed share of relevant tools in each bin, and
// the expected calibration error (the bins' |predicted − observed|,
// weighted by their sizes).
type Reliability struct {
	Bins []ReliabilityBin `json:"bins"`
	ECE  float64          `json:"ece"`
}

// ReliabilityBin is one bin of a Reliability table.
type ReliabilityBin struct {
	Lo        float64 `json:"lo"`
	Hi        float64 `json:"hi"`
	Samples   int     `json:"samples"`
	Predicted float64 `json:"predicted"` // mean confidence
	Observed  float64 `json:"observed"`  // share relevant
}

// Calibration bins samples by the confidence the model gives them.
func Calibration(m retriever.ConfidenceModel, samples []ConfidenceSample) Reliability {
	edges := []float64{0, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0000001}
	bins := make([]ReliabilityBin, len(edges)-1)
	for i := range bins {
		bins[i].Lo, bins[i].Hi = edges[i], min(edges[i+1], 1)
	}
	for _, s := range samples {
		z := m.Bias + m.Evidence*s.Features[0] + m.Cosine*s.Features[1] + m.Fused*s.Features[2] + m.InvPosition*s.Features[3]
		p := 1 / (1 + math.Exp(-z))
		i, _ := slices.BinarySearch(edges, p)
		if i > 0 && (i == len(edges) || edges[i] != p) {
			i--
		}
		i = min(i, len(bins)-1)
		bins[i].Samples++
		bins[i].Predicted += p
		if s.Relevant {
			bins[i].Observed++
		}
	}
	var out Reliability
	n := 0
	for _, b := range bins {
		if b.Samples == 0 {
			continue
		}
		b.Predicted /= float64(b.Samples)
		b.Observed /= float64(b.Samples)
		out.Bins = append(out.Bins, b)
		out.ECE += float64(b.Samples) * math.Abs(b.Predicted-b.Observed)
		n += b.Samples
	}
	if n > 0 {
		out.ECE /= float64(n)
	}
	return out
}

// unitOf is what the abstention split removes together: a tool's server
// where the catalogue has servers (a server's tools stand or go together,
// as when a deployment lacks that server), the tool itself otherwise.
func unitOf(t *Tool) string {
	if t.Server != "" {
		return "s:" + t.Server
	}
	return "t:" + t.Name
}

func removedUnit(unit string) bool {
	h := fnv.New32a()
	h.Write([]byte(unit))
	return h.Sum32()%2 == 1
}

// AbstentionSplit builds the out-of-catalogue experiment of a dataset: half
// the units (servers, or tools where there are none), chosen by a hash of
// their names, are removed from the catalogue. Queries all of whose needs
// lie wholly in removed units are out of catalogue (no tool they need
// exists); queries with every need still met by a kept tool are in
// catalogue; the rest (partly answerable) are left out.
func AbstentionSplit(d *Dataset) (kept *Dataset, in, out []Query) {
	unit := make(map[string]string, len(d.Tools))
	kept = &Dataset{Name: d.Name, Dir: d.Dir}
	for i := range d.Tools {
		t := &d.Tools[i]
		unit[t.Name] = unitOf(t)
		if !removedUnit(unit[t.Name]) {
			kept.Tools = append(kept.Tools, *t)
		}
	}
	for _, q := range d.Queries {
		allGone, allMet := true, true
		for _, need := range q.Needs() {
			met := false
			for _, label := range need {
				if !removedUnit(unit[label]) {
					met = true
				}
			}
			allGone = allGone && !met
			allMet = allMet && met
		}
		switch {
		case allGone:
			out = append(out, q)
		case allMet:
			in = append(in, q)
		}
	}
	kept.Queries = append(append([]Query{}, in...), out...)
	return kept, in, out
}

// AbstentionRow is the abstention measurement at one threshold.
type AbstentionRow struct {
	Threshold float64 `json:"threshold"`
	// Precision: of the queries answered empty, the share out of catalogue.
	Precision float64 `json:"precision"`
	// Recall: of the out-of-catalogue queries, the share answered empty.
	Recall float64 `json:"recall"`
	// FalseAbstentions: in-catalogue queries answered empty.
	FalseAbstentions int `json:"false_abstentions"`
	// InRecall5 is the in-catalogue queries' recall@5 at this threshold
	// (lists under it not answered).
	InRecall5 float64 `json:"in_recall@5"`
	// OutTools is the mean number of tools an out-of-catalogue query
	// still got back (every one of them a wrong tool).
	OutTools float64 `json:"out_tools"`
}

// AbstentionReport is the out-of-catalogue experiment (AbstentionSplit).
type AbstentionReport struct {
	Condition      string          `json:"condition"`
	ToolsKept      int             `json:"tools_kept"`
	InCatalogue    int             `json:"in_catalogue_queries"`
	OutOfCatalogue int             `json:"out_of_catalogue_queries"`
	Default        float64         `json:"default_threshold"`
	Rows           []AbstentionRow `json:"rows"`
}

// AbstentionThresholds are the thresholds the report lists.
var AbstentionThresholds = []float64{0, 0.1, 0.2, 0.25, 0.27, 0.28, 0.29, 0.3, 0.35, 0.4}

// RunAbstention registers the kept half of d (AbstentionSplit) in a fresh
// in-process backend b and runs every in- and out-of-catalogue query at
// every threshold as the request's min_confidence, under the query
// condition and, when the dataset has intents, the intents one. A query
// abstains when its answer holds no ranked tool. b is closed by the caller.
func RunAbstention(ctx context.Context, d *Dataset, b *InProcess, defaultThreshold float64) ([]AbstentionReport, error) {
	kept, in, out := AbstentionSplit(d)
	if len(in) == 0 || len(out) == 0 {
		return nil, fmt.Errorf("abstention: %d in-catalogue and %d out-of-catalogue queries; need both", len(in), len(out))
	}
	cat, err := NewCatalog(kept, "eval-"+d.Name+"-ooc")
	if err != nil {
		return nil, err
	}
	if err := b.Register(ctx, cat); err != nil {
		return nil, err
	}
	conds := []Condition{CondQuery}
	if d.HasIntents() {
		conds = append(conds, CondIntents)
	}
	thresholds := AbstentionThresholds
	if !slices.Contains(thresholds, defaultThreshold) {
		thresholds = append(slices.Clone(thresholds), defaultThreshold)
		slices.Sort(thresholds)
	}
	answer := func(c Condition, q *Query, th float64) ([]string, error) {
		text, intents := c.search(q, cutQuery(q.Query))
		res, err := b.ret.Discover(ctx, retriever.Request{Caller: retriever.Caller{Tenant: cat.Tenant, Subject: "eval"},
			Query: text, Intents: intents, TopK: MetricDepth, MinConfidence: &th})
		if err != nil {
			return nil, fmt.Errorf("query %s: %w", q.ID, err)
		}
		labels := make([]string, len(res.Tools))
		for i, t := range res.Tools {
			labels[i] = cat.Label(t.Card.Server, t.Card.Name)
		}
		return labels, nil
	}
	var reports []AbstentionReport
	for _, c := range conds {
		rep := AbstentionReport{Condition: string(c), ToolsKept: len(kept.Tools), InCatalogue: len(in), OutOfCatalogue: len(out), Default: defaultThreshold}
		for _, th := range thresholds {
			row := AbstentionRow{Threshold: th}
			abstainOut, outTools := 0, 0
			for i := range out {
				got, err := answer(c, &out[i], th)
				if err != nil {
					return nil, err
				}
				if len(got) == 0 {
					abstainOut++
				}
				outTools += min(len(got), 5)
			}
			ms := make([]Metrics, len(in))
			for i := range in {
				got, err := answer(c, &in[i], th)
				if err != nil {
					return nil, err
				}
				if len(got) == 0 {
					row.FalseAbstentions++
				}
				ms[i] = Score(in[i].Needs(), got)
			}
			row.InRecall5 = Mean(ms).Recall5
			if n := abstainOut + row.FalseAbstentions; n > 0 {
				row.Precision = float64(abstainOut) / float64(n)
			}
			row.Recall = float64(abstainOut) / float64(len(out))
			row.OutTools = float64(outTools) / float64(len(out))
			rep.Rows = append(rep.Rows, row)
		}
		reports = append(reports, rep)
	}
	return reports, nil
}
