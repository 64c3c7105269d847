// Package embedded is the default cards.Store: cards, embeddings and the
// change sequence in one bbolt file (dir/cards.db), no external service.
//
// Layout (bbolt buckets):
//
//	cards      tenant\x00server\x00name -> card (JSON, schemas byte-for-byte)
//	changes    seq (8 bytes, big endian) -> deleted flag (1 byte) + card key
//	changeidx  card key -> seq of its latest change
//	embeddings model -> (nested bucket) card key -> embedding record
//	graves     card key -> last version of a deleted card (8 bytes), so a
//	           re-created card continues its version sequence (server
//	           entries' too, under their server key)
//	servers    tenant\x00name\x00 (the server key) -> server entry (JSON)
//	learned    card key -> learned phrasings (JSON list, oldest first)
//	companions card key -> co-usage table (cards.Companions, JSON)
//
// A server entry's key is its ServerKey(tenant, name) encoded like a card
// key with an empty name; card names are never empty, so the two never
// collide in changes, changeidx or graves.
//
// Names follow the MCP tool-name rule and so never contain NUL, which makes
// the byte order of the keys the (tenant, server, name) order.
//
// Every write is one bbolt transaction, fsynced on commit: a failed batch
// writes nothing, and a crash loses no acknowledged write.
package embedded

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/seed0cff8200/cardex/cards"
)

// FileName is the database file inside the data directory.
const FileName = "cards.db"

// DefaultLockTimeout is how long Open waits for the data directory's lock.
const DefaultLockTimeout = 2 * time.Second

// ErrLocked is returned by Open when another process holds the data
// directory.
var ErrLocked = errors.New("data directory is in use by another cardex process")

var (
	bucketCards      = []byte("cards")
	bucketChanges    = []byte("changes")
	bucketChangeIdx  = []byte("changeidx")
	bucketEmbeddings = []byte("embeddings")
	bucketGraves     = []byte("graves")
	bucketServers    = []byte("servers")
	bucketLearned    = []byte("learned")
	bucketCompanions = []byte("companions")
)

// Option configures Open.
type Option func(*options)

type options struct {
	lockTimeout time.Duration
}

// WithLockTimeout sets how long Open waits for another process to release
// the data directory before it fails with ErrLocked (default 2s).
func WithLockTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.lockTimeout = d
		}
	}
}

// Store is the embedded cards.Store. It is safe for concurrent use.
type Store struct {
	db  *bolt.DB
	dir string
}

var _ cards.Store = (*Store)(nil)

// Open creates dir if needed and opens dir/cards.db.
func Open(dir string, opts ...Option) (*Store, error) {
	o := options{lockTimeout: DefaultLockTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if dir == "" {
		return nil, errors.New("embedded store: the data directory is required")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("embedded store: create data directory: %w", err)
	}
	path := filepath.Join(dir, FileName)
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: o.lockTimeout})
	if err != nil {
		if errors.Is(err, bolt.ErrTimeout) {
			return nil, fmt.Errorf("embedded store %s: %w (lock not acquired within %s)", dir, ErrLocked, o.lockTimeout)
		}
		return nil, fmt.Errorf("embedded store: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketCards, bucketChanges, bucketChangeIdx, bucketEmbeddings, bucketGraves, bucketServers, bucketLearned, bucketCompanions} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("embedded store: initialise %s: %w", path, err)
	}
	return &Store{db: db, dir: dir}, nil
}

// Dir is the data directory.
func (s *Store) Dir() string { return s.dir }

// Close releases the database and its lock.
func (s *Store) Close() error { return s.db.Close() }

// --- keys and records ---------------------------------------------------

func dbKey(k cards.Key) []byte {
	b := make([]byte, 0, len(k.Tenant)+len(k.Server)+len(k.Name)+2)
	b = append(b, k.Tenant...)
	b = append(b, 0)
	b = append(b, k.Server...)
	b = append(b, 0)
	return append(b, k.Name...)
}

func parseKey(b []byte) (cards.Key, bool) {
	parts := bytes.Split(b, []byte{0})
	if len(parts) != 3 {
		return cards.Key{}, false
	}
	return cards.Key{Tenant: string(parts[0]), Server: string(parts[1]), Name: string(parts[2])}, true
}

// validKey reports whether k could name a stored card. Keys that could not
// are never looked up, so a NUL in a part cannot alias another card's key.
func validKey(k cards.Key) bool {
	return cards.ValidName(k.Tenant) && cards.ValidName(k.Server) && cards.ValidName(k.Name)
}

func seqBytes(n uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], n)
	return b[:]
}

// encodeCard stores the card as JSON without HTML escaping, so schemas (raw
// JSON) are kept byte-for-byte as normalised.
func encodeCard(c *cards.Card) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(c); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

func decodeCard(v []byte) (cards.Card, error) {
	var c cards.Card
	if err := json.Unmarshal(v, &c); err != nil {
		return cards.Card{}, fmt.Errorf("embedded store: corrupt card record: %w", err)
	}
	return c, nil
}

// storeErr turns bbolt's "closed" into cards.ErrUnavailable.
func storeErr(err error) error {
	if errors.Is(err, bolt.ErrDatabaseNotOpen) {
		return fmt.Errorf("%w: embedded store is closed", cards.ErrUnavailable)
	}
	return err
}

// recordChange appends a change for key, dropping the key's older entry.
func recordChange(tx *bolt.Tx, key []byte, deleted bool) error {
	ch, idx := tx.Bucket(bucketChanges), tx.Bucket(bucketChangeIdx)
	if old := idx.Get(key); old != nil {
		if err := ch.Delete(old); err != nil {
			return err
		}
	}
	seq, err := ch.NextSequence()
	if err != nil {
		return err
	}
	v := make([]byte, 0, 1+len(key))
	if deleted {
		v = append(v, 1)
	} else {
		v = append(v, 0)
	}
	v = append(v, key...)
	sb := seqBytes(seq)
	if err := ch.Put(sb, v); err != nil {
		return err
	}
	return idx.Put(key, sb)
}

// --- cards --------------------------------------------------------------

// Put implements cards.Store.
func (s *Store) Put(ctx context.Context, cs []cards.Card) ([]cards.PutResult, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	norm, err := cards.NormalizeBatch(ctx, cs)
	if err != nil {
		return nil, err
	}
	return putBatch(ctx, s.db, cardRecords, norm)
}

// records says how one kind of catalogue entry (cards, server entries) is
// kept: its bucket, its key, its encoding and its put rule.
type records[T any] struct {
	bucket []byte
	key    func(*T) cards.Key
	decode func([]byte) (T, error)
	encode func(*T) ([]byte, error)
	stamp  func(*T, time.Time)
	plan   func(i int, x, stored *T, lastDeleted int64) (cards.PutResult, bool, error)
}

var cardRecords = records[cards.Card]{
	bucket: bucketCards, key: (*cards.Card).Key, decode: decodeCard, encode: encodeCard,
	stamp: func(c *cards.Card, t time.Time) { c.UpdatedAt = t }, plan: cards.PlanPut,
}

// putBatch writes a normalised batch of cards or server entries in one
// transaction: for each entry, the stored one and the last deleted version
// of its key (its grave) go to the put rule; an entry to write is stamped
// with the batch's time and stored, its grave cleared and its change
// recorded. A failure writes nothing.
func putBatch[T any](ctx context.Context, db *bolt.DB, r records[T], norm []T) ([]cards.PutResult, error) {
	results := make([]cards.PutResult, len(norm))
	if len(norm) == 0 {
		return results, nil
	}
	err := db.Update(func(tx *bolt.Tx) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		b, graves := tx.Bucket(r.bucket), tx.Bucket(bucketGraves)
		now := cards.Now()
		for i := range norm {
			x := &norm[i]
			k := dbKey(r.key(x))
			var stored *T
			if v := b.Get(k); v != nil {
				old, err := r.decode(v)
				if err != nil {
					return err
				}
				stored = &old
			}
			var lastDeleted int64
			if g := graves.Get(k); stored == nil && len(g) == 8 {
				lastDeleted = int64(binary.BigEndian.Uint64(g))
			}
			res, write, err := r.plan(i, x, stored, lastDeleted)
			if err != nil {
				return err
			}
			results[i] = res
			if !write {
				continue
			}
			if lastDeleted > 0 {
				if err := graves.Delete(k); err != nil {
					return err
				}
			}
			r.stamp(x, now)
			enc, err := r.encode(x)
			if err != nil {
				return err
			}
			if err := b.Put(k, enc); err != nil {
				return err
			}
			if err := recordChange(tx, k, false); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, storeErr(err)
	}
	return results, nil
}

// Get implements cards.Store.
func (s *Store) Get(ctx context.Context, k cards.Key) (cards.Card, error) {
	if err := ctx.Err(); err != nil {
		return cards.Card{}, err
	}
	notFound := fmt.Errorf("%w: card %s", cards.ErrNotFound, k)
	if !validKey(k) {
		return cards.Card{}, notFound
	}
	var c cards.Card
	err := s.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketCards).Get(dbKey(k))
		if v == nil {
			return notFound
		}
		var err error
		c, err = decodeCard(v)
		return err
	})
	if err != nil {
		return cards.Card{}, storeErr(err)
	}
	return c, nil
}

// encodeCursor and decodeCursor: the cursor is the base64url (unpadded) of
// the last returned card's server\x00name.
func encodeCursor(c *cards.Card) string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.Server + "\x00" + c.Name))
}

func decodeCursor(s string) ([]byte, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, cards.Invalid("cursor", "is not a cursor returned by a previous page")
	}
	parts := bytes.Split(b, []byte{0})
	if len(parts) != 2 || !cards.ValidName(string(parts[0])) || !cards.ValidName(string(parts[1])) {
		return nil, cards.Invalid("cursor", "is not a cursor returned by a previous page")
	}
	return b, nil
}

// List implements cards.Store.
func (s *Store) List(ctx context.Context, q cards.ListQuery) (cards.ListPage, error) {
	if err := ctx.Err(); err != nil {
		return cards.ListPage{}, err
	}
	limit, err := q.PageSize()
	if err != nil {
		return cards.ListPage{}, err
	}
	var after []byte
	if q.Cursor != "" {
		if after, err = decodeCursor(q.Cursor); err != nil {
			return cards.ListPage{}, err
		}
	}
	page := cards.ListPage{Cards: []cards.Card{}}
	if !cards.ValidName(q.Tenant) || (q.Server != "" && !cards.ValidName(q.Server)) {
		return page, nil // no card can match
	}
	prefix := append([]byte(q.Tenant), 0)
	if q.Server != "" {
		prefix = append(append(prefix, q.Server...), 0)
	}
	seek := prefix
	if after != nil {
		seek = append(append([]byte(q.Tenant), 0), after...)
		if bytes.Compare(seek, prefix) < 0 {
			seek = prefix
		}
	}
	err = s.db.View(func(tx *bolt.Tx) error {
		cur := tx.Bucket(bucketCards).Cursor()
		for k, v := cur.Seek(seek); k != nil && bytes.HasPrefix(k, prefix); k, v = cur.Next() {
			if after != nil && bytes.Equal(k, seek) {
				continue
			}
			c, err := decodeCard(v)
			if err != nil {
				return err
			}
			if len(q.Status) > 0 && !slices.Contains(q.Status, c.Status) {
				continue
			}
			if len(page.Cards) == limit {
				page.NextCursor = encodeCursor(&page.Cards[limit-1])
				return nil
			}
			page.Cards = append(page.Cards, c)
		}
		return nil
	})
	if err != nil {
		return cards.ListPage{}, storeErr(err)
	}
	return page, nil
}

// Delete implements cards.Store. The card's embeddings, learned
// phrasings and co-usage table go with it.
func (s *Store) Delete(ctx context.Context, k cards.Key, expectedVersion int64) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	notFound := fmt.Errorf("%w: card %s", cards.ErrNotFound, k)
	if !validKey(k) {
		return notFound
	}
	key := dbKey(k)
	err := s.db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket(bucketCards)
		v := b.Get(key)
		if v == nil {
			return notFound
		}
		stored, err := decodeCard(v)
		if err != nil {
			return err
		}
		if expectedVersion > 0 && stored.Version != expectedVersion {
			return fmt.Errorf("%w: card %s: expected version %d, stored version is %d",
				cards.ErrConflict, k, expectedVersion, stored.Version)
		}
		if err := b.Delete(key); err != nil {
			return err
		}
		if err := tx.Bucket(bucketGraves).Put(key, binary.BigEndian.AppendUint64(nil, uint64(stored.Version))); err != nil {
			return err
		}
		if err := deleteEmbeddings(tx, key); err != nil {
			return err
		}
		if err := tx.Bucket(bucketLearned).Delete(key); err != nil {
			return err
		}
		if err := tx.Bucket(bucketCompanions).Delete(key); err != nil {
			return err
		}
		return recordChange(tx, key, true)
	})
	return storeErr(err)
}

func deleteEmbeddings(tx *bolt.Tx, key []byte) error {
	root := tx.Bucket(bucketEmbeddings)
	var models [][]byte
	if err := root.ForEachBucket(func(m []byte) error {
		models = append(models, slices.Clone(m))
		return nil
	}); err != nil {
		return err
	}
	for _, m := range models {
		if err := root.Bucket(m).Delete(key); err != nil {
			return err
		}
	}
	return nil
}

// --- change sequence ----------------------------------------------------

// Seq implements cards.Store.
func (s *Store) Seq(ctx context.Context) (uint64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	var seq uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		seq = tx.Bucket(bucketChanges).Sequence()
		return nil
	})
	return seq, storeErr(err)
}

// Changes implements cards.Store. A limit <= 0 means no limit.
func (s *Store) Changes(ctx context.Context, since uint64, limit int) ([]cards.Change, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := []cards.Change{}
	if since == math.MaxUint64 {
		return out, nil
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		cur := tx.Bucket(bucketChanges).Cursor()
		for k, v := cur.Seek(seqBytes(since + 1)); k != nil; k, v = cur.Next() {
			if limit > 0 && len(out) == limit {
				break
			}
			if len(k) != 8 || len(v) < 1 {
				return fmt.Errorf("embedded store: corrupt change record %x", k)
			}
			key, ok := parseKey(v[1:])
			if !ok {
				return fmt.Errorf("embedded store: corrupt change record %x", k)
			}
			out = append(out, cards.Change{Seq: binary.BigEndian.Uint64(k), Key: key, Deleted: v[0] == 1})
		}
		return nil
	})
	if err != nil {
		return nil, storeErr(err)
	}
	return out, nil
}

// --- embeddings ---------------------------------------------------------

// encodeEmbedding: uvarint len(TextHash), TextHash, then the vector as
// little-endian float32.
func encodeEmbedding(e *cards.Embedding) []byte {
	b := make([]byte, 0, binary.MaxVarintLen64+len(e.TextHash)+4*len(e.Vector))
	b = binary.AppendUvarint(b, uint64(len(e.TextHash)))
	b = append(b, e.TextHash...)
	for _, f := range e.Vector {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(f))
	}
	return b
}

func decodeEmbedding(v []byte) (textHash string, vec []float32, err error) {
	n, w := binary.Uvarint(v)
	if w <= 0 || uint64(len(v)-w) < n || (uint64(len(v)-w)-n)%4 != 0 {
		return "", nil, errors.New("embedded store: corrupt embedding record")
	}
	textHash = string(v[w : w+int(n)])
	rest := v[w+int(n):]
	vec = make([]float32, len(rest)/4)
	for i := range vec {
		vec[i] = math.Float32frombits(binary.LittleEndian.Uint32(rest[4*i:]))
	}
	return textHash, vec, nil
}

// PutEmbeddings implements cards.Store.
func (s *Store) PutEmbeddings(ctx context.Context, es []cards.Embedding) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	for i := range es {
		if es[i].Model == "" {
			return cards.Invalid(fmt.Sprintf("embeddings[%d].model", i), "is required")
		}
	}
	if len(es) == 0 {
		return nil
	}
	err := s.db.Update(func(tx *bolt.Tx) error {
		cb, root := tx.Bucket(bucketCards), tx.Bucket(bucketEmbeddings)
		for i := range es {
			e := &es[i]
			if !validKey(e.Key) {
				continue
			}
			key := dbKey(e.Key)
			if cb.Get(key) == nil {
				continue // the card is gone: ignore its vector
			}
			mb, err := root.CreateBucketIfNotExists([]byte(e.Model))
			if err != nil {
				return err
			}
			if err := mb.Put(key, encodeEmbedding(e)); err != nil {
				return err
			}
		}
		return nil
	})
	return storeErr(err)
}

// Embeddings implements cards.Store.
func (s *Store) Embeddings(ctx context.Context, model string, keys []cards.Key) (map[cards.Key]cards.Embedding, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make(map[cards.Key]cards.Embedding, len(keys))
	if model == "" || len(keys) == 0 {
		return out, nil
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		mb := tx.Bucket(bucketEmbeddings).Bucket([]byte(model))
		if mb == nil {
			return nil
		}
		for _, k := range keys {
			if !validKey(k) {
				continue
			}
			v := mb.Get(dbKey(k))
			if v == nil {
				continue
			}
			th, vec, err := decodeEmbedding(v)
			if err != nil {
				return err
			}
			out[k] = cards.Embedding{Key: k, Model: model, TextHash: th, Vector: vec}
		}
		return nil
	})
	if err != nil {
		return nil, storeErr(err)
	}
	return out, nil
}
