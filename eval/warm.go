package eval

import (
	"context"
	"fmt"
	"hash/fnv"

	"github.com/seed0cff8200/cardex/cards"
)

// SplitQueries divides queries into two halves that never overlap: train
// (whose outcomes are replayed) and test (which is measured). A query's half
// is fixed by a hash of its id, so the split does not depend on file order
// and is the same on every run.
func SplitQueries(qs []Query) (train, test []Query) {
	for _, q := range qs {
		h := fnv.New32a()
		h.Write([]byte(q.ID))
		if h.Sum32()%2 == 0 {
			train = append(train, q)
		} else {
			test = append(test, q)
		}
	}
	return train, test
}

// Warm is an in-process backend that, once the cards are registered,
// replays the outcomes of training queries before any query is measured:
// for each need of each training query, the need's canonical tool is
// reported used, so the query becomes a learned phrasing of that card —
// exactly what ReportOutcome(used_tool) does in the service.
type Warm struct {
	*InProcess
	train []Query
	// Learned counts the (query, card) phrasings the replay added.
	Learned int
}

// NewWarm wraps an in-process backend.
func NewWarm(b *InProcess, train []Query) *Warm { return &Warm{InProcess: b, train: train} }

// Describe implements Backend.
func (w *Warm) Describe() string {
	return fmt.Sprintf("%s; warm: outcomes of %d training queries replayed", w.InProcess.Describe(), len(w.train))
}

// Register implements Backend: register, then replay the training outcomes.
func (w *Warm) Register(ctx context.Context, cat *Catalog) error {
	if err := w.InProcess.Register(ctx, cat); err != nil {
		return err
	}
	byLabel := make(map[string]cards.Key, len(cat.Cards))
	for _, c := range cat.Cards {
		byLabel[cat.Label(c.Server, c.Name)] = c.Key()
	}
	for _, q := range w.train {
		for _, need := range q.Needs() {
			k, ok := byLabel[need[0]]
			if !ok {
				return fmt.Errorf("training query %s: unknown tool %q", q.ID, need[0])
			}
			changed, err := w.ret.Learn(ctx, k, q.Query)
			if err != nil {
				return fmt.Errorf("training query %s: %w", q.ID, err)
			}
			if changed {
				w.Learned++
			}
		}
	}
	return nil
}
