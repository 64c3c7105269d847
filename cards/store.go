package cards

import (
	"context"
	"time"
)

// Outcome says what a put did to one card.
type Outcome string

// Put outcomes.
const (
	Created   Outcome = "created"
	Updated   Outcome = "updated"
	Unchanged Outcome = "unchanged"
)

// PutResult is the outcome of one card of a batch put.
type PutResult struct {
	Key     Key
	Version int64
	Outcome Outcome
	// ExamplesKept: the put's search examples were a model's and the card
	// holds a person's, which were kept (examples.go).
	ExamplesKept bool
}

// ListQuery selects cards for List. Tenant is required.
type ListQuery struct {
	Tenant string
	Server string   // optional: only this server
	Status []Status // optional: only these statuses
	Limit  int      // page size; <= 0 means the backend default (20)
	Cursor string   // opaque, from a previous page's NextCursor
}

// PageSize checks a listing request as every backend does (the tenant is
// required, the page size at most MaxPageSize) and returns the page size to
// use (DefaultPageSize for none).
func (q ListQuery) PageSize() (int, error) {
	if q.Tenant == "" {
		return 0, Invalid("tenant", "is required")
	}
	if q.Limit > MaxPageSize {
		return 0, Invalid("page_size", "is %d; the limit is %d", q.Limit, MaxPageSize)
	}
	if q.Limit <= 0 {
		return DefaultPageSize, nil
	}
	return q.Limit, nil
}

// ListPage is one page of cards ordered by (server, name).
type ListPage struct {
	Cards      []Card
	NextCursor string // empty on the last page
}

// Change is one entry of the change sequence: the card at Key was written or
// deleted at sequence number Seq (or its learned phrasings changed). A Key
// whose Name is empty (Key.IsServer) is a server entry's, ServerKey(tenant,
// server). Only the latest change per key is kept.
type Change struct {
	Seq     uint64
	Key     Key
	Deleted bool
}

// Embedding is a stored card vector, valid for one model and one card text.
type Embedding struct {
	Key      Key
	Model    string // embedder model id
	TextHash string // hash of the text the vector was computed from
	Vector   []float32
}

// Store is the persistence contract every backend implements and the
// conformance suite (cards/storetest) checks.
type Store interface {
	// Put normalises and writes cards atomically: either all are written or
	// none. A card whose Version is > 0 must match the stored version
	// (ErrConflict otherwise); Version 0 creates or overwrites. A card
	// whose content equals the stored one is Unchanged and keeps its version.
	// Two cards with the same key in one batch are invalid.
	Put(ctx context.Context, cs []Card) ([]PutResult, error)
	// Get returns one card or ErrNotFound.
	Get(ctx context.Context, k Key) (Card, error)
	// List pages through a tenant's cards in (server, name) order.
	List(ctx context.Context, q ListQuery) (ListPage, error)
	// Delete removes a card. expectedVersion > 0 must match (ErrConflict);
	// a missing card is ErrNotFound. Its embeddings go with it. Versions stay
	// monotonic: a re-created card continues after the deleted one's last
	// version, so a client holding an old version conflicts.
	Delete(ctx context.Context, k Key, expectedVersion int64) error

	// Seq is the current change sequence number (0 for an empty store).
	Seq(ctx context.Context) (uint64, error)
	// Changes returns up to limit changes with Seq > since, in order.
	Changes(ctx context.Context, since uint64, limit int) ([]Change, error)

	// PutEmbeddings stores vectors (replacing any for the same key and model).
	// Vectors for cards that no longer exist are ignored.
	PutEmbeddings(ctx context.Context, es []Embedding) error
	// Embeddings returns the stored vectors of one model for the given keys;
	// keys without a vector are absent from the map.
	Embeddings(ctx context.Context, model string, keys []Key) (map[Key]Embedding, error)

	// PutServers normalises and writes server entries atomically, with the
	// rules of Put: Version > 0 is an optimistic-concurrency check
	// (ErrConflict), identical content is Unchanged, versions are monotonic
	// across delete and re-create, and a key twice in one batch is invalid.
	// Each result's Key is ServerKey(tenant, name). Every written entry
	// appears in the change sequence under its ServerKey.
	PutServers(ctx context.Context, ss []ServerInfo) ([]PutResult, error)
	// GetServer returns one server entry or ErrNotFound.
	GetServer(ctx context.Context, tenant, name string) (ServerInfo, error)
	// Servers returns every server entry of a tenant, ordered by name.
	Servers(ctx context.Context, tenant string) ([]ServerInfo, error)
	// DeleteServer removes a server entry (its cards stay). expectedVersion
	// > 0 must match (ErrConflict); a missing entry is ErrNotFound. The
	// deletion appears in the change sequence under its ServerKey.
	DeleteServer(ctx context.Context, tenant, name string, expectedVersion int64) error

	// AddLearned adds phrasings learned from use to an existing card (any
	// status; ErrNotFound otherwise) under the rule of cards.AddLearned.
	// When that changes the card's phrasings, the card's entry in the change
	// sequence moves to a new sequence number (its version stays), so every
	// replica reloads it. Deleting a card deletes its phrasings.
	AddLearned(ctx context.Context, k Key, phrases ...string) (changed bool, err error)
	// Learned returns the learned phrasings of the given cards, oldest
	// first; cards without any are absent from the map.
	Learned(ctx context.Context, keys []Key) (map[Key][]string, error)

	// AddCompanions records co-usage observations, the tools sessions
	// used together (ValidateCoUses), under the rule of
	// cards.AddCompanions, all or none. Tools that are not cards (of any
	// status) are left out of their session (KeepCoUses). Every card whose table changed moves to a new sequence
	// number in the change sequence (its version stays), so every replica
	// reloads it. Deleting a card deletes its table.
	AddCompanions(ctx context.Context, uses []CoUse) (changed bool, err error)
	// Companions returns the co-usage tables of the given cards, as
	// stored; cards without one are absent from the map.
	Companions(ctx context.Context, keys []Key) (map[Key]Companions, error)

	Close() error
}

// Now is the clock stores use for UpdatedAt, truncated to microseconds so
// that every backend round-trips it exactly.
func Now() time.Time { return time.Now().UTC().Truncate(time.Microsecond) }

// DefaultPageSize and MaxPageSize bound List.
const (
	DefaultPageSize = 20
	MaxPageSize     = 100
)
