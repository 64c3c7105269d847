package retriever

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/embed"
)

// entry is one active card held in memory, with what the pipeline derives
// from it once.
type entry struct {
	id string
	// no is the entry's integer key in the view (Retriever.entries), ≥ 1,
	// which the in-memory legs' hits carry: the pipeline joins, collapses
	// and merges by it, never by the ID.
	no     uint32
	card   cards.Card
	tokens int
	// learned are phrasings learned from use (see Learn), as the store
	// holds them (Store.Learned), read again whenever the card changes.
	learned []string
	// co is the card's co-usage table (companions.go), nil when it has
	// none, read again whenever the card changes.
	co *coUsage
	// examples are the card's search examples, held apart from card: they
	// are searched and embedded, and card (what answers are made of) has
	// none, so no answer can carry them to an agent.
	examples []string

	// dup and words are what near-duplicate detection compares (diverse.go);
	// group counts the tenant's entries with the same dup.
	dup   string
	words []uint64
	group *dupGroup

	// server is the tenant's server of the card, shared by its tools (the
	// server evidence groups by it without hashing names); destructive
	// caches the card's annotation for the server lift, deprecated its tag
	// for the demotion (deprecated.go).
	server      *serverSlot
	destructive bool
	deprecated  bool

	// schema is the card's input schema compiled (inputSchema), nil until
	// an authorization needs it. One pointer, not a sync.Once beside the
	// schema and its error: the entry stays within 512 bytes, the size
	// class without an allocation header (64 bytes a card less).
	schema atomic.Pointer[compiledSchema]
}

// compiledSchema is an input schema's compilation: the schema, or why it
// does not compile (neither: the card has no input schema).
type compiledSchema struct {
	s   *cards.Schema
	err error
}

// newEntry is the view's entry of an active card: the card without its
// search examples, which the entry keeps beside it for the index, its
// definition's token estimate and what near-duplicate detection compares.
// A snapshot keeps all of these (snapview.go).
func newEntry(c cards.Card) *entry {
	e := &entry{id: DocID(c.Key()), card: c, examples: c.SearchExamples}
	e.card.SearchExamples, e.card.ExamplesSource = nil, nil
	e.tokens = definitionTokens(&e.card)
	e.dup, e.words = dupKey(&e.card), summaryWords(e.card.Summary)
	return e
}

// inputSchema is the card's compiled input schema, compiled at the first
// authorization that needs it and kept. Registration refused every schema
// whose compilation is not bounded work (cards' limits), and compiling at
// load would cost a restart seconds and every card kilobytes for schemas
// most cards never need.
// Callers that race to compile it first all get the one kept.
func (e *entry) inputSchema() (*cards.Schema, error) {
	c := e.schema.Load()
	if c == nil {
		c = &compiledSchema{}
		if len(e.card.InputSchema) > 0 {
			c.s, c.err = cards.CompileSchema(e.card.InputSchema)
		}
		if !e.schema.CompareAndSwap(nil, c) {
			c = e.schema.Load()
		}
	}
	return c.s, c.err
}

// Retriever runs the discovery pipeline over an in-memory view of the
// store's active cards: the authorization gate, a bleve index, a vector
// index, fusion and hydration. Sync brings the view up to date.
type Retriever struct {
	store cards.Store
	emb   embed.Embedder
	log   *slog.Logger
	lex   *LexicalIndex
	vec   VectorIndex

	syncMu sync.Mutex // one Sync at a time

	mu   sync.RWMutex // guards everything below and index mutations
	byID map[string]*entry
	// entries are the view's entries by number (entry.no, from entryNos;
	// 0 and freed numbers hold nil).
	entries  []*entry
	entryNos numbers
	byTenant map[string]map[string]*entry   // tenant → id → entry
	byName   map[string]map[string][]*entry // tenant → name → its entries (one a server)
	// servers are the store's server entries (tenant → name → entry),
	// whatever the status of their cards; they grant nothing.
	servers map[string]map[string]cards.ServerInfo
	seq     uint64
	changed chan struct{} // closed and replaced at every change of the view (Changed)

	dupGroups map[string]*dupGroup   // tenant + dup key → its entries' count
	keyBuf    []byte                 // tenantKey's
	slots     map[string]*serverSlot // tenant + server → its entries' count
	// groupNos and slotNos number the dup groups and server slots, so
	// that the pipeline's scratch is indexed by them.
	groupNos, slotNos numbers

	fuseBufs   sync.Pool // *fuseBuf, lent to one answer at a time (fusion.go)
	answerBufs sync.Pool // *answerScratch, lent to one answer at a time

	// snapPath is where the view's snapshot is kept ("" none; snapshot.go);
	// snapGone and snapServers carry a loaded one's dropped IDs and server
	// entries to the end of its load.
	snapPath    string
	snapGone    []string
	snapServers []cards.ServerInfo
	closed      atomic.Bool

	candMu sync.Mutex // guards cands (readers of the view add to it)
	cands  map[string]*candSet

	minCoverage, minCosine float64 // low-confidence thresholds
	lexWeights             LexicalWeights
	serverPrior            float64
	queryContext           float64
	decompose              bool
	serverBoost            float64
	collapse               bool
	srv                    *serverIndex
	confidence             ConfidenceModel
	minConfidence          float64
	res                    *residents // nil: every tenant is held
	companionOpts          CompanionOptions
}

// New builds a retriever over a store and loads the store's active cards.
func New(ctx context.Context, store cards.Store, emb embed.Embedder, log *slog.Logger, opts ...Option) (*Retriever, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Retriever{
		store:     store,
		emb:       emb,
		log:       log,
		vec:       memoryIndex{NewMemoryVectors(emb.Dim())},
		byID:      map[string]*entry{},
		entries:   []*entry{nil},
		byTenant:  map[string]map[string]*entry{},
		byName:    map[string]map[string][]*entry{},
		changed:   make(chan struct{}),
		cands:     map[string]*candSet{},
		dupGroups: map[string]*dupGroup{},
		slots:     map[string]*serverSlot{},
		servers:   map[string]map[string]cards.ServerInfo{},

		lexWeights:    DefaultLexicalWeights(),
		serverPrior:   DefaultServerPrior,
		serverBoost:   DefaultServerBoost,
		queryContext:  DefaultQueryContext,
		collapse:      DefaultCollapse,
		minCoverage:   DefaultMinCoverage,
		minCosine:     DefaultMinCosine,
		confidence:    DefaultConfidenceModel,
		minConfidence: DefaultMinConfidence,
		companionOpts: DefaultCompanionOptions,
	}
	for _, o := range opts {
		o(r)
	}
	lex, err := NewLexicalIndexWithWeights(r.lexWeights)
	if err != nil {
		return nil, err
	}
	r.lex = lex
	if r.srv, err = newServerIndex(); err != nil {
		lex.Close()
		return nil, err
	}
	start := time.Now()
	if err := r.loadSnapshot(ctx); err != nil {
		r.lex.Close()
		return nil, err
	}
	if err := r.Sync(ctx); err != nil {
		r.lex.Close()
		return nil, err
	}
	log.Info("catalogue loaded", "active_cards", r.Len(), "seq", r.Seq(), "model", emb.Model(), "took", time.Since(start).Round(time.Millisecond))
	return r, nil
}

// Close writes the snapshot (WithSnapshot) and releases the indexes (and
// the snapshot's mapping: nothing may search the retriever afterwards).
func (r *Retriever) Close() error {
	if r.closed.Swap(true) {
		return nil // the snapshot is of the view before the first Close
	}
	err := r.WriteSnapshot()
	var unmap error
	if mi, ok := r.vec.(memoryIndex); ok {
		r.mu.Lock() // no answer is reading the vectors
		unmap = mi.m.release()
		r.mu.Unlock()
	}
	return errors.Join(err, unmap, r.lex.Close(), r.srv.close())
}

// Len is the number of active cards held, across tenants.
func (r *Retriever) Len() int {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.byID)
}

// Changed returns a channel that is closed when the view next changes (a
// Sync that applied changes). Take it before reading the view, and no change
// after the read goes unnoticed.
func (r *Retriever) Changed() <-chan struct{} {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.changed
}

// Seq is the store change sequence the view reflects.
func (r *Retriever) Seq() uint64 {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.seq
}

const syncPage = 1000

// Sync applies every store change after the last one seen: active cards are
// (re)indexed with their learned phrasings and with embeddings reused when
// their text and model are unchanged, everything else is dropped from the
// view; server entries are kept in the view's server map.
func (r *Retriever) Sync(ctx context.Context) error {
	r.syncMu.Lock()
	defer r.syncMu.Unlock()
	for {
		since := r.Seq()
		changes, err := r.store.Changes(ctx, since, syncPage)
		if err != nil {
			return fmt.Errorf("read changes: %w", err)
		}
		if len(changes) == 0 {
			return nil
		}
		if err := r.apply(ctx, changes); err != nil {
			return err
		}
	}
}

// readCards reads the cards of the changes that are card writes, spread
// over the cores (a restart reads every card): got[i] and errs[i] belong to
// changes[i]; other changes are left zero.
func (r *Retriever) readCards(ctx context.Context, changes []cards.Change) ([]cards.Card, []error) {
	got := make([]cards.Card, len(changes))
	errs := make([]error, len(changes))
	workers := min(runtime.GOMAXPROCS(0), (len(changes)+31)/32)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < len(changes); i += workers {
				if ch := changes[i]; !ch.Deleted && !ch.Key.IsServer() {
					got[i], errs[i] = r.store.Get(ctx, ch.Key)
				}
			}
		}()
	}
	wg.Wait()
	return got, errs
}

func (r *Retriever) apply(ctx context.Context, changes []cards.Change) error {
	seq := changes[len(changes)-1].Seq
	if r.res != nil {
		changes = slices.DeleteFunc(slices.Clone(changes), func(ch cards.Change) bool { return !r.holds(ch.Key.Tenant) })
	}
	var upserts []*entry
	var removals []string
	servers := map[cards.Key]*cards.ServerInfo{} // nil: removed
	read, readErrs := r.readCards(ctx, changes)
	for i, ch := range changes {
		if ch.Key.IsServer() {
			if ch.Deleted {
				servers[ch.Key] = nil
				continue
			}
			si, err := r.store.GetServer(ctx, ch.Key.Tenant, ch.Key.Server)
			switch {
			case err == nil:
				servers[ch.Key] = &si
			case isNotFound(err):
				servers[ch.Key] = nil
			default:
				return fmt.Errorf("read server %s/%s: %w", ch.Key.Tenant, ch.Key.Server, err)
			}
			continue
		}
		id := DocID(ch.Key)
		if ch.Deleted {
			removals = append(removals, id)
			continue
		}
		c, err := read[i], readErrs[i]
		switch {
		case err == nil && c.Status == cards.StatusActive:
			upserts = append(upserts, newEntry(c))
		case err == nil || isNotFound(err):
			removals = append(removals, id)
		default:
			return fmt.Errorf("read card %s: %w", ch.Key, err)
		}
	}
	if err := r.readLessons(ctx, upserts); err != nil {
		return err
	}
	return r.index(ctx, upserts, removals, servers, seq)
}

// readLessons reads what the cards of the entries learned from use: their
// learned phrasings and their co-usage tables.
func (r *Retriever) readLessons(ctx context.Context, es []*entry) error {
	if len(es) == 0 {
		return nil
	}
	keys := make([]cards.Key, len(es))
	for i, e := range es {
		keys[i] = e.card.Key()
	}
	learned, err := r.store.Learned(ctx, keys)
	if err != nil {
		return fmt.Errorf("read learned phrasings: %w", err)
	}
	comps, err := r.store.Companions(ctx, keys)
	if err != nil {
		return fmt.Errorf("read co-usage: %w", err)
	}
	for i, e := range es {
		e.learned = learned[keys[i]]
		e.co = newCoUsage(comps[keys[i]])
	}
	return nil
}

// index puts read cards into the view and takes removed ones out, records
// server entries (nil: removed) and, when seq > 0, moves the view to that
// change sequence number. Call under syncMu.
func (r *Retriever) index(ctx context.Context, upserts []*entry, removals []string, servers map[cards.Key]*cards.ServerInfo, seq uint64) error {
	// The parameter names, from each schema once: the vector's text and the
	// lexical document both hold them.
	params := make([][]string, len(upserts))
	for i, e := range upserts {
		if params[i] = schemaParams(e.card.InputSchema); params[i] == nil {
			params[i] = []string{}
		}
	}
	vecs, err := r.embeddings(ctx, upserts, params)
	if err != nil {
		return err
	}
	docs := make([]LexicalDoc, len(upserts))
	for i, e := range upserts {
		docs[i] = lexicalDoc(e, params[i])
	}

	r.mu.Lock()
	defer r.mu.Unlock()
	if len(removals) > 0 {
		if err := r.lex.Delete(removals); err != nil {
			return err
		}
	}
	if len(docs) > 0 {
		if err := r.lex.Upsert(docs); err != nil {
			return err
		}
	}
	for _, id := range removals {
		r.vec.Delete(ctx, id)
		r.drop(id)
	}
	for i, e := range upserts {
		if err := r.vec.Upsert(ctx, e.id, e.card.Tenant, vecs[i]); err != nil {
			return err
		}
		r.drop(e.id)
		r.add(e)
		r.lex.setKey(e.id, e.no)
		if mi, ok := r.vec.(memoryIndex); ok {
			mi.m.setKey(e.id, e.no)
		}
	}
	if err := r.setServers(servers); err != nil {
		return err
	}
	if seq > 0 {
		r.seq = seq
	}
	r.dropCandidates()
	close(r.changed)
	r.changed = make(chan struct{})
	return nil
}

// numbers hands out small integers from 1, reusing given-back ones first,
// so that tables indexed by them stay as long as the most in use at once.
type numbers struct {
	last uint32
	free []uint32
}

func (n *numbers) take() uint32 {
	if k := len(n.free); k > 0 {
		x := n.free[k-1]
		n.free = n.free[:k-1]
		return x
	}
	n.last++
	return n.last
}

func (n *numbers) give(x uint32) { n.free = append(n.free, x) }

func isNotFound(err error) bool { return errors.Is(err, cards.ErrNotFound) }

// setServers records server entries in the view and its server index (nil
// removes one). Call with r.mu held for writing.
func (r *Retriever) setServers(servers map[cards.Key]*cards.ServerInfo) error {
	if len(servers) == 0 {
		return nil
	}
	var ups []cards.ServerInfo
	var removed []cards.Key
	for k, si := range servers {
		if si == nil {
			removed = append(removed, k)
			delete(r.servers[k.Tenant], k.Server)
			if len(r.servers[k.Tenant]) == 0 {
				delete(r.servers, k.Tenant)
			}
			continue
		}
		if r.servers[k.Tenant] == nil {
			r.servers[k.Tenant] = map[string]cards.ServerInfo{}
		}
		r.servers[k.Tenant][k.Server] = *si
		ups = append(ups, *si)
	}
	return r.srv.update(ups, removed)
}

// add puts an entry into the view under a number of its own (which the
// caller gives the indexes' docs of its ID). Call with r.mu held for
// writing.
func (r *Retriever) add(e *entry) {
	t, n, s := e.card.Tenant, e.card.Name, e.card.Server
	if e.dup != "" {
		k := r.tenantKey(t, e.dup)
		if e.group = r.dupGroups[string(k)]; e.group == nil {
			e.group = &dupGroup{no: r.groupNos.take()}
			r.dupGroups[string(k)] = e.group
		}
		e.group.n++
	}
	e.destructive = isDestructive(&e.card)
	e.deprecated = e.card.Deprecated()
	k := r.tenantKey(t, s)
	if e.server = r.slots[string(k)]; e.server == nil {
		e.server = &serverSlot{no: r.slotNos.take()}
		r.slots[string(k)] = e.server
	}
	e.server.n++
	if e.no = r.entryNos.take(); int(e.no) == len(r.entries) {
		r.entries = append(r.entries, nil)
	}
	r.entries[e.no] = e
	r.byID[e.id] = e
	r.account(t, 1, entryBytes(e, r.emb.Dim()))
	byID := r.byTenant[t]
	if byID == nil {
		byID = map[string]*entry{}
		r.byTenant[t] = byID
		r.byName[t] = map[string][]*entry{}
	}
	byID[e.id] = e
	byName := r.byName[t]
	byName[n] = append(byName[n], e)
}

// resetView empties the view (a snapshot's load that failed part way).
func (r *Retriever) resetView() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.byID, r.entries, r.entryNos = map[string]*entry{}, []*entry{nil}, numbers{}
	r.byTenant, r.byName = map[string]map[string]*entry{}, map[string]map[string][]*entry{}
	r.dupGroups, r.slots = map[string]*dupGroup{}, map[string]*serverSlot{}
	r.groupNos, r.slotNos = numbers{}, numbers{}
	r.seq, r.snapGone, r.snapServers = 0, nil, nil
	if res := r.res; res != nil {
		res.mu.Lock()
		res.held, res.onDemand = map[string]*heldTenant{}, 0
		res.lru.Init()
		res.mu.Unlock()
	}
}

func (r *Retriever) drop(id string) {
	e, ok := r.byID[id]
	if !ok {
		return
	}
	t, n, s := e.card.Tenant, e.card.Name, e.card.Server
	if e.group != nil {
		if e.group.n--; e.group.n == 0 {
			delete(r.dupGroups, string(r.tenantKey(t, e.dup)))
			r.groupNos.give(e.group.no)
		}
	}
	if e.server.n--; e.server.n == 0 {
		delete(r.slots, string(r.tenantKey(t, s)))
		r.slotNos.give(e.server.no)
	}
	delete(r.byID, id)
	r.entries[e.no] = nil
	r.entryNos.give(e.no)
	r.account(t, -1, -entryBytes(e, r.emb.Dim()))
	delete(r.byTenant[t], id)
	if named := slices.DeleteFunc(r.byName[t][n], func(x *entry) bool { return x == e }); len(named) > 0 {
		r.byName[t][n] = named
	} else {
		delete(r.byName[t], n)
	}
	if len(r.byTenant[t]) == 0 {
		delete(r.byTenant, t)
		delete(r.byName, t)
	}
}

// tenantKey is tenant + idSep + x in the view's scratch buffer (the key
// of a tenant's dup group or server slot), for looking up and deleting
// without building a string. Call with r.mu held for writing.
func (r *Retriever) tenantKey(tenant, x string) []byte {
	r.keyBuf = append(append(append(r.keyBuf[:0], tenant...), idSep...), x...)
	return r.keyBuf
}

const embedBatch = 64

// embeddings returns one vector per entry, reusing stored vectors whose
// model and text hash match and storing the ones it computes.
func (r *Retriever) embeddings(ctx context.Context, es []*entry, params [][]string) ([][]float32, error) {
	out := make([][]float32, len(es))
	if len(es) == 0 {
		return out, nil
	}
	model := r.emb.Model()
	keys := make([]cards.Key, len(es))
	texts := make([]string, len(es))
	hashes := make([]string, len(es))
	for i, e := range es {
		keys[i] = e.card.Key()
		texts[i] = e.embeddingText(params[i])
		hashes[i] = EmbeddingHash(texts[i])
	}
	stored, err := r.store.Embeddings(ctx, model, keys)
	if err != nil {
		return nil, fmt.Errorf("read embeddings: %w", err)
	}
	var todo []int
	for i, k := range keys {
		if s, ok := stored[k]; ok && s.TextHash == hashes[i] && len(s.Vector) == r.emb.Dim() {
			out[i] = s.Vector
		} else {
			todo = append(todo, i)
		}
	}
	for start := 0; start < len(todo); start += embedBatch {
		part := todo[start:min(start+embedBatch, len(todo))]
		batch := make([]string, len(part))
		for j, i := range part {
			batch[j] = texts[i]
		}
		vs, err := r.emb.Embed(ctx, batch)
		if err != nil {
			return nil, fmt.Errorf("embed cards with %s: %w", model, err)
		}
		fresh := make([]cards.Embedding, len(part))
		for j, i := range part {
			out[i] = vs[j]
			fresh[j] = cards.Embedding{Key: keys[i], Model: model, TextHash: hashes[i], Vector: vs[j]}
		}
		if err := r.store.PutEmbeddings(ctx, fresh); err != nil {
			return nil, fmt.Errorf("store embeddings: %w", err)
		}
	}
	if len(todo) > 0 {
		r.log.Debug("embedded cards", "computed", len(todo), "reused", len(es)-len(todo), "model", model)
	}
	return out, nil
}

// EmbeddingText is the text a card's vector is computed from: its split
// name, server, summary, aliases, tags, description, parameter names and
// search examples. when_not_to_use is left out on purpose: negative
// guidance must not pull a card towards the queries it warns against.
func EmbeddingText(c *cards.Card) string { return embeddingText(c, schemaParams(c.InputSchema)) }

// embeddingText is EmbeddingText with the card's parameter names given.
func embeddingText(c *cards.Card, params []string) string {
	parts := []string{
		SplitIdentifiers(c.Name),
		c.Summary,
		strings.Join(c.Aliases, ". "),
		strings.Join(c.Tags, " "),
		c.Description,
		strings.Join(params, " "),
		c.Server,
		strings.Join(c.SearchExamples, ". "),
	}
	return strings.Join(slices.DeleteFunc(parts, func(s string) bool { return s == "" }), ". ")
}

// LearnedEmbeddingText is the text of a card's vector once it has learned
// phrasings: EmbeddingText followed by them.
func LearnedEmbeddingText(c *cards.Card, learned []string) string {
	if len(learned) == 0 {
		return EmbeddingText(c)
	}
	return EmbeddingText(c) + ". " + strings.Join(learned, ". ")
}

// embeddingText is LearnedEmbeddingText of the entry with its search
// examples, from its parameter names (params, or the schema's when params
// is nil).
func (e *entry) embeddingText(params []string) string {
	if params == nil {
		params = schemaParams(e.card.InputSchema)
	}
	c := e.card
	c.SearchExamples = e.examples
	t := embeddingText(&c, params)
	if len(e.learned) > 0 {
		t += ". " + strings.Join(e.learned, ". ")
	}
	return t
}

// lexicalDoc is the entry's lexical document, with its parameter names
// (params, or the schema's when params is nil).
func lexicalDoc(e *entry, params []string) LexicalDoc {
	if params == nil {
		params = schemaParams(e.card.InputSchema)
	}
	c := &e.card
	return LexicalDoc{
		ID:          e.id,
		Tenant:      c.Tenant,
		Server:      c.Server,
		Name:        c.Name,
		Summary:     c.Summary,
		Description: c.Description,
		Aliases:     c.Aliases,
		Learned:     e.learned,
		Examples:    e.examples,
		Tags:        c.Tags,
		Params:      params,
	}
}

// schemaParams lists the property names of a JSON schema, nested ones
// included (to a bounded depth), in first-seen order without duplicates.
func schemaParams(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	var root any
	if json.Unmarshal(raw, &root) != nil {
		return nil
	}
	var out []string
	seen := map[string]bool{}
	var walk func(v any, depth int)
	walk = func(v any, depth int) {
		m, ok := v.(map[string]any)
		if !ok || depth > 4 || len(out) >= 64 {
			return
		}
		if props, ok := m["properties"].(map[string]any); ok {
			names := make([]string, 0, len(props))
			for name := range props {
				names = append(names, name)
			}
			slices.Sort(names)
			for _, name := range names {
				if !seen[name] {
					seen[name] = true
					out = append(out, name)
				}
				walk(props[name], depth+1)
			}
		}
		if items, ok := m["items"]; ok {
			walk(items, depth+1)
		}
	}
	walk(root, 0)
	return out
}
