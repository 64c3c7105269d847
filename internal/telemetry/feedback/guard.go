package feedback

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/retriever"
)

// The guard against bad lessons: for a tenant that has a labelled set (its
// reviewed `cardex eval --from-log` rows), every learned change — the
// phrasings of an outcome, or a batch of sessions' co-usage — is first
// evaluated in a shadow: a retriever over the tenant's cards as the store
// holds them, without and with the change, nothing written. A change that
// lowers recall@GuardK on the set is held back (not applied, listed in the
// console); the others are applied. Tenants without a set learn as before.
const (
	GuardK = 5
	// MaxGuardQueue bounds the changes waiting for evaluation; past it a
	// change is held back unevaluated.
	MaxGuardQueue = 256
	// MaxHeld bounds the held-back changes remembered for the console.
	MaxHeld = 100
	// MaxGuardedCards bounds the tenants guarded: a shadow of a larger
	// tenant is not built, and its changes are held back.
	MaxGuardedCards = 5000
	// MaxLabelled bounds the labelled queries read per tenant.
	MaxLabelled = 1000
)

// LabelledQuery is one row of a tenant's labelled set: a request and the
// tools ("server/name") it needs.
type LabelledQuery struct {
	ID       string   `json:"id"`
	Tenant   string   `json:"tenant"`
	Query    string   `json:"query"`
	Intents  []string `json:"intents,omitempty"`
	Expected []string `json:"expected"`
}

// LoadLabelled reads labelled sets from a JSON Lines file of reviewed rows
// (`cardex eval --from-log` prints them; a reviewer keeps the right ones
// and names the tools), by tenant. Rows without a tenant, a query or an
// expected tool are skipped; at most MaxLabelled rows per tenant are kept.
func LoadLabelled(path string) (map[string][]LabelledQuery, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string][]LabelledQuery{}
	dec := json.NewDecoder(f)
	for line := 1; ; line++ {
		var q LabelledQuery
		if err := dec.Decode(&q); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, fmt.Errorf("%s: row %d: %w", path, line, err)
		}
		if q.Tenant == "" || strings.TrimSpace(q.Query) == "" && len(q.Intents) == 0 || len(q.Expected) == 0 || len(out[q.Tenant]) >= MaxLabelled {
			continue
		}
		out[q.Tenant] = append(out[q.Tenant], q)
	}
}

// Held is a learned change the guard held back.
type Held struct {
	Time    time.Time
	Tenant  string
	Kind    string // "phrasings" or "companions"
	Cards   []cards.Key
	Phrases []string
	// Before and After are recall@GuardK of the tenant's labelled queries
	// without and with the change (both 0 when it was not evaluated: Note
	// says why).
	Before, After float64
	Queries       int
	Note          string
}

// Target is what the guard passes accepted changes to (the retriever).
type Target interface {
	Learner
	CoUser
}

// GuardConfig is what NewGuard needs.
type GuardConfig struct {
	Target Target
	// Store is the store the target follows; the shadows read it.
	Store    cards.Store
	Embedder embed.Embedder
	// Options are the target's retriever options, without a vector index
	// of its own (a shadow keeps its vectors in memory).
	Options []retriever.Option
	// Sets are the labelled queries by tenant (LoadLabelled).
	Sets   map[string][]LabelledQuery
	Logger *slog.Logger
	Now    func() time.Time
}

type guardJob struct {
	tenant  string
	learn   *cards.Key
	phrases []string
	uses    []cards.CoUse
}

// Guard implements Learner and CoUser in front of the target.
type Guard struct {
	cfg   GuardConfig
	log   *slog.Logger
	queue chan guardJob
	done  chan struct{}

	mu   sync.Mutex
	held []Held
	// base caches a tenant's recall without change at a store sequence.
	base map[string]guardBase
	// Evaluated and Applied count the guarded changes (for tests and logs).
	evaluated, applied int
}

type guardBase struct {
	seq    uint64
	recall float64
}

// NewGuard starts the guard's worker; Close stops it.
func NewGuard(cfg GuardConfig) *Guard {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	g := &Guard{cfg: cfg, log: cfg.Logger, queue: make(chan guardJob, MaxGuardQueue), done: make(chan struct{}), base: map[string]guardBase{}}
	go g.work()
	return g
}

// Guarded says whether a tenant's changes are evaluated first.
func (g *Guard) Guarded(tenant string) bool { return len(g.cfg.Sets[tenant]) > 0 }

// Learn implements Learner: a guarded tenant's phrasings are queued for
// evaluation (reported unchanged: they take effect, or not, shortly).
func (g *Guard) Learn(ctx context.Context, k cards.Key, phrases ...string) (bool, error) {
	if !g.Guarded(k.Tenant) {
		return g.cfg.Target.Learn(ctx, k, phrases...)
	}
	g.enqueue(guardJob{tenant: k.Tenant, learn: &k, phrases: slices.Clone(phrases)})
	return false, nil
}

// RecordCoUse implements CoUser: sessions of guarded tenants are queued,
// a batch per tenant; the others are recorded at once.
func (g *Guard) RecordCoUse(ctx context.Context, uses []cards.CoUse) (bool, error) {
	byTenant := map[string][]cards.CoUse{}
	var open []cards.CoUse
	for _, u := range uses {
		if len(u.Tools) > 0 && g.Guarded(u.Tools[0].Tenant) {
			byTenant[u.Tools[0].Tenant] = append(byTenant[u.Tools[0].Tenant], u)
		} else {
			open = append(open, u)
		}
	}
	for _, t := range slices.Sorted(maps.Keys(byTenant)) {
		g.enqueue(guardJob{tenant: t, uses: byTenant[t]})
	}
	if len(open) == 0 {
		return false, nil
	}
	return g.cfg.Target.RecordCoUse(ctx, open)
}

func (g *Guard) enqueue(j guardJob) {
	select {
	case g.queue <- j:
	default:
		g.hold(j, 0, 0, 0, "not evaluated: the guard's queue was full")
		g.log.Warn("guard: queue full; a learned change is held back unevaluated", "tenant", j.tenant)
	}
}

func (g *Guard) work() {
	defer close(g.done)
	for j := range g.queue {
		g.evaluate(j)
	}
}

// Close stops taking changes, evaluates the queued ones and stops.
func (g *Guard) Close() error {
	close(g.queue)
	<-g.done
	return nil
}

// Held lists the held-back changes, latest first.
func (g *Guard) Held() []Held {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := slices.Clone(g.held)
	slices.Reverse(out)
	return out
}

// Counts are how many guarded changes were evaluated and applied.
func (g *Guard) Counts() (evaluated, applied int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.evaluated, g.applied
}

func (g *Guard) hold(j guardJob, before, after float64, n int, note string) {
	h := Held{Time: g.cfg.Now().UTC(), Tenant: j.tenant, Before: before, After: after, Queries: n, Note: note}
	if j.learn != nil {
		h.Kind, h.Cards, h.Phrases = "phrasings", []cards.Key{*j.learn}, j.phrases
	} else {
		h.Kind, h.Cards = "companions", cards.CoUseKeys(j.uses)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.held = append(g.held, h)
	if len(g.held) > MaxHeld {
		g.held = g.held[len(g.held)-MaxHeld:]
	}
}

// evaluate measures a change in shadows and applies it or holds it back.
func (g *Guard) evaluate(j guardJob) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	set := g.cfg.Sets[j.tenant]
	before, err := g.baseline(ctx, j.tenant, set)
	if err == nil {
		var after float64
		after, err = g.recall(ctx, j.tenant, set, j)
		if err == nil {
			g.mu.Lock()
			g.evaluated++
			g.mu.Unlock()
			if after < before-1e-9 {
				g.hold(j, before, after, len(set), "")
				g.log.Info("guard: a learned change lowers recall on the tenant's labelled queries; held back",
					"tenant", j.tenant, "recall_before", before, "recall_after", after)
				return
			}
			g.apply(ctx, j)
			return
		}
	}
	g.hold(j, 0, 0, len(set), "not evaluated: "+err.Error())
	g.log.Warn("guard: a learned change could not be evaluated; held back", "tenant", j.tenant, "err", err)
}

func (g *Guard) apply(ctx context.Context, j guardJob) {
	var err error
	if j.learn != nil {
		_, err = g.cfg.Target.Learn(ctx, *j.learn, j.phrases...)
	} else {
		_, err = g.cfg.Target.RecordCoUse(ctx, j.uses)
	}
	if err != nil {
		g.log.Warn("guard: applying a learned change failed", "tenant", j.tenant, "err", err)
		return
	}
	g.mu.Lock()
	g.applied++
	g.mu.Unlock()
}

// baseline is the tenant's recall without change, cached per store
// sequence.
func (g *Guard) baseline(ctx context.Context, tenant string, set []LabelledQuery) (float64, error) {
	seq, err := g.cfg.Store.Seq(ctx)
	if err != nil {
		return 0, err
	}
	g.mu.Lock()
	b, ok := g.base[tenant]
	g.mu.Unlock()
	if ok && b.seq == seq {
		return b.recall, nil
	}
	r, err := g.recall(ctx, tenant, set, guardJob{})
	if err != nil {
		return 0, err
	}
	g.mu.Lock()
	g.base[tenant] = guardBase{seq: seq, recall: r}
	g.mu.Unlock()
	return r, nil
}

// recall builds a shadow of the tenant with the job's change and measures
// the labelled set on it.
func (g *Guard) recall(ctx context.Context, tenant string, set []LabelledQuery, j guardJob) (float64, error) {
	ls, err := newLessonStore(ctx, g.cfg.Store, tenant, j, g.cfg.Now())
	if err != nil {
		return 0, err
	}
	shadow, err := retriever.New(ctx, ls, g.cfg.Embedder, nil, g.cfg.Options...)
	if err != nil {
		return 0, fmt.Errorf("shadow: %w", err)
	}
	defer shadow.Close()
	caller := retriever.Caller{Tenant: tenant, Subject: "cardex-guard", Scopes: []string{"*"}}
	total := 0.0
	for _, q := range set {
		res, err := shadow.Discover(ctx, retriever.Request{Caller: caller, Query: q.Query, Intents: q.Intents, TopK: GuardK})
		if err != nil {
			return 0, fmt.Errorf("labelled query %s: %w", q.ID, err)
		}
		met := 0
		for _, want := range q.Expected {
			if slices.ContainsFunc(res.Tools, func(s retriever.Scored) bool { return s.Card.Server+"/"+s.Card.Name == want }) {
				met++
			}
		}
		total += float64(met) / float64(len(q.Expected))
	}
	return total / float64(len(set)), nil
}

// lessonStore is a read-only view of one tenant of a store with one
// change applied on top: its change sequence lists the tenant's active
// cards and server entries once; Learned and Companions answer as the
// store would after the change. Writes are refused (PutEmbeddings is
// dropped: a shadow computes what it lacks and keeps it in memory).
type lessonStore struct {
	cards.Store
	changes []cards.Change
	job     guardJob
	now     time.Time
}

func newLessonStore(ctx context.Context, st cards.Store, tenant string, j guardJob, now time.Time) (*lessonStore, error) {
	ls := &lessonStore{Store: st, job: j, now: now}
	for cursor := ""; ; {
		page, err := st.List(ctx, cards.ListQuery{Tenant: tenant, Status: []cards.Status{cards.StatusActive}, Limit: cards.MaxPageSize, Cursor: cursor})
		if err != nil {
			return nil, err
		}
		for _, c := range page.Cards {
			ls.changes = append(ls.changes, cards.Change{Seq: uint64(len(ls.changes) + 1), Key: c.Key()})
		}
		if len(ls.changes) > MaxGuardedCards {
			return nil, fmt.Errorf("tenant %s has more than %d active cards: too large to shadow", tenant, MaxGuardedCards)
		}
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	sis, err := st.Servers(ctx, tenant)
	if err != nil {
		return nil, err
	}
	for _, si := range sis {
		ls.changes = append(ls.changes, cards.Change{Seq: uint64(len(ls.changes) + 1), Key: cards.ServerKey(tenant, si.Name)})
	}
	return ls, nil
}

var errReadOnly = errors.New("a guard's shadow is read-only")

func (s *lessonStore) Seq(context.Context) (uint64, error) { return uint64(len(s.changes)), nil }

func (s *lessonStore) Changes(_ context.Context, since uint64, limit int) ([]cards.Change, error) {
	if since >= uint64(len(s.changes)) {
		return nil, nil
	}
	return s.changes[since:min(uint64(len(s.changes)), since+uint64(limit))], nil
}

func (s *lessonStore) Learned(ctx context.Context, keys []cards.Key) (map[cards.Key][]string, error) {
	m, err := s.Store.Learned(ctx, keys)
	if err != nil || s.job.learn == nil || !slices.Contains(keys, *s.job.learn) {
		return m, err
	}
	if next, ch := cards.AddLearned(m[*s.job.learn], s.job.phrases...); ch {
		m[*s.job.learn] = next
	}
	return m, nil
}

func (s *lessonStore) Companions(ctx context.Context, keys []cards.Key) (map[cards.Key]cards.Companions, error) {
	m, err := s.Store.Companions(ctx, keys)
	if err != nil || len(s.job.uses) == 0 {
		return m, err
	}
	for _, k := range keys {
		if next, ch := cards.AddCompanions(m[k], k, s.now, s.job.uses...); ch {
			m[k] = next
		}
	}
	return m, nil
}

func (s *lessonStore) PutEmbeddings(context.Context, []cards.Embedding) error { return nil }
func (s *lessonStore) Put(context.Context, []cards.Card) ([]cards.PutResult, error) {
	return nil, errReadOnly
}
func (s *lessonStore) Delete(context.Context, cards.Key, int64) error { return errReadOnly }
func (s *lessonStore) PutServers(context.Context, []cards.ServerInfo) ([]cards.PutResult, error) {
	return nil, errReadOnly
}
func (s *lessonStore) DeleteServer(context.Context, string, string, int64) error { return errReadOnly }
func (s *lessonStore) AddLearned(context.Context, cards.Key, ...string) (bool, error) {
	return false, errReadOnly
}
func (s *lessonStore) AddCompanions(context.Context, []cards.CoUse) (bool, error) {
	return false, errReadOnly
}
func (s *lessonStore) Close() error { return nil }
