package eval

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/retriever"
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

// Lesson is what one session of use teaches: the phrasings its outcomes
// confirmed (a tool and the request it served) and the tools it used, in
// the order first used (its co-usage). Tools are named by their labels.
type Lesson struct {
	Source    string // where it comes from, for errors (a query id, a log)
	Phrasings []Phrasing
	Used      []string
}

// Phrasing is a request that a tool served.
type Phrasing struct{ Label, Text string }

// QueryLessons are the outcomes of labelled queries: for each need, the
// need's canonical tool reported used — the query becomes a learned
// phrasing of that card, exactly what ReportOutcome(used_tool) does in the
// service — and the query's tools, in the order of its needs, one
// session's co-usage.
func QueryLessons(qs []Query) []Lesson {
	out := make([]Lesson, 0, len(qs))
	for _, q := range qs {
		l := Lesson{Source: "training query " + q.ID}
		for _, need := range q.Needs() {
			l.Phrasings = append(l.Phrasings, Phrasing{Label: need[0], Text: q.Query})
			l.Used = append(l.Used, need[0])
		}
		out = append(out, l)
	}
	return out
}

// Warm is an in-process backend that, once the cards are registered,
// replays lessons (QueryLessons of a training set, or a feedback log's)
// before any query is measured: learned phrasings through Retriever.Learn
// and co-usage through Retriever.RecordCoUse, as the service learns them.
type Warm struct {
	*InProcess
	lessons []Lesson
	// NoPhrasings and NoCompanions leave that lesson out of the replay.
	NoPhrasings, NoCompanions bool
	// Pins are labels of tools pinned to every discovery as hot tools
	// (what `cardex serve --auto-pin-hot` does with the most used ones).
	Pins []string
	// Through, if set, is what the lessons go through instead of the
	// retriever itself (the service's guard, say): it gets the registered
	// retriever and store, and returns where to send the lessons and a
	// function that waits until they are dealt with.
	Through func(r *retriever.Retriever, st cards.Store) (Learning, func() error)
	// Learned counts the (text, card) phrasings the replay added; CoUses
	// the sessions of two or more tools it recorded as co-usage.
	Learned, CoUses int

	pins [][2]string
}

// Learning takes lessons: the retriever itself, or something in front of
// it.
type Learning interface {
	Learn(ctx context.Context, k cards.Key, phrases ...string) (bool, error)
	RecordCoUse(ctx context.Context, uses []cards.CoUse) (bool, error)
}

// Discover implements Backend: the in-process pipeline, with the pins.
func (w *Warm) Discover(ctx context.Context, s Search) ([]Found, error) {
	s.HotPins = w.pins
	return w.InProcess.Discover(ctx, s)
}

// NewWarm wraps an in-process backend.
func NewWarm(b *InProcess, lessons []Lesson) *Warm { return &Warm{InProcess: b, lessons: lessons} }

// Describe implements Backend.
func (w *Warm) Describe() string {
	var what []string
	if !w.NoPhrasings {
		what = append(what, "learned phrasings")
	}
	if !w.NoCompanions {
		what = append(what, "co-usage")
	}
	return fmt.Sprintf("%s; warm: %d sessions of outcomes replayed (%s)", w.InProcess.Describe(), len(w.lessons), strings.Join(what, ", "))
}

// Register implements Backend: register, then replay the lessons. A lesson
// naming a tool the catalogue lacks is an error.
func (w *Warm) Register(ctx context.Context, cat *Catalog) error {
	if err := w.InProcess.Register(ctx, cat); err != nil {
		return err
	}
	byLabel := make(map[string]cards.Key, len(cat.Cards))
	for _, c := range cat.Cards {
		byLabel[cat.Label(c.Server, c.Name)] = c.Key()
	}
	key := func(l *Lesson, label string) (cards.Key, error) {
		k, ok := byLabel[label]
		if !ok {
			return k, fmt.Errorf("%s: unknown tool %q", l.Source, label)
		}
		return k, nil
	}
	w.pins = nil
	for _, p := range w.Pins {
		k, ok := byLabel[p]
		if !ok {
			return fmt.Errorf("pin: unknown tool %q", p)
		}
		w.pins = append(w.pins, [2]string{k.Server, k.Name})
	}
	var learn Learning = w.ret
	wait := func() error { return nil }
	if w.Through != nil {
		learn, wait = w.Through(w.ret, w.store)
	}
	for i := range w.lessons {
		l := &w.lessons[i]
		if !w.NoPhrasings {
			for _, p := range l.Phrasings {
				k, err := key(l, p.Label)
				if err != nil {
					return err
				}
				changed, err := learn.Learn(ctx, k, p.Text)
				if err != nil {
					return fmt.Errorf("%s: %w", l.Source, err)
				}
				if changed {
					w.Learned++
				}
			}
		}
		if w.NoCompanions {
			continue
		}
		var used []cards.Key
		for _, label := range l.Used {
			k, err := key(l, label)
			if err != nil {
				return err
			}
			used = append(used, k)
		}
		uses := SessionCoUses(used)
		if _, err := learn.RecordCoUse(ctx, uses); err != nil {
			return fmt.Errorf("%s: %w", l.Source, err)
		}
		if len(uses) > 0 {
			w.CoUses++
		}
	}
	if err := wait(); err != nil {
		return err
	}
	return w.ret.Sync(ctx)
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
