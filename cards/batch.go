package cards

import (
	"context"
	"errors"
	"fmt"
)

// BatchItem names card i of a put batch in errors: "cards[3] billing/refund".
func BatchItem(i int, c *Card) string {
	if c.Server == "" && c.Name == "" {
		return fmt.Sprintf("cards[%d]", i)
	}
	return fmt.Sprintf("cards[%d] %s/%s", i, c.Server, c.Name)
}

// NormalizeBatch is the first step of every store's Put: it normalises a
// copy of each card and refuses a key that appears twice. Errors name the
// card (FieldError.Item is BatchItem). It stops between cards when ctx
// ends (the caller went away): compiling a thousand schemas is work.
func NormalizeBatch(ctx context.Context, cs []Card) ([]Card, error) {
	norm := make([]Card, len(cs))
	seen := make(map[Key]int, len(cs))
	for i := range cs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		c := cs[i].Clone()
		if err := Normalize(&c); err != nil {
			var fe *FieldError
			if errors.As(err, &fe) {
				out := *fe
				out.Item = BatchItem(i, &c)
				return nil, &out
			}
			return nil, fmt.Errorf("%s: %w", BatchItem(i, &c), err)
		}
		if j, dup := seen[c.Key()]; dup {
			return nil, &FieldError{
				Item:  BatchItem(i, &c),
				Field: "name",
				Msg:   fmt.Sprintf("duplicates cards[%d]: a card may appear only once in a batch", j),
			}
		}
		seen[c.Key()] = i
		norm[i] = c
	}
	return norm, nil
}

// PlanPut applies the put rules to card i of a normalised batch, given the
// stored card (nil when there is none) and the last version of a deleted
// card of that key (0 when there was none): optimistic concurrency
// (ErrConflict), Unchanged for identical content, otherwise the next version
// — monotonic across delete and re-create. Search examples follow the rules
// of examples.go (mergeExamples): c may take the stored ones. It sets
// c.Version and reports whether the card must be written.
func PlanPut(i int, c *Card, stored *Card, lastDeleted int64) (PutResult, bool, error) {
	res := PutResult{Key: c.Key()}
	switch {
	case c.Version > 0 && stored == nil:
		return res, false, fmt.Errorf("%w: %s (%s): expected version %d, but the card does not exist",
			ErrConflict, BatchItem(i, c), c.Key(), c.Version)
	case c.Version > 0 && c.Version != stored.Version:
		return res, false, fmt.Errorf("%w: %s (%s): expected version %d, stored version is %d",
			ErrConflict, BatchItem(i, c), c.Key(), c.Version, stored.Version)
	}
	res.ExamplesKept = mergeExamples(c, stored)
	if stored != nil && SameContent(c, stored) {
		res.Version, res.Outcome = stored.Version, Unchanged
		return res, false, nil
	}
	if stored != nil {
		c.Version, res.Outcome = stored.Version+1, Updated
	} else {
		c.Version, res.Outcome = lastDeleted+1, Created
	}
	res.Version = c.Version
	return res, true, nil
}
