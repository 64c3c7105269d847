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
	"hash"
	"io/fs"
	"os"
	"strings"
	"sync"
	"sync/atomic"
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

// QueueLen is how many entries may wait for the log's writer. Append never
// waits: past this many, an entry is dropped and counted (Dropped).
const QueueLen = 4096

// Log is an append-only JSON Lines file. Safe for concurrent use.
//
// Append only queues the entry: one writer goroutine hashes, encodes and
// writes the entries in order, flushing whenever the queue runs empty, so a
// discovery never waits for the file. Flush waits for what was queued
// before it; Close writes everything queued, then syncs and closes.
type Log struct {
	f     *os.File
	w     *bufio.Writer
	mode  QueryMode
	key   []byte
	sinks []Sink

	mu      sync.RWMutex // guards closed against sends on a closed queue
	closed  bool
	queue   chan item
	done    chan struct{} // closed when the writer has written everything
	dropped atomic.Uint64

	errMu sync.Mutex
	err   error // the writer's first write error

	// The writer's own: its HMAC (reset for each hash), the last subject
	// it hashed with that hash, and the buffer it encodes a line in.
	mac             hash.Hash
	lastSubject     string
	lastSubjectHash string
	line            []byte
}

// item is one queued entry, or (flushed != nil) a flush marker.
type item struct {
	e              Entry
	subject, query string
	flushed        chan struct{}
}

// AddSink mirrors every later entry to s (from the writer goroutine, in
// order). Call before the log is shared.
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
	l := &Log{f: f, w: bufio.NewWriter(f), mode: mode, key: key, queue: make(chan item, QueueLen), done: make(chan struct{})}
	go l.run()
	return l, nil
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

// ErrClosed is Append's error after Close.
var ErrClosed = errors.New("discovery log is closed")

// Append queues one discovery. subject, query and e.Intents are given in
// clear and recorded as the log's mode says (the subject is always hashed).
// It never waits: when QueueLen entries are already waiting, the entry is
// dropped and counted (Dropped).
func (l *Log) Append(e Entry, subject, query string) error {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return ErrClosed
	}
	select {
	case l.queue <- item{e: e, subject: subject, query: query}:
	default:
		l.dropped.Add(1)
	}
	return nil
}

// Dropped counts the entries Append dropped because the queue was full.
func (l *Log) Dropped() uint64 { return l.dropped.Load() }

// Flush waits until every entry queued before it is written to the file
// (and handed to the sinks), and returns the first write error, if any.
func (l *Log) Flush() error {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return ErrClosed
	}
	done := make(chan struct{})
	l.queue <- item{flushed: done} // waits for room: a flush is not dropped
	l.mu.RUnlock()
	<-done
	return l.writeErr()
}

// run is the writer: it writes every queued entry in order and flushes the
// buffer whenever the queue runs empty (a line is small, and a crash should
// lose no more than what was still queued). fsync is left to Close; the log
// is telemetry.
func (l *Log) run() {
	defer close(l.done)
	for it := range l.queue {
		if it.flushed == nil {
			l.write(it)
		}
		if len(l.queue) == 0 || it.flushed != nil {
			l.setErr(l.w.Flush())
		}
		if it.flushed != nil {
			close(it.flushed)
		}
	}
	l.setErr(l.w.Flush())
}

func (l *Log) write(it item) {
	e := it.e
	if it.subject != l.lastSubject { // "" hashes to "", as lastSubjectHash starts
		l.lastSubject, l.lastSubjectHash = it.subject, l.hash(it.subject)
	}
	e.SubjectHash = l.lastSubjectHash
	intents := e.Intents
	e.Intents = nil
	switch l.mode {
	case QueryRaw:
		e.Query = it.query
		e.Intents = intents
	case QueryHash:
		e.QueryHash = l.hash(it.query)
		for _, in := range intents {
			e.IntentHashes = append(e.IntentHashes, l.hash(in))
		}
	}
	b, ok := appendEntry(l.line[:0], &e)
	if !ok {
		var err error
		if b, err = json.Marshal(e); err != nil {
			l.setErr(err)
			return
		}
	}
	for _, s := range l.sinks {
		s.Discovery(e)
	}
	b = append(b, '\n')
	_, err := l.w.Write(b)
	l.setErr(err)
	if ok && cap(b) <= maxLineKept {
		l.line = b[:0]
	}
}

// maxLineKept bounds the line buffer the writer keeps between entries.
const maxLineKept = 64 << 10

// hash is Hash for the writer goroutine: the same pseudonym, from one HMAC
// it resets instead of a new one each time.
func (l *Log) hash(s string) string {
	if s == "" {
		return ""
	}
	if l.mac == nil {
		l.mac = hmac.New(sha256.New, l.key)
	}
	l.mac.Reset()
	l.mac.Write([]byte(s))
	var sum [sha256.Size]byte
	var hx [24]byte
	hex.Encode(hx[:], l.mac.Sum(sum[:0])[:12])
	return string(hx[:])
}

func (l *Log) setErr(err error) {
	if err == nil {
		return
	}
	l.errMu.Lock()
	if l.err == nil {
		l.err = err
	}
	l.errMu.Unlock()
}

func (l *Log) writeErr() error {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	return l.err
}

// Close writes every queued entry, then syncs and closes the file. It
// returns the first write error, if any.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.closed = true
	close(l.queue)
	l.mu.Unlock()
	<-l.done
	if err := l.writeErr(); err != nil {
		l.f.Close()
		return err
	}
	if err := l.f.Sync(); err != nil {
		l.f.Close()
		return err
	}
	return l.f.Close()
}
