// Package audittrail is the append-only record of what changed the
// catalogue and of the security decisions taken on the way: every catalogue
// write (who, what, the version before and after), every AuthorizeCall
// decision, and every refused credential, binding or rate. It sits beside
// the call audit of call_tool (upstream.Audit) and never holds request
// bodies, arguments, queries or card text.
package audittrail

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"sync"
	"time"
)

// Entry types.
const (
	// TypeCatalogWrite: a card created, updated, left unchanged or
	// deleted, or a write that failed (Outcome "failed", nothing written).
	TypeCatalogWrite = "catalog_write"
	// TypeAuthorize: an AuthorizeCall decision.
	TypeAuthorize = "authorize"
	// TypeAuthentication: a call refused for its credential (missing,
	// unknown or of the wrong role) or for a caller that disagrees with
	// the credential's binding.
	TypeAuthentication = "authentication"
	// TypeRateLimit: a call refused by a rate or concurrency limit.
	TypeRateLimit = "rate_limit"
	// TypeEvaluation: a discovery marked as an evaluation's (answered,
	// but kept out of the discovery and feedback logs): who asked, for
	// which tenant, how many tools it was answered.
	TypeEvaluation = "evaluation"
)

// Entry is one line of the trail.
type Entry struct {
	Time time.Time `json:"time"`
	Type string    `json:"type"`
	// Method is the RPC (PutCards, AuthorizeCall, ...).
	Method string `json:"method"`
	// Principal names the credential: a token's name, jwt:<issuer>,
	// "unauthenticated", or "" when none was accepted.
	Principal string `json:"principal,omitempty"`
	// Peer is the client's network address.
	Peer        string `json:"peer,omitempty"`
	Tenant      string `json:"tenant,omitempty"`
	SubjectHash string `json:"subject_hash,omitempty"`
	Server      string `json:"server,omitempty"`
	Name        string `json:"name,omitempty"`
	// Outcome: created, updated, unchanged, deleted, failed (writes); the
	// decision (authorize); refused (authentication, rate limits).
	Outcome string `json:"outcome"`
	// BeforeVersion and AfterVersion of a written card (0: none).
	BeforeVersion int64 `json:"before_version,omitempty"`
	AfterVersion  int64 `json:"after_version,omitempty"`
	// CardVersion is the version an AuthorizeCall decision was taken on.
	CardVersion int64 `json:"card_version,omitempty"`
	// Detail says why (an error code and message without request content).
	Detail string `json:"detail,omitempty"`
}

// Trail is an append-only JSON Lines file. Every entry is written with one
// write(2) as it happens (no buffering, so a crash of cardex loses none);
// catalogue writes are also synced to disk. A nil *Trail records nothing.
type Trail struct {
	mu  sync.Mutex
	f   *os.File
	key []byte
	now func() time.Time
}

// Open opens (or creates, mode 0600) path for appending. key keys the
// subject pseudonym, as in the discovery log.
func Open(path string, key []byte) (*Trail, error) {
	if len(key) == 0 {
		return nil, errors.New("audit trail: empty hashing key")
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &Trail{f: f, key: key, now: time.Now}, nil
}

// Append records entries of one subject (given in clear, stored as a
// keyed hash; "" for none) with one write, synced when it holds a
// catalogue write.
func (t *Trail) Append(subject string, es ...Entry) error {
	if t == nil || len(es) == 0 {
		return nil
	}
	hash := ""
	if subject != "" {
		m := hmac.New(sha256.New, t.key)
		m.Write([]byte(subject))
		hash = hex.EncodeToString(m.Sum(nil)[:12])
	}
	var buf []byte
	sync := false
	now := t.now().UTC()
	for _, e := range es {
		if e.Time.IsZero() {
			e.Time = now
		}
		e.SubjectHash = hash
		b, err := json.Marshal(e)
		if err != nil {
			return err
		}
		buf = append(append(buf, b...), '\n')
		sync = sync || e.Type == TypeCatalogWrite
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, err := t.f.Write(buf); err != nil {
		return err
	}
	if sync {
		return t.f.Sync()
	}
	return nil
}

// Close syncs and closes the file.
func (t *Trail) Close() error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	return errors.Join(t.f.Sync(), t.f.Close())
}
