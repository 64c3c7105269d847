package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/seed0cff8200/cardex/cards"
)

// --- server entries -----------------------------------------------------

func validServer(tenant, name string) bool { return cards.ValidName(tenant) && cards.ValidName(name) }

func decodeServer(v []byte) (cards.ServerInfo, error) {
	var si cards.ServerInfo
	if err := json.Unmarshal(v, &si); err != nil {
		return cards.ServerInfo{}, fmt.Errorf("embedded store: corrupt server record: %w", err)
	}
	return si, nil
}

// PutServers implements cards.Store.
func (s *Store) PutServers(ctx context.Context, ss []cards.ServerInfo) ([]cards.PutResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	norm, err := cards.NormalizeServerBatch(ss)
	if err != nil {
		return nil, err
	}
	return putBatch(ctx, s.db, serverRecords, norm)
}

var serverRecords = records[cards.ServerInfo]{
	bucket: bucketServers, key: (*cards.ServerInfo).Key, decode: decodeServer,
	encode: func(si *cards.ServerInfo) ([]byte, error) { return json.Marshal(si) },
	stamp:  func(si *cards.ServerInfo, t time.Time) { si.UpdatedAt = t }, plan: cards.PlanPutServer,
}

// GetServer implements cards.Store.
func (s *Store) GetServer(ctx context.Context, tenant, name string) (cards.ServerInfo, error) {
	if err := ctx.Err(); err != nil {
		return cards.ServerInfo{}, err
	}
	notFound := fmt.Errorf("%w: server %s/%s", cards.ErrNotFound, tenant, name)
	if !validServer(tenant, name) {
		return cards.ServerInfo{}, notFound
	}
	var si cards.ServerInfo
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketServers).Get(dbKey(cards.ServerKey(tenant, name)))
		if v == nil {
			return notFound
		}
		var err error
		si, err = decodeServer(v)
		return err
	})
	if err != nil {
		return cards.ServerInfo{}, storeErr(err)
	}
	return si, nil
}

// Servers implements cards.Store.
func (s *Store) Servers(ctx context.Context, tenant string) ([]cards.ServerInfo, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if tenant == "" {
		return nil, cards.Invalid("tenant", "is required")
	}
	out := []cards.ServerInfo{}
	if !cards.ValidName(tenant) {
		return out, nil
	}
	// Keys are tenant\x00name\x00: within the tenant's prefix, byte order
	// is name order (NUL sorts before every name byte).
	prefix := append([]byte(tenant), 0)
	err := s.db.View(func(tx *bolt.Tx) error {
		cur := tx.Bucket(bucketServers).Cursor()
		for k, v := cur.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = cur.Next() {
			si, err := decodeServer(v)
			if err != nil {
				return err
			}
			out = append(out, si)
		}
		return nil
	})
	if err != nil {
		return nil, storeErr(err)
	}
	return out, nil
}

// DeleteServer implements cards.Store.
func (s *Store) DeleteServer(ctx context.Context, tenant, name string, expectedVersion int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	notFound := fmt.Errorf("%w: server %s/%s", cards.ErrNotFound, tenant, name)
	if !validServer(tenant, name) {
		return notFound
	}
	key := dbKey(cards.ServerKey(tenant, name))
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketServers)
		v := b.Get(key)
		if v == nil {
			return notFound
		}
		stored, err := decodeServer(v)
		if err != nil {
			return err
		}
		if expectedVersion > 0 && stored.Version != expectedVersion {
			return fmt.Errorf("%w: server %s/%s: expected version %d, stored version is %d",
				cards.ErrConflict, tenant, name, expectedVersion, stored.Version)
		}
		if err := b.Delete(key); err != nil {
			return err
		}
		if err := tx.Bucket(bucketGraves).Put(key, binary.BigEndian.AppendUint64(nil, uint64(stored.Version))); err != nil {
			return err
		}
		return recordChange(tx, key, true)
	})
	return storeErr(err)
}

// --- learned phrasings --------------------------------------------------

func decodeLearned(v []byte) ([]string, error) {
	var out []string
	if err := json.Unmarshal(v, &out); err != nil {
		return nil, fmt.Errorf("embedded store: corrupt learned-phrasings record: %w", err)
	}
	return out, nil
}

// AddLearned implements cards.Store.
func (s *Store) AddLearned(ctx context.Context, k cards.Key, phrases ...string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	notFound := fmt.Errorf("%w: card %s", cards.ErrNotFound, k)
	if !validKey(k) {
		return false, notFound
	}
	key := dbKey(k)
	changed := false
	err := s.db.Update(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketCards).Get(key) == nil {
			return notFound
		}
		lb := tx.Bucket(bucketLearned)
		var have []string
		if v := lb.Get(key); v != nil {
			var err error
			if have, err = decodeLearned(v); err != nil {
				return err
			}
		}
		next, ch := cards.AddLearned(have, phrases...)
		if !ch {
			return nil
		}
		enc, err := json.Marshal(next)
		if err != nil {
			return err
		}
		if err := lb.Put(key, enc); err != nil {
			return err
		}
		changed = true
		return recordChange(tx, key, false)
	})
	if err != nil {
		return false, storeErr(err)
	}
	return changed, nil
}

// Learned implements cards.Store.
func (s *Store) Learned(ctx context.Context, keys []cards.Key) (map[cards.Key][]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make(map[cards.Key][]string)
	if len(keys) == 0 {
		return out, nil
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		lb := tx.Bucket(bucketLearned)
		for _, k := range keys {
			if !validKey(k) {
				continue
			}
			v := lb.Get(dbKey(k))
			if v == nil {
				continue
			}
			ps, err := decodeLearned(v)
			if err != nil {
				return err
			}
			if len(ps) > 0 {
				out[k] = ps
			}
		}
		return nil
	})
	if err != nil {
		return nil, storeErr(err)
	}
	return out, nil
}
