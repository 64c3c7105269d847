// Package feedback records what tells cardex it missed: outcomes reported
// by orchestrators, implicit misses (a tool described or authorized that no
// recent shortlist of the session held) and low-confidence discoveries. It
// keeps a bounded memory of recent discoveries to judge them, appends every
// signal to a JSON Lines file, and turns confirmed outcomes into learned
// phrasings. Those live in the store (cards.Store.AddLearned), shared by
// every replica; a learned.jsonl of an earlier version is imported into the
// store once (ImportLearned).
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
	"github.com/seed0cff8200/cardex/internal/telemetry/metrics"
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

// Learner turns confirmed queries into learned phrasings (the retriever,
// which writes them to the store).
type Learner interface {
	Learn(ctx context.Context, k cards.Key, phrases ...string) (bool, error)
}

// LearnedStore is where learned phrasings live (a cards.Store).
type LearnedStore interface {
	AddLearned(ctx context.Context, k cards.Key, phrases ...string) (bool, error)
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
	// LearnedPath, if set, names the learned-phrasings log that earlier
	// versions kept per replica (learned.jsonl). When the file exists, New
	// imports it into Store once (see ImportLearned) and renames it to
	// LearnedPath + ".imported". Nothing writes it any more.
	LearnedPath string
	// Store receives the imported phrasings; needed when LearnedPath exists.
	Store LearnedStore
	// Hash pseudonymises subjects and queries (the discovery log's keyed hash).
	Hash func(string) string
	// RawQueries: queries are kept in clear in the log and may be learned.
	// Otherwise the log holds their hash and nothing is learned.
	RawQueries bool
	Learner    Learner
	// CoUse, if set, records the co-usage of sessions (couse.go).
	CoUse CoUser
	// Hot, if set, counts the tools reported used, per tenant and caller
	// (hot.go).
	Hot *Hot
	// Sink, if set, receives every event as logged (e.g. PostgreSQL).
	Sink interface{ Event(Event) }
	// Metrics, if set, counts outcomes and implicit misses per tenant.
	Metrics *metrics.Metrics
	Logger  *slog.Logger
	Now     func() time.Time
}

// Recorder is safe for concurrent use.
type Recorder struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	recent   map[string]*Discovery
	order    []string            // discovery ids, oldest first
	sessions map[string][]string // tenant + subject + session → latest discovery ids
	out      *os.File
	w        *bufio.Writer
	usage    sessions      // open sessions' used tools (couse.go)
	dueUses  []cards.CoUse // sessions set aside for the next flush

	stopFlush context.CancelFunc
	flushed   chan struct{} // closed when the flush loop has stopped

	stopImport context.CancelFunc
	imported   chan struct{} // closed when the import is done or given up
}

// ErrUnknownDiscovery: the id is not one of the caller's recent discoveries.
var ErrUnknownDiscovery = fmt.Errorf("discovery_id is not a recent discovery of this caller (outcomes are accepted for %s): %w", RememberFor, cards.ErrNotFound)

// ImportRetry is how often an import of learned.jsonl that the store could
// not take (unavailable, e.g. a replica whose database schema is not current
// yet) is tried again.
const ImportRetry = 2 * time.Second

// New opens the feedback log and, when cfg.LearnedPath exists, imports it
// into cfg.Store: at once if the store takes it, otherwise in the
// background every ImportRetry while the store is unavailable (the file
// stays until an import succeeds, so nothing learned is lost).
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
	r := &Recorder{cfg: cfg, log: cfg.Logger, recent: map[string]*Discovery{}, sessions: map[string][]string{}, imported: make(chan struct{})}
	legacy := false
	if cfg.LearnedPath != "" {
		if _, err := os.Stat(cfg.LearnedPath); err == nil {
			legacy = true
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
	}
	if legacy && cfg.Store == nil {
		return nil, errors.New("feedback: importing " + cfg.LearnedPath + " needs Store")
	}
	f, err := os.OpenFile(cfg.Path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	r.out, r.w = f, bufio.NewWriter(f)
	r.flushed = make(chan struct{})
	if cfg.CoUse != nil {
		fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		r.stopFlush = cancel
		go r.flushLoop(fctx)
	} else {
		close(r.flushed)
	}
	if !legacy {
		close(r.imported)
		return r, nil
	}
	err = r.importLearned(ctx)
	switch {
	case err == nil:
		close(r.imported)
	case errors.Is(err, cards.ErrUnavailable):
		r.log.Warn("learned phrasings: the store is unavailable; the import of "+cfg.LearnedPath+" is retried in the background", "err", err)
		ictx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		r.stopImport = cancel
		go r.retryImport(ictx)
	default:
		f.Close()
		return nil, err
	}
	return r, nil
}

func (r *Recorder) retryImport(ctx context.Context) {
	defer close(r.imported)
	t := time.NewTicker(ImportRetry)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := r.importLearned(ctx)
		if err == nil {
			return
		}
		if !errors.Is(err, cards.ErrUnavailable) {
			r.log.Error("learned phrasings: import failed; "+r.cfg.LearnedPath+" is kept for the next start", "err", err)
			return
		}
	}
}

// WaitImported blocks until the import of a learned.jsonl is done (or given
// up), or ctx ends.
func (r *Recorder) WaitImported(ctx context.Context) error {
	select {
	case <-r.imported:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Recorder) importLearned(ctx context.Context) error {
	n, skipped, err := ImportLearned(ctx, r.cfg.LearnedPath, r.cfg.Store, r.log)
	if err != nil {
		return err
	}
	r.log.Info("learned phrasings imported into the store", "from", r.cfg.LearnedPath, "cards", n, "skipped_missing_cards", skipped,
		"renamed_to", r.cfg.LearnedPath+".imported")
	return nil
}

// learnedLine is one line of an earlier version's learned-phrasings log.
type learnedLine struct {
	Key    cards.Key `json:"key"`
	Phrase string    `json:"phrase"`
}

// ImportLearned adds the phrasings of a learned.jsonl (the per-replica log
// of earlier versions: one {"key": …, "phrase": …} per line) to the store,
// card by card in the order first seen, under the store's rule (so an
// import run twice adds nothing twice), then renames the file to path +
// ".imported". Cards that no longer exist are skipped and counted; a line
// that does not decode ends the file (a crash may have cut the last one).
// On any store error the file is left as it is, to be imported again.
func ImportLearned(ctx context.Context, path string, store LearnedStore, log *slog.Logger) (imported, skipped int, err error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, 0, err
	}
	byKey := map[cards.Key][]string{}
	var keys []cards.Key
	dec := json.NewDecoder(f)
	for line := 1; ; line++ {
		var l learnedLine
		if err := dec.Decode(&l); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			log.Warn("learned phrasings log: stopping at a bad entry", "file", path, "entry", line, "err", err)
			break
		}
		if _, ok := byKey[l.Key]; !ok {
			keys = append(keys, l.Key)
		}
		byKey[l.Key] = append(byKey[l.Key], l.Phrase)
	}
	f.Close()
	for _, k := range keys {
		_, err := store.AddLearned(ctx, k, byKey[k]...)
		switch {
		case errors.Is(err, cards.ErrNotFound):
			skipped++
		case err != nil:
			return imported, skipped, fmt.Errorf("import %s: card %s: %w", path, k, err)
		default:
			imported++
		}
	}
	if err := os.Rename(path, path+".imported"); err != nil {
		return imported, skipped, fmt.Errorf("import %s: imported, but: %w", path, err)
	}
	return imported, skipped, nil
}

// sessionKey names a session: one subject's conversation within a tenant.
// Two subjects that send the same session id have two sessions, so one
// caller's describes and authorizations never count against another's
// shortlists.
func sessionKey(tenant, subject, session string) string {
	return tenant + "\x00" + subject + "\x00" + session
}

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
		k := sessionKey(d.Tenant, d.Subject, d.SessionID)
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
			k := sessionKey(d.Tenant, d.Subject, d.SessionID)
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
	if used != nil {
		r.noteUse(usageKey(tenant, subject, d.SessionID, d.ID), cards.Key{Tenant: tenant, Server: used.Server, Name: used.Name})
		if r.cfg.Hot != nil {
			r.cfg.Hot.Add(tenant, e.SubjectHash, *used, r.cfg.Now())
		}
	}
	r.cfg.Metrics.Outcome(tenant, miss, noneFit)
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
	if _, err := r.cfg.Learner.Learn(ctx, k, phrases...); err != nil {
		return miss, fmt.Errorf("learn from outcome: %w", err)
	}
	return miss, nil
}

// HotPins are the caller's candidate pins (Hot.Pins), at most n; none
// without Config.Hot.
func (r *Recorder) HotPins(tenant, subject string, n int) []Tool {
	if r.cfg.Hot == nil {
		return nil
	}
	return r.cfg.Hot.Pins(tenant, r.cfg.Hash(subject), r.cfg.Now(), n)
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
	ids := r.sessions[sessionKey(tenant, subject, session)]
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
	r.cfg.Metrics.ImplicitMiss(tenant)
	return true
}

// CloseFlushTimeout bounds how long Close waits to record the open
// sessions' co-usage.
const CloseFlushTimeout = 5 * time.Second

// Close stops a pending import, records the open sessions' co-usage, and
// flushes and closes the log.
func (r *Recorder) Close() error {
	if r.stopImport != nil {
		r.stopImport()
	}
	<-r.imported
	if r.stopFlush != nil {
		r.stopFlush()
		<-r.flushed
		ctx, cancel := context.WithTimeout(context.Background(), CloseFlushTimeout)
		if _, err := r.FlushCoUse(ctx, true); err != nil {
			r.log.Warn("co-usage: recording the open sessions failed (their outcomes are in the feedback log)", "err", err)
		}
		cancel()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	err := r.w.Flush()
	if cerr := r.out.Close(); err == nil {
		err = cerr
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
