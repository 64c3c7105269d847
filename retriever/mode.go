package retriever

import "github.com/seed0cff8200/cardex/cards"

// Mode selects which legs of the search rank a Discover request. Hybrid,
// the default, fuses both legs. The single-leg modes exist so that the
// evaluation can measure what each leg contributes through exactly the
// pipeline the service runs (validation, authorization, candidate-set
// filtering, pins, hydration); they are not exposed on the API.
type Mode string

// The modes. The zero value means ModeHybrid.
const (
	ModeHybrid   Mode = "hybrid"
	ModeLexical  Mode = "lexical"
	ModeSemantic Mode = "semantic"
)

// Modes lists every mode in a fixed order.
func Modes() []Mode { return []Mode{ModeLexical, ModeSemantic, ModeHybrid} }

func (m Mode) validate() error {
	switch m {
	case "", ModeHybrid, ModeLexical, ModeSemantic:
		return nil
	}
	return cards.Invalid("mode", "%q is not one of hybrid, lexical, semantic", m)
}

// singleLeg keeps only the leg a single-leg mode ranks by (the other is
// emptied) and reports whether the mode is single-leg. A single leg is
// ranked by reciprocal rank fusion whatever the request's fusion, because
// RRF of one leg is exactly that leg's order, whereas relative fusion with
// an empty leg and alpha at 0 or 1 would score every card 0.
func (m Mode) singleLeg(lex, sem []Hit) ([]Hit, []Hit, bool) {
	switch m {
	case ModeLexical:
		return lex, nil, true
	case ModeSemantic:
		return nil, sem, true
	}
	return lex, sem, false
}

// single reports whether the mode ranks by one leg alone.
func (m Mode) single() bool { return m == ModeLexical || m == ModeSemantic }
