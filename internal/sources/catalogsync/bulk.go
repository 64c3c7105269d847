package catalogsync

import (
	"context"
	"fmt"

	"github.com/seed0cff8200/cardex/cards"
)

// MaxWrite is the most cards (or server entries) one atomic write holds:
// the server's PutCards and PutServers limit.
const MaxWrite = 1000

// Source is one server namespace of a bulk import (a catalogue of many
// servers read from a file): the cards imported for it and the tools it
// lists that could not be imported (Keep: their cards are left alone).
type Source struct {
	Server string
	Cards  []cards.Card
	Keep   []string
}

// BulkCatalog is what a bulk import reads and writes: every card and every
// server entry of a tenant, and atomic writes of both.
type BulkCatalog interface {
	// List with server "" returns every card of the tenant, any status.
	Catalog
	// Servers returns every server entry of the tenant.
	Servers(ctx context.Context, tenant string) ([]cards.ServerInfo, error)
	// PutServers writes entries atomically.
	PutServers(ctx context.Context, ss []cards.ServerInfo) error
}

// BulkPlan is a bulk import's change: one plan per source namespace (as
// Diff makes it, so a namespace's vanished tools are revoked and the other
// namespaces of the tenant are left alone) and one change per server entry.
type BulkPlan struct {
	Plans   []Plan
	Servers []ServerChange
}

// Count returns how many cards the plans give the action.
func (b BulkPlan) Count(a Action) int {
	n := 0
	for _, p := range b.Plans {
		n += p.Count(a)
	}
	return n
}

// ServerCount returns how many server entries get the action.
func (b BulkPlan) ServerCount(a Action) int {
	n := 0
	for _, s := range b.Servers {
		if s.Action == a {
			n++
		}
	}
	return n
}

// PlanBulk reads the tenant's cards and server entries once and diffs every
// source namespace and every entry against them, with Diff's and
// DiffServer's rules.
func PlanBulk(ctx context.Context, cat BulkCatalog, tenant string, sources []Source, entries []cards.ServerInfo, opt Options) (BulkPlan, error) {
	stored, err := cat.List(ctx, tenant, "")
	if err != nil {
		return BulkPlan{}, fmt.Errorf("read the cards of tenant %s: %w", tenant, err)
	}
	byServer := map[string][]cards.Card{}
	for _, c := range stored {
		byServer[c.Server] = append(byServer[c.Server], c)
	}
	var out BulkPlan
	seen := map[string]bool{}
	for _, src := range sources {
		if seen[src.Server] {
			return BulkPlan{}, fmt.Errorf("server %s is imported twice", src.Server)
		}
		seen[src.Server] = true
		o := opt
		o.Keep = src.Keep
		p, err := Diff(tenant, src.Server, byServer[src.Server], src.Cards, o)
		if err != nil {
			return BulkPlan{}, fmt.Errorf("server %s: %w", src.Server, err)
		}
		if n := len(p.Writes()); n > MaxWrite {
			return BulkPlan{}, fmt.Errorf("server %s: the import changes %d of its cards; one atomic write holds at most %d", src.Server, n, MaxWrite)
		}
		out.Plans = append(out.Plans, p)
	}
	if len(entries) > 0 {
		have, err := cat.Servers(ctx, tenant)
		if err != nil {
			return BulkPlan{}, fmt.Errorf("read the server entries of tenant %s: %w", tenant, err)
		}
		byName := make(map[string]*cards.ServerInfo, len(have))
		for i := range have {
			byName[have[i].Name] = &have[i]
		}
		for _, e := range entries {
			if e.Tenant != tenant {
				return BulkPlan{}, fmt.Errorf("server entry %s is of tenant %s, not %s", e.Name, e.Tenant, tenant)
			}
			ch, err := DiffServer(byName[e.Name], e)
			if err != nil {
				return BulkPlan{}, fmt.Errorf("server %s: %w", e.Name, err)
			}
			out.Servers = append(out.Servers, ch)
		}
	}
	return out, nil
}

// Progress is where ApplyBulk is: Done of Total cards, or of Total server
// entries once the cards are written.
type Progress struct {
	What        string // "cards" or "server entries"
	Done, Total int
}

// ApplyBulk writes a bulk plan: the cards in atomic writes of at most
// MaxWrite cards that each hold whole namespaces (a namespace's change is
// never split, so it is written entirely or not at all), then the changed
// server entries in atomic writes of at most MaxWrite. progress, when not
// nil, is told after every write. A failed write stops the import: the
// writes before it stay (a rerun completes the import, since it is
// idempotent) and the error says how far it got.
func ApplyBulk(ctx context.Context, cat BulkCatalog, b BulkPlan, progress func(Progress)) error {
	total := 0
	for _, p := range b.Plans {
		total += len(p.Writes())
	}
	done := 0
	var batch []cards.Card
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if err := cat.Put(ctx, batch); err != nil {
			return fmt.Errorf("%d of %d cards written; the next %d were not: %w", done, total, len(batch), err)
		}
		done += len(batch)
		batch = batch[:0]
		if progress != nil {
			progress(Progress{What: "cards", Done: done, Total: total})
		}
		return nil
	}
	for _, p := range b.Plans {
		w := p.Writes()
		if len(batch)+len(w) > MaxWrite {
			if err := flush(); err != nil {
				return err
			}
		}
		batch = append(batch, w...)
	}
	if err := flush(); err != nil {
		return err
	}
	var entries []cards.ServerInfo
	for _, s := range b.Servers {
		if s.Action == Create || s.Action == Update {
			entries = append(entries, s.Entry)
		}
	}
	for start := 0; start < len(entries); start += MaxWrite {
		part := entries[start:min(start+MaxWrite, len(entries))]
		if err := cat.PutServers(ctx, part); err != nil {
			return fmt.Errorf("the cards are written, and %d of %d server entries; the next %d were not (run the import again): %w", start, len(entries), len(part), err)
		}
		if progress != nil {
			progress(Progress{What: "server entries", Done: start + len(part), Total: len(entries)})
		}
	}
	return nil
}

// Servers implements BulkCatalog.
func (s StoreCatalog) Servers(ctx context.Context, tenant string) ([]cards.ServerInfo, error) {
	return s.Store.Servers(ctx, tenant)
}
