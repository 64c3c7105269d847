// Package discoverylog appends one JSON line per discovery to a file in the
// data directory, for offline recall measurement and miss mining.
package discoverylog

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
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
	ID             string     `json:"id"`
	Time           time.Time  `json:"time"`
	Tenant         string     `json:"tenant"`
	SubjectHash    string     `json:"subject_hash,omitempty"`
	SessionID      string     `json:"session_id,omitempty"`
	Query          string     `json:"query,omitempty"`
	QueryHash      string     `json:"query_hash,omitempty"`
	TopK           int        `json:"top_k"`
	Returned       []Returned `json:"returned"`
	CandidateCount int        `json:"candidate_count"`
	LatencyMS      float64    `json:"latency_ms"`
}

// Log is an append-only JSON Lines file. Safe for concurrent use.
type Log struct {
	mu   sync.Mutex
	f    *os.File
	w    *bufio.Writer
	mode QueryMode
}

// Open opens (or creates) path for appending.
func Open(path string, mode QueryMode) (*Log, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &Log{f: f, w: bufio.NewWriter(f), mode: mode}, nil
}

// Hash is the (unsalted) SHA-256 prefix used for subjects and queries.
func Hash(s string) string {
	if s == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:12])
}

// Append records one discovery. subject and query are given in clear and
// recorded as the log's mode says (the subject is always hashed).
func (l *Log) Append(e Entry, subject, query string) error {
	e.SubjectHash = Hash(subject)
	switch l.mode {
	case QueryRaw:
		e.Query = query
	case QueryHash:
		e.QueryHash = Hash(query)
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
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
