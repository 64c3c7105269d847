package eval

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

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
// exactly what ReportOutcome(used_tool) does in the service — and the
// query's tools, in the order of its needs, are one session's co-usage
// (companions), as the service records the tools a session used.
type Warm struct {
	*InProcess
	train []Query
	// NoPhrasings and NoCompanions leave that lesson out of the replay.
	NoPhrasings, NoCompanions bool
	// Learned counts the (query, card) phrasings the replay added; CoUses
	// the sessions of two or more tools it recorded as co-usage.
	Learned, CoUses int
}

// NewWarm wraps an in-process backend.
func NewWarm(b *InProcess, train []Query) *Warm { return &Warm{InProcess: b, train: train} }

// Describe implements Backend.
func (w *Warm) Describe() string {
	var what []string
	if !w.NoPhrasings {
		what = append(what, "learned phrasings")
	}
	if !w.NoCompanions {
		what = append(what, "co-usage")
	}
	return fmt.Sprintf("%s; warm: outcomes of %d training queries replayed (%s)", w.InProcess.Describe(), len(w.train), strings.Join(what, ", "))
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
		var used []cards.Key
		for _, need := range q.Needs() {
			k, ok := byLabel[need[0]]
			if !ok {
				return fmt.Errorf("training query %s: unknown tool %q", q.ID, need[0])
			}
			used = append(used, k)
			if w.NoPhrasings {
				continue
			}
			changed, err := w.ret.Learn(ctx, k, q.Query)
			if err != nil {
				return fmt.Errorf("training query %s: %w", q.ID, err)
			}
			if changed {
				w.Learned++
			}
		}
		if w.NoCompanions {
			continue
		}
		uses := SessionCoUses(used)
		if _, err := w.ret.RecordCoUse(ctx, uses); err != nil {
			return fmt.Errorf("training query %s: %w", q.ID, err)
		}
		if len(uses) > 0 {
			w.CoUses++
		}
	}
	return nil
}

// SessionCoUses is the co-usage observation of one session that used
// tools in this order (each tool at its first use); none when it used
// fewer than two.
func SessionCoUses(used []cards.Key) []cards.CoUse {
	var tools []cards.Key
	for _, k := range used {
		if !slices.Contains(tools, k) {
			tools = append(tools, k)
		}
	}
	if len(tools) < 2 {
		return nil
	}
	return []cards.CoUse{{Tools: tools[:min(len(tools), cards.MaxSessionTools)]}}
}
