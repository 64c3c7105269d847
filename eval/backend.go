package eval

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/cards/embedded"
	"github.com/seed0cff8200/cardex/embed"
	"github.com/seed0cff8200/cardex/retriever"
)

// Search is one discovery an evaluation asks a backend for.
type Search struct {
	Tenant string
	Query  string
	// Intents are sent beside (or, with an empty Query, instead of) the
	// query.
	Intents []string
	TopK    int
	Mode    retriever.Mode
	Fusion  string  // "" → the backend's default (rrf)
	Alpha   float64 // with AlphaSet, the semantic weight of relative fusion
	// AlphaSet says Alpha was given.
	AlphaSet bool
	// NoReformulate keeps low-confidence queries as they are (in-process
	// only; the API has no such switch).
	NoReformulate bool
	// NoCompanions turns the companion step off.
	NoCompanions bool
	// HotPins are (server, name) keys pinned as the caller's hot tools.
	HotPins [][2]string
}

// Found is one slot of a shortlist: the (server, name) key of the tool, and
// the keys of the near-duplicates it names as its alternatives.
type Found struct {
	Key          [2]string
	Alternatives [][2]string
}

// Backend is where an evaluation registers its cards and runs its queries.
type Backend interface {
	// Describe names the backend for the report.
	Describe() string
	// Modes lists the modes the backend can run.
	Modes() []retriever.Mode
	// Register makes the catalogue's cards, and only them, the active
	// cards of its tenant.
	Register(ctx context.Context, cat *Catalog) error
	// Discover returns the shortlist, best first.
	Discover(ctx context.Context, s Search) ([]Found, error)
	Close() error
}

// InProcess runs the service's own pipeline in this process: a fresh
// embedded store in a temporary directory and a retriever over it, with the
// default configuration of `cardex serve` unless told otherwise. It runs
// every mode.
type InProcess struct {
	emb   embed.Embedder
	opts  []retriever.Option
	dir   string
	store *embedded.Store
	ret   *retriever.Retriever
}

// NewInProcess returns an in-process backend with the given embedder (nil:
// the built-in hashed embedder, as `cardex serve` uses) and retriever
// options.
func NewInProcess(emb embed.Embedder, opts ...retriever.Option) *InProcess {
	if emb == nil {
		emb = embed.MustBuiltin()
	}
	return &InProcess{emb: emb, opts: opts}
}

// Describe implements Backend.
func (b *InProcess) Describe() string {
	return "in-process (embedded store in a temporary directory, embedder " + b.emb.Model() + ")"
}

// Modes implements Backend: all three.
func (b *InProcess) Modes() []retriever.Mode { return retriever.Modes() }

// Register implements Backend. It may be called once.
func (b *InProcess) Register(ctx context.Context, cat *Catalog) error {
	if b.store != nil {
		return errors.New("in-process backend: already registered")
	}
	dir, err := os.MkdirTemp("", "cardex-eval-*")
	if err != nil {
		return err
	}
	b.dir = dir
	b.store, err = embedded.Open(dir)
	if err != nil {
		return err
	}
	const batch = 500
	for i := 0; i < len(cat.Cards); i += batch {
		part := make([]cards.Card, 0, batch)
		for _, c := range cat.Cards[i:min(i+batch, len(cat.Cards))] {
			part = append(part, c.Clone())
		}
		if _, err := b.store.Put(ctx, part); err != nil {
			return fmt.Errorf("register cards: %w", err)
		}
	}
	if len(cat.Servers) > 0 {
		if _, err := b.store.PutServers(ctx, cat.Servers); err != nil {
			return fmt.Errorf("register server entries: %w", err)
		}
	}
	b.ret, err = retriever.New(ctx, b.store, b.emb, slog.New(slog.DiscardHandler), b.opts...)
	return err
}

// Discover implements Backend.
func (b *InProcess) Discover(ctx context.Context, s Search) ([]Found, error) {
	if b.ret == nil {
		return nil, errors.New("in-process backend: nothing registered")
	}
	var pins []cards.Key
	for _, p := range s.HotPins {
		pins = append(pins, cards.Key{Server: p[0], Name: p[1]})
	}
	res, err := b.ret.Discover(ctx, retriever.Request{
		HotPins:  pins,
		Caller:   retriever.Caller{Tenant: s.Tenant, Subject: "eval"},
		Query:    s.Query,
		Intents:  s.Intents,
		TopK:     s.TopK,
		Mode:     s.Mode,
		Fusion:   s.Fusion,
		Alpha:    s.Alpha,
		AlphaSet: s.AlphaSet,
		// The pipeline reformulates low-confidence queries unless told not to.
		NoReformulate: s.NoReformulate,
		NoCompanions:  s.NoCompanions,
	})
	if err != nil {
		return nil, err
	}
	out := make([]Found, len(res.Tools))
	for i, t := range res.Tools {
		out[i].Key = [2]string{t.Card.Server, t.Card.Name}
		for _, a := range t.Alternatives {
			out[i].Alternatives = append(out[i].Alternatives, [2]string{a.Server, a.Name})
		}
	}
	return out, nil
}

// Close implements Backend: it closes the retriever and the store and
// removes the temporary directory.
func (b *InProcess) Close() error {
	var errs []error
	if b.ret != nil {
		errs = append(errs, b.ret.Close())
	}
	if b.store != nil {
		errs = append(errs, b.store.Close())
	}
	if b.dir != "" {
		errs = append(errs, os.RemoveAll(b.dir))
	}
	return errors.Join(errs...)
}
