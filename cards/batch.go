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
	return normalizeBatch(ctx, cs, func(c Card) Card { return c.Clone() }, Normalize, (*Card).Key, BatchItem, "card")
}

// normalizeBatch normalises a copy of each entry of a batch of cards or
// server entries and refuses a key that appears twice; errors name the
// entry with item.
func normalizeBatch[T any](ctx context.Context, in []T, clone func(T) T, normalize func(*T) error,
	key func(*T) Key, item func(int, *T) string, noun string) ([]T, error) {
	norm := make([]T, len(in))
	seen := make(map[Key]int, len(in))
	for i := range in {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		x := clone(in[i])
		if err := normalize(&x); err != nil {
			var fe *FieldError
			if errors.As(err, &fe) {
				out := *fe
				out.Item = item(i, &x)
				return nil, &out
			}
			return nil, fmt.Errorf("%s: %w", item(i, &x), err)
		}
		if j, dup := seen[key(&x)]; dup {
			return nil, &FieldError{
				Item:  item(i, &x),
				Field: "name",
				Msg:   fmt.Sprintf("duplicates %ss[%d]: a %s may appear only once in a batch", noun, j, noun),
			}
		}
		seen[key(&x)] = i
		norm[i] = x
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
	who := fmt.Sprintf("%s (%s)", BatchItem(i, c), c.Key())
	if err := checkVersion(who, "card", c.Version, stored, func(s *Card) int64 { return s.Version }); err != nil {
		return PutResult{Key: c.Key()}, false, err
	}
	kept := mergeExamples(c, stored)
	res, write := nextVersion(c.Key(), &c.Version, stored, func(s *Card) int64 { return s.Version }, func(s *Card) bool { return SameContent(c, s) }, lastDeleted)
	res.ExamplesKept = kept
	return res, write, nil
}

// checkVersion is the optimistic-concurrency rule of every put: a version
// given (> 0) must be the stored one's. who and noun name the entry in the
// error ("cards[3] billing/refund (acme/billing/refund)", "card").
func checkVersion[T any](who, noun string, version int64, stored *T, storedVersion func(*T) int64) error {
	switch {
	case version > 0 && stored == nil:
		return fmt.Errorf("%w: %s: expected version %d, but the %s does not exist", ErrConflict, who, version, noun)
	case version > 0 && version != storedVersion(stored):
		return fmt.Errorf("%w: %s: expected version %d, stored version is %d", ErrConflict, who, version, storedVersion(stored))
	}
	return nil
}

// nextVersion is the versioning rule of every put: Unchanged when the
// stored entry has the same content, otherwise the next version (the
// stored one's + 1, or, when there is none, the last deleted one's + 1, so
// versions stay monotonic across delete and re-create), set in *version.
// It reports whether the entry must be written.
func nextVersion[T any](key Key, version *int64, stored *T, storedVersion func(*T) int64, same func(*T) bool, lastDeleted int64) (PutResult, bool) {
	res := PutResult{Key: key}
	switch {
	case stored != nil && same(stored):
		res.Version, res.Outcome = storedVersion(stored), Unchanged
		return res, false
	case stored != nil:
		*version, res.Outcome = storedVersion(stored)+1, Updated
	default:
		*version, res.Outcome = lastDeleted+1, Created
	}
	res.Version = *version
	return res, true
}

// PlanBatch plans a normalised batch of cards (plan: PlanPut) or server
// entries (PlanPutServer) from the stored entries and the last deleted
// versions of its keys: every entry's result, and the indexes of the
// entries to write. The first conflict fails the whole batch.
func PlanBatch[T any](norm []T, key func(*T) Key, stored map[Key]T, lastDeleted map[Key]int64,
	plan func(i int, x *T, stored *T, lastDeleted int64) (PutResult, bool, error)) ([]PutResult, []int, error) {
	results := make([]PutResult, len(norm))
	var writes []int
	for i := range norm {
		x := &norm[i]
		var old *T
		if o, ok := stored[key(x)]; ok {
			old = &o
		}
		res, write, err := plan(i, x, old, lastDeleted[key(x)])
		if err != nil {
			return nil, nil, err
		}
		results[i] = res
		if write {
			writes = append(writes, i)
		}
	}
	return results, writes, nil
}
