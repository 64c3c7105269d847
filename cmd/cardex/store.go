package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/cards/postgres"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/internal/faces/server"
	"github.com/seed0cff8200/cardex/internal/postgres/pgvec"
	"github.com/seed0cff8200/cardex/internal/postgres/replica"
	"github.com/seed0cff8200/cardex/retriever"
)

// Store kinds for --store.
const (
	storeEmbedded = "embedded"
	storePostgres = "postgres"
)

// storeFlags select and configure the store: --store, --database-url,
// --database-schema (serve and migrate share them).
type storeFlags struct {
	kind, url, schema string
	poll              time.Duration
	noListen          bool

	pg    *postgres.Store // set by open in postgres mode
	gate  *schemaGate
	state *server.State // set by open: whether the replica can serve
}

// storeCheckEvery is how often a replica checks that PostgreSQL answers.
const storeCheckEvery = time.Second

func (sf *storeFlags) registerDatabase(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&sf.url, "database-url", envOr("CARDEX_DATABASE_URL", ""),
		"PostgreSQL URL, e.g. postgres://cardex:secret@db:5432/cardex (env CARDEX_DATABASE_URL)")
	f.StringVar(&sf.schema, "database-schema", envOr("CARDEX_DATABASE_SCHEMA", postgres.DefaultSchema),
		"PostgreSQL schema holding cardex's tables (env CARDEX_DATABASE_SCHEMA)")
}

func (sf *storeFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&sf.kind, "store", envOr("CARDEX_STORE", storeEmbedded),
		"embedded (bbolt in --data-dir) or postgres (--database-url; run 'cardex migrate up' first) (env CARDEX_STORE)")
	sf.registerDatabase(cmd)
	f.DurationVar(&sf.poll, "change-poll", replica.DefaultPoll,
		"postgres: how often the change sequence is checked, so that other replicas' writes are seen even without a notification")
	f.BoolVar(&sf.noListen, "no-listen", false, "postgres: do not LISTEN for change notifications (rely on --change-poll)")
}

func (sf *storeFlags) openPostgres(log *slog.Logger) (*postgres.Store, error) {
	if sf.url == "" {
		return nil, errors.New("the postgres store needs --database-url (or CARDEX_DATABASE_URL)")
	}
	return postgres.Open(postgres.Config{URL: sf.url, Schema: sf.schema, Logger: log})
}

// open opens the selected store. In postgres mode the returned store is
// gated: until the schema is current (see start) reads of the change
// sequence see nothing and every other call is Unavailable.
func (sf *storeFlags) open(dataDir string, log *slog.Logger) (cards.Store, error) {
	switch sf.kind {
	case storeEmbedded:
		sf.state = server.NewState(nil)
		return embedded.Open(dataDir)
	case storePostgres:
		pg, err := sf.openPostgres(log)
		if err != nil {
			return nil, err
		}
		sf.pg, sf.gate = pg, &schemaGate{Store: pg}
		sf.state = server.NewState(errors.New("the database schema is not known to be current yet"))
		return sf.gate, nil
	default:
		return nil, fmt.Errorf("--store %q: want embedded or postgres", sf.kind)
	}
}

// retrieverOptions: in embedded mode the view's snapshot is kept in the
// data directory (a restart loads it instead of analysing every card); in
// postgres mode the semantic leg searches pgvector.
func (sf *storeFlags) retrieverOptions(emb embed.Embedder, dataDir string) []retriever.Option {
	if sf.pg == nil {
		return []retriever.Option{retriever.WithSnapshot(filepath.Join(dataDir, "retriever.snap"))}
	}
	return []retriever.Option{retriever.WithVectors(pgvec.New(sf.pg, emb.Model(), emb.Dim()))}
}

// start keeps the retriever current: the periodic sync in embedded mode; in
// postgres mode, waiting for a current schema (not serving until then: see
// server.State), then following the other replicas' changes (LISTEN/NOTIFY
// plus the change-sequence check) and checking that the database answers.
func (sf *storeFlags) start(ctx context.Context, ret *retriever.Retriever, emb embed.Embedder, syncEvery time.Duration, log *slog.Logger) {
	if sf.pg == nil {
		go syncLoop(ctx, ret, syncEvery, log)
		return
	}
	go func() {
		if !sf.waitForSchema(ctx, log) {
			return
		}
		if err := sf.pg.EnsureVectorIndex(ctx, emb.Model(), emb.Dim()); err != nil {
			log.Warn("vector index for the embedder model", "model", emb.Model(), "err", err)
		}
		sf.gate.open()
		for ctx.Err() == nil {
			err := ret.Sync(ctx)
			if err == nil {
				break
			}
			log.Warn("loading the catalogue from PostgreSQL failed; retrying", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
		sf.state.SetSchema(nil)
		log.Info("schema current; serving", "cards", ret.Len(), "seq", ret.Seq(), "schema", sf.pg.Schema())
		go sf.watchStore(ctx, log)
		(&replica.Follower{Store: sf.pg, View: ret, Poll: sf.poll, NoListen: sf.noListen, Log: log}).Run(ctx)
	}()
}

// watchStore pings PostgreSQL every storeCheckEvery: while it does not
// answer, the catalog service is NOT_SERVING and /readyz answers 503
// (discovery goes on, degraded).
func (sf *storeFlags) watchStore(ctx context.Context, log *slog.Logger) {
	t := time.NewTicker(storeCheckEvery)
	defer t.Stop()
	var last error
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		err := sf.pg.Ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		switch {
		case err != nil && last == nil:
			log.Warn("database unreachable: catalog NOT_SERVING, discovery degraded", "err", err)
		case err == nil && last != nil:
			log.Info("database reachable again: catalog SERVING")
		}
		if (err == nil) != (last == nil) {
			sf.state.SetStore(err)
		}
		last = err
	}
}

// waitForSchema polls until every migration of this binary is applied.
func (sf *storeFlags) waitForSchema(ctx context.Context, log *slog.Logger) bool {
	last := ""
	for {
		err := sf.pg.SchemaCurrent(ctx)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		if err.Error() != last {
			log.Warn("not ready (health NOT_SERVING)", "reason", err)
			last = err.Error()
			sf.state.SetSchema(err)
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(time.Second):
		}
	}
}

// schemaGate is the postgres store as the server and retriever see it
// before the schema is known to be current.
type schemaGate struct {
	*postgres.Store
	ready atomic.Bool
}

func (g *schemaGate) open() { g.ready.Store(true) }

var errNotReady = fmt.Errorf("%w: the database schema is not current yet (run `cardex migrate up`)", cards.ErrUnavailable)

func (g *schemaGate) Put(ctx context.Context, cs []cards.Card) ([]cards.PutResult, error) {
	if !g.ready.Load() {
		return nil, errNotReady
	}
	return g.Store.Put(ctx, cs)
}

func (g *schemaGate) Get(ctx context.Context, k cards.Key) (cards.Card, error) {
	if !g.ready.Load() {
		return cards.Card{}, errNotReady
	}
	return g.Store.Get(ctx, k)
}

func (g *schemaGate) List(ctx context.Context, q cards.ListQuery) (cards.ListPage, error) {
	if !g.ready.Load() {
		return cards.ListPage{}, errNotReady
	}
	return g.Store.List(ctx, q)
}

func (g *schemaGate) Delete(ctx context.Context, k cards.Key, v int64) error {
	if !g.ready.Load() {
		return errNotReady
	}
	return g.Store.Delete(ctx, k, v)
}

func (g *schemaGate) Seq(ctx context.Context) (uint64, error) {
	if !g.ready.Load() {
		return 0, nil
	}
	return g.Store.Seq(ctx)
}

func (g *schemaGate) Changes(ctx context.Context, since uint64, limit int) ([]cards.Change, error) {
	if !g.ready.Load() {
		return []cards.Change{}, nil
	}
	return g.Store.Changes(ctx, since, limit)
}

func (g *schemaGate) PutEmbeddings(ctx context.Context, es []cards.Embedding) error {
	if !g.ready.Load() {
		return errNotReady
	}
	return g.Store.PutEmbeddings(ctx, es)
}

func (g *schemaGate) Embeddings(ctx context.Context, model string, keys []cards.Key) (map[cards.Key]cards.Embedding, error) {
	if !g.ready.Load() {
		return nil, errNotReady
	}
	return g.Store.Embeddings(ctx, model, keys)
}

func (g *schemaGate) PutServers(ctx context.Context, ss []cards.ServerInfo) ([]cards.PutResult, error) {
	if !g.ready.Load() {
		return nil, errNotReady
	}
	return g.Store.PutServers(ctx, ss)
}

func (g *schemaGate) GetServer(ctx context.Context, tenant, name string) (cards.ServerInfo, error) {
	if !g.ready.Load() {
		return cards.ServerInfo{}, errNotReady
	}
	return g.Store.GetServer(ctx, tenant, name)
}

func (g *schemaGate) Servers(ctx context.Context, tenant string) ([]cards.ServerInfo, error) {
	if !g.ready.Load() {
		return nil, errNotReady
	}
	return g.Store.Servers(ctx, tenant)
}

func (g *schemaGate) DeleteServer(ctx context.Context, tenant, name string, v int64) error {
	if !g.ready.Load() {
		return errNotReady
	}
	return g.Store.DeleteServer(ctx, tenant, name, v)
}

func (g *schemaGate) AddLearned(ctx context.Context, k cards.Key, phrases ...string) (bool, error) {
	if !g.ready.Load() {
		return false, errNotReady
	}
	return g.Store.AddLearned(ctx, k, phrases...)
}

func (g *schemaGate) Learned(ctx context.Context, keys []cards.Key) (map[cards.Key][]string, error) {
	if !g.ready.Load() {
		return nil, errNotReady
	}
	return g.Store.Learned(ctx, keys)
}

func (g *schemaGate) AddCompanions(ctx context.Context, uses []cards.CoUse) (bool, error) {
	if !g.ready.Load() {
		return false, errNotReady
	}
	return g.Store.AddCompanions(ctx, uses)
}

func (g *schemaGate) Companions(ctx context.Context, keys []cards.Key) (map[cards.Key]cards.Companions, error) {
	if !g.ready.Load() {
		return nil, errNotReady
	}
	return g.Store.Companions(ctx, keys)
}
