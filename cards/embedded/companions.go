package embedded

import (
	"context"
	"encoding/json"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/seed0cff8200/cardex/cards"
)

// --- co-usage -------------------------------------------------------------

func decodeCompanions(v []byte) (cards.Companions, error) {
	var cs cards.Companions
	if err := json.Unmarshal(v, &cs); err != nil {
		return cards.Companions{}, fmt.Errorf("embedded store: corrupt co-usage record: %w", err)
	}
	return cs, nil
}

// AddCompanions implements cards.Store.
func (s *Store) AddCompanions(ctx context.Context, uses []cards.CoUse) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := cards.ValidateCoUses(uses); err != nil {
		return false, err
	}
	now := cards.Now()
	changed := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		cb, tb := tx.Bucket(bucketCards), tx.Bucket(bucketCompanions)
		exists := func(k cards.Key) bool { return validKey(k) && cb.Get(dbKey(k)) != nil }
		kept := cards.KeepCoUses(uses, exists)
		for _, k := range cards.CoUseKeys(kept) {
			key := dbKey(k)
			var have cards.Companions
			if v := tb.Get(key); v != nil {
				var err error
				if have, err = decodeCompanions(v); err != nil {
					return err
				}
			}
			next, ch := cards.AddCompanions(have, k, now, kept...)
			if !ch {
				continue
			}
			enc, err := json.Marshal(next)
			if err != nil {
				return err
			}
			if err := tb.Put(key, enc); err != nil {
				return err
			}
			if err := recordChange(tx, key, false); err != nil {
				return err
			}
			changed = true
		}
		return nil
	})
	if err != nil {
		return false, storeErr(err)
	}
	return changed, nil
}

// Companions implements cards.Store.
func (s *Store) Companions(ctx context.Context, keys []cards.Key) (map[cards.Key]cards.Companions, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make(map[cards.Key]cards.Companions)
	if len(keys) == 0 {
		return out, nil
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		tb := tx.Bucket(bucketCompanions)
		for _, k := range keys {
			if !validKey(k) {
				continue
			}
			v := tb.Get(dbKey(k))
			if v == nil {
				continue
			}
			cs, err := decodeCompanions(v)
			if err != nil {
				return err
			}
			if len(cs.Tools) > 0 {
				out[k] = cs
			}
		}
		return nil
	})
	if err != nil {
		return nil, storeErr(err)
	}
	return out, nil
}
