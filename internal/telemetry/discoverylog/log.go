// Package discoverylog appends one JSON line per discovery to a file in the
// data directory, for offline recall measurement and miss mining.
package discoverylog

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"
	"sync"
	"time"
)

// QueryMode says how the query text is recorded.
type QueryMode string

// Query modes.
const (
	QueryRaw  QueryMode = "raw"
	QueryHash QueryMode = "hash"
	QueryOff  QueryMode = "off"
)

// ParseQueryMode accepts raw, hash or off.
func ParseQueryMode(s string) (QueryMode, error) {
	switch m := QueryMode(s); m {
	case QueryRaw, QueryHash, QueryOff:
		return m, nil
	}
	return "", fmt.Errorf("query log mode %q is not one of raw, hash, off", s)
}

// Returned is one tool of a logged shortlist.
type Returned struct {
	Server string  `json:"server"`
	Name   string  `json:"name"`
	Score  float64 `json:"score"`
	Pinned bool    `json:"pinned,omitempty"`
}

// Entry is one discovery as logged.
type Entry struct {
	ID          string    `json:"id"`
	Time        time.Time `json:"time"`
	Tenant      string    `json:"tenant"`
	SubjectHash string    `json:"subject_hash,omitempty"`
	SessionID   string    `json:"session_id,omitempty"`
	Query       string    `json:"query,omitempty"`
	QueryHash   string    `json:"query_hash,omitempty"`
	// Intents are given to Append in clear and recorded as the query is:
	// raw here, hashed in IntentHashes, or not at all.
	Intents        []string   `json:"intents,omitempty"`
	IntentHashes   []string   `json:"intent_hashes,omitempty"`
	TopK           int        `json:"top_k"`
	Returned       []Returned `json:"returned"`
	CandidateCount int        `json:"candidate_count"`
	LatencyMS      float64    `json:"latency_ms"`
	LowConfidence  bool       `json:"low_confidence,omitempty"`
	Degraded       bool       `json:"degraded,omitempty"`
	Abstained      bool       `json:"abstained,omitempty"`
}

// Sink receives every entry as logged (subject and query already hashed or
// dropped as configured), e.g. to mirror it into PostgreSQL.
type Sink interface{ Discovery(Entry) }

// Log is an append-only JSON Lines file. Safe for concurrent use.
type Log struct {
	mu    sync.Mutex
	f     *os.File
	w     *bufio.Writer
	mode  QueryMode
	key   []byte
	sinks []Sink
}

// AddSink mirrors every later entry to s. Call before the log is shared.
func (l *Log) AddSink(s Sink) { l.sinks = append(l.sinks, s) }

// Open opens (or creates) path for appending. key keys the HMAC that
// pseudonymises subjects (and queries in hash mode): without the key a
// hashed e-mail address cannot be confirmed by guessing. It must not be empty.
func Open(path string, mode QueryMode, key []byte) (*Log, error) {
	if len(key) == 0 {
		return nil, errors.New("discovery log: empty hashing key")
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &Log{f: f, w: bufio.NewWriter(f), mode: mode, key: key}, nil
}

// LoadOrCreateKey reads the hashing key kept at path, creating a random one
// (0600) on first use, so hashes stay comparable across restarts.
func LoadOrCreateKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err == nil {
		k, derr := hex.DecodeString(strings.TrimSpace(string(b)))
		if derr != nil || len(k) < 16 {
			return nil, fmt.Errorf("%s: not a hex key of at least 16 bytes", path)
		}
		return k, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	if err := os.WriteFile(path, []byte(hex.EncodeToString(k)+"\n"), 0o600); err != nil {
		return nil, err
	}
	return k, nil
}

// Hash is the keyed pseudonym of s (HMAC-SHA-256, 24 hex digits); "" for "".
func (l *Log) Hash(s string) string {
	if s == "" {
		return ""
	}
	m := hmac.New(sha256.New, l.key)
	m.Write([]byte(s))
	return hex.EncodeToString(m.Sum(nil)[:12])
}

// Append records one discovery. subject, query and e.Intents are given in
// clear and recorded as the log's mode says (the subject is always hashed).
func (l *Log) Append(e Entry, subject, query string) error {
	e.SubjectHash = l.Hash(subject)
	intents := e.Intents
	e.Intents = nil
	switch l.mode {
	case QueryRaw:
		e.Query = query
		e.Intents = intents
	case QueryHash:
		e.QueryHash = l.Hash(query)
		for _, in := range intents {
			e.IntentHashes = append(e.IntentHashes, l.Hash(in))
		}
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	for _, s := range l.sinks {
		s.Discovery(e)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.w.Write(append(b, '\n')); err != nil {
		return err
	}
	// Flush per line: a line is small, and a crash must not lose a
	// buffered tail. fsync is left to Close; the log is telemetry.
	return l.w.Flush()
}

// Close flushes, syncs and closes the file.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.w.Flush(); err != nil {
		l.f.Close()
		return err
	}
	if err := l.f.Sync(); err != nil {
		l.f.Close()
		return err
	}
	return l.f.Close()
}
