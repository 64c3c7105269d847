package retriever

import "math"

// ConfidenceModel maps what a ranked tool's evidence is to a calibrated
// probability that the tool fits the text it was ranked for: a logistic
// model over the lexical evidence (the IDF-weighted share of the query's
// terms the tool matched, Fused.Evidence), the cosine
// similarity, the fused score and 1/position in its ranked list.
//
// The default coefficients are fitted, by `cardex eval --fit-confidence`
// (docs/EVAL.md), on the labelled public datasets with the built-in
// embedder, each dataset weighted equally; another embedder's cosines live on
// another scale and want their own fit (WithConfidenceModel).
type ConfidenceModel struct {
	Bias, Evidence, Cosine, Fused, InvPosition float64
}

// DefaultConfidenceModel is the fit for the built-in embedder.
var DefaultConfidenceModel = ConfidenceModel{Bias: -4.342, Evidence: 0.804, Cosine: 1.540, Fused: 0.284, InvPosition: 2.960}

// Confidence is the model's probability for a tool at 1-based position pos
// of its list.
func (m ConfidenceModel) Confidence(f Fused, pos int) float64 {
	z := m.Bias + m.Evidence*f.Evidence + m.Cosine*f.Semantic + m.Fused*f.Score
	if pos > 0 {
		z += m.InvPosition / float64(pos)
	}
	return 1 / (1 + math.Exp(-z))
}

// ConfidenceFeatures are the model's inputs for a tool, in the order of
// ConfidenceModel's coefficients after Bias (for fitting).
func ConfidenceFeatures(f Fused, pos int) [4]float64 {
	inv := 0.0
	if pos > 0 {
		inv = 1 / float64(pos)
	}
	return [4]float64{f.Evidence, f.Semantic, f.Score, inv}
}

// WithConfidenceModel replaces the default confidence model.
func WithConfidenceModel(m ConfidenceModel) Option { return func(r *Retriever) { r.confidence = m } }

// DefaultMinConfidence is the confidence a ranked list's best tool needs for
// the list to be answered when a request names no minimum. It is the
// largest threshold that, in the out-of-catalogue experiment of every
// labelled dataset (cardex eval; docs/EVAL.md), costs the in-catalogue
// queries at most 0.005 of recall@5: on MetaTool an empty answer is then
// right 82 % of the time (abstention precision) and 5 % of the queries whose
// tools are absent get one (recall); on LiveMCPBench nothing answerable is
// lost.
const DefaultMinConfidence = 0.28

// WithMinConfidence sets the minimum confidence applied to requests that
// name none.
func WithMinConfidence(m float64) Option { return func(r *Retriever) { r.minConfidence = m } }
