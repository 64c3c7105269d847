// Package feedback records what tells cardex it missed: outcomes reported
// by orchestrators, implicit misses (a tool described or authorized that no
// recent shortlist of the session held) and low-confidence discoveries. It
// keeps a bounded memory of recent discoveries to judge them, appends every
// signal to a JSON Lines file, and turns confirmed outcomes into learned
// phrasings.
package feedback

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/seed0cff8200/cardex/cards"
)

// Event types.
const (
	TypeOutcome       = "outcome"
	TypeImplicitMiss  = "implicit_miss"
	TypeLowConfidence = "low_confidence"
)

// Tool names a card within a tenant.
type Tool struct {
	Server string `json:"server"`
	Name   string `json:"name"`
}

// Event is one line of the feedback log.
type Event struct {
	Type        string    `json:"type"`
	Time        time.Time `json:"time"`
	Tenant      string    `json:"tenant"`
	SubjectHash string    `json:"subject_hash,omitempty"`
	SessionID   string    `json:"session_id,omitempty"`
	DiscoveryID string    `json:"discovery_id,omitempty"`
	Query       string    `json:"query,omitempty"`
	QueryHash   string    `json:"query_hash,omitempty"`
	// Tool is the tool used (outcome) or described/authorized (implicit miss).
	Tool    *Tool `json:"tool,omitempty"`
	NoneFit bool  `json:"none_fit,omitempty"`
	// Miss: the needed tool was not in the shortlist (or none fit).
	Miss      bool   `json:"miss"`
	Shortlist []Tool `json:"shortlist,omitempty"`
}

// Discovery is what the recorder remembers of one DiscoverTools answer.
type Discovery struct {
	ID        string
	Tenant    string
	Subject   string
	SessionID string
	Query     string
	Returned  []Tool
	// Intents are, per returned tool, the request's intents whose ranked
	// lists reached it: what a used tool learns instead of the query.
	Intents       map[Tool][]string
	LowConfidence bool
	Time          time.Time
}

// Learner turns confirmed queries into learned phrasings (the retriever).
type Learner interface {
	Learn(ctx context.Context, k cards.Key, phrases ...string) (bool, error)
}

// Limits of the memory of recent discoveries.
const (
	MaxRemembered      = 10000
	RememberFor        = time.Hour
	SessionDiscoveries = 5 // "recent shortlists" of a session
)

// Config is what New needs.
type Config struct {
	// Path of the JSON Lines feedback log.
	Path string
	// LearnedPath, if set, persists learned phrasings for replay at start.
	LearnedPath string
	// Hash pseudonymises subjects and queries (the discovery log's keyed hash).
	Hash func(string) string
	// RawQueries: queries are kept in clear in the log and may be learned.
	// Otherwise the log holds their hash and nothing is learned.
	RawQueries bool
	Learner    Learner
	// Sink, if set, receives every event as logged (e.g. PostgreSQL).
	Sink   interface{ Event(Event) }
	Logger *slog.Logger
	Now    func() time.Time
}

// Recorder is safe for concurrent use.
type Recorder struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	recent   map[string]*Discovery
	order    []string            // discovery ids, oldest first
	sessions map[string][]string // tenant + session → latest discovery ids
	out      *os.File
	w        *bufio.Writer
	learned  *os.File
}

// ErrUnknownDiscovery: the id is not one of the caller's recent discoveries.
var ErrUnknownDiscovery = fmt.Errorf("discovery_id is not a recent discovery of this caller (outcomes are accepted for %s): %w", RememberFor, cards.ErrNotFound)

// New opens the feedback log (and the learned-phrasings log, replaying it
// into the learner).
func New(ctx context.Context, cfg Config) (*Recorder, error) {
	if cfg.Hash == nil {
		return nil, errors.New("feedback: Hash is required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	r := &Recorder{cfg: cfg, log: cfg.Logger, recent: map[string]*Discovery{}, sessions: map[string][]string{}}
	f, err := os.OpenFile(cfg.Path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	r.out, r.w = f, bufio.NewWriter(f)
	if cfg.LearnedPath != "" {
		if err := r.replayLearned(ctx); err != nil {
			f.Close()
			return nil, err
		}
		if r.learned, err = os.OpenFile(cfg.LearnedPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600); err != nil {
			f.Close()
			return nil, err
		}
	}
	return r, nil
}

// learnedLine is one line of the learned-phrasings log.
type learnedLine struct {
	Key    cards.Key `json:"key"`
	Phrase string    `json:"phrase"`
}

func (r *Recorder) replayLearned(ctx context.Context) error {
	f, err := os.Open(r.cfg.LearnedPath)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	byKey := map[cards.Key][]string{}
	var keys []cards.Key
	dec := json.NewDecoder(f)
	for {
		var l learnedLine
		if err := dec.Decode(&l); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			r.log.Warn("learned phrasings log: stopping replay at a bad line", "err", err)
			break
		}
		if _, ok := byKey[l.Key]; !ok {
			keys = append(keys, l.Key)
		}
		byKey[l.Key] = append(byKey[l.Key], l.Phrase)
	}
	if r.cfg.Learner == nil {
		return nil
	}
	for _, k := range keys {
		if _, err := r.cfg.Learner.Learn(ctx, k, byKey[k]...); err != nil {
			return fmt.Errorf("replay learned phrasings: %w", err)
		}
	}
	if len(keys) > 0 {
		r.log.Info("learned phrasings replayed", "cards", len(keys))
	}
	return nil
}

func sessionKey(tenant, session string) string { return tenant + "\x00" + session }

// Remember records a discovery so that later signals can be judged, and
// logs it as a suspected miss when it was low-confidence.
func (r *Recorder) Remember(d Discovery) {
	if d.Time.IsZero() {
		d.Time = r.cfg.Now()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.recent[d.ID] = &d
	r.order = append(r.order, d.ID)
	if d.SessionID != "" {
		k := sessionKey(d.Tenant, d.SessionID)
		ids := append(r.sessions[k], d.ID)
		if len(ids) > SessionDiscoveries {
			ids = ids[len(ids)-SessionDiscoveries:]
		}
		r.sessions[k] = ids
	}
	r.expire()
	if d.LowConfidence {
		r.write(r.event(TypeLowConfidence, &d, nil, true))
	}
}

// expire drops discoveries past RememberFor or over MaxRemembered. Call
// with r.mu held.
func (r *Recorder) expire() {
	now := r.cfg.Now()
	drop := 0
	for drop < len(r.order) {
		d := r.recent[r.order[drop]]
		if d != nil && len(r.order)-drop <= MaxRemembered && now.Sub(d.Time) <= RememberFor {
			break
		}
		drop++
	}
	for _, id := range r.order[:drop] {
		if d := r.recent[id]; d != nil && d.SessionID != "" {
			k := sessionKey(d.Tenant, d.SessionID)
			r.sessions[k] = slices.DeleteFunc(r.sessions[k], func(s string) bool { return s == id })
			if len(r.sessions[k]) == 0 {
				delete(r.sessions, k)
			}
		}
		delete(r.recent, id)
	}
	r.order = r.order[drop:]
}

func (r *Recorder) event(typ string, d *Discovery, tool *Tool, miss bool) Event {
	e := Event{Type: typ, Time: r.cfg.Now().UTC(), Tenant: d.Tenant, SubjectHash: r.cfg.Hash(d.Subject),
		SessionID: d.SessionID, DiscoveryID: d.ID, Tool: tool, Miss: miss, Shortlist: d.Returned}
	if r.cfg.RawQueries {
		e.Query = d.Query
	} else {
		e.QueryHash = r.cfg.Hash(d.Query)
	}
	return e
}

// write appends one event. Call with r.mu held.
func (r *Recorder) write(e Event) {
	if r.cfg.Sink != nil {
		r.cfg.Sink.Event(e)
	}
	b, err := json.Marshal(e)
	if err == nil {
		_, err = r.w.Write(append(b, '\n'))
	}
	if err == nil {
		err = r.w.Flush()
	}
	if err != nil {
		r.log.Warn("feedback log append failed", "err", err)
	}
}

// Outcome records the orchestrator's report on a discovery: the tool it
// used (which the caller is authorized for — the caller checks that first),
// or none_fit. It returns whether the outcome is a miss. A used tool's
// query is learned by the tool's card when queries are kept raw.
func (r *Recorder) Outcome(ctx context.Context, tenant, subject, discoveryID string, used *Tool, noneFit bool) (bool, error) {
	r.mu.Lock()
	r.expire()
	d := r.recent[discoveryID]
	if d == nil || d.Tenant != tenant || d.Subject != subject {
		r.mu.Unlock()
		return false, ErrUnknownDiscovery
	}
	miss := noneFit || (used != nil && !slices.Contains(d.Returned, *used))
	e := r.event(TypeOutcome, d, used, miss)
	e.NoneFit = noneFit
	r.write(e)
	// The phrasing to learn: the intents that reached the tool (each one
	// part of the task, in the orchestrator's words), else the query.
	var phrases []string
	if used != nil {
		phrases = d.Intents[*used]
	}
	if len(phrases) == 0 && d.Query != "" {
		phrases = []string{d.Query}
	}
	r.mu.Unlock()

	if used == nil || !r.cfg.RawQueries || r.cfg.Learner == nil || len(phrases) == 0 {
		return miss, nil
	}
	k := cards.Key{Tenant: tenant, Server: used.Server, Name: used.Name}
	changed, err := r.cfg.Learner.Learn(ctx, k, phrases...)
	if err != nil {
		return miss, fmt.Errorf("learn from outcome: %w", err)
	}
	if changed && r.learned != nil {
		r.mu.Lock()
		for _, p := range phrases {
			b, _ := json.Marshal(learnedLine{Key: k, Phrase: p})
			if _, werr := r.learned.Write(append(b, '\n')); werr != nil {
				err = werr
			}
		}
		r.mu.Unlock()
		if err != nil {
			r.log.Warn("learned phrasings log append failed", "err", err)
		}
	}
	return miss, nil
}

// Used notes that a caller described or authorized an (authorized) tool.
// When the caller's session has recent discoveries and none of their
// shortlists held the tool, it is an implicit miss of the latest one.
func (r *Recorder) Used(tenant, subject, session string, tool Tool) bool {
	if session == "" {
		return false
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.expire()
	ids := r.sessions[sessionKey(tenant, session)]
	if len(ids) == 0 {
		return false
	}
	for _, id := range ids {
		if d := r.recent[id]; d != nil && slices.Contains(d.Returned, tool) {
			return false
		}
	}
	latest := r.recent[ids[len(ids)-1]]
	r.write(r.event(TypeImplicitMiss, latest, &tool, true))
	return true
}

// Close flushes and closes the logs.
func (r *Recorder) Close() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.w.Flush()
	if cerr := r.out.Close(); err == nil {
		err = cerr
	}
	if r.learned != nil {
		if cerr := r.learned.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// ReadEvents reads a feedback log.
func ReadEvents(path string) ([]Event, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []Event
	dec := json.NewDecoder(f)
	for {
		var e Event
		if err := dec.Decode(&e); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return out, fmt.Errorf("%s: event %d: %w", path, len(out)+1, err)
		}
		out = append(out, e)
	}
}
