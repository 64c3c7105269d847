// Package catalogsync turns a freshly imported set of cards (from an MCP
// server's tools/list or an OpenAPI document) into changes to one server
// namespace of a tenant's catalogue: new tools are created, changed ones
// updated, vanished ones revoked (never deleted), and the whole change is
// written in one atomic put.
package catalogsync

import (
	"context"
	"fmt"
	"slices"

	"github.com/seed0cff8200/cardex/cards"
)

// Catalog is the part of the catalogue an import needs. Put must be atomic.
type Catalog interface {
	// List returns every card of (tenant, server), any status.
	List(ctx context.Context, tenant, server string) ([]cards.Card, error)
	// Put writes cards atomically (all or nothing).
	Put(ctx context.Context, cs []cards.Card) error
}

// Action is what an import does to one card.
type Action string

// Actions.
const (
	Create      Action = "create"
	Update      Action = "update"
	Revoke      Action = "revoke"
	Unchanged   Action = "unchanged"
	KeptRevoked Action = "kept_revoked" // back on the server, but revoked here: left revoked
	Reactivate  Action = "reactivate"   // back on the server and reactivated (Options.Reactivate)
)

// Change is one card of a plan. Card is the card as it will be written (or,
// for Unchanged and KeptRevoked, as it is stored).
type Change struct {
	Action Action
	Card   cards.Card
	// Fields lists what differs, for updates.
	Fields []string
	// Defaulted says the card's required scopes are the server's default
	// (DefaultScopes): the source named none and the import gave none.
	Defaulted bool
}

// Plan is the diff between the stored namespace and an import.
type Plan struct {
	Tenant, Server string
	Changes        []Change // in name order
}

// Count returns how many changes have the action.
func (p Plan) Count(a Action) int {
	n := 0
	for _, c := range p.Changes {
		if c.Action == a {
			n++
		}
	}
	return n
}

// Writes are the cards a plan writes.
func (p Plan) Writes() []cards.Card {
	var out []cards.Card
	for _, c := range p.Changes {
		switch c.Action {
		case Create, Update, Revoke, Reactivate:
			out = append(out, c.Card)
		}
	}
	return out
}

// Options steer the diff.
type Options struct {
	// Kind is the kind of card the import owns: only stored cards of this
	// kind are revoked when they vanish.
	Kind cards.Kind
	// Scopes are added to the required scopes of new cards (to those the
	// source itself names, such as OpenAPI OAuth scopes). Stored cards keep
	// theirs (a platform team may have tightened them) unless
	// OverrideScopes. A card that would require no scope at all gets its
	// server's default instead (DefaultScopes): an import never opens a
	// tool to every caller of the tenant.
	Scopes         []string
	OverrideScopes bool
	// Reactivate turns revoked cards whose tool is back on the server
	// active again; by default they stay revoked, because a revocation may
	// have been a deliberate decision.
	Reactivate bool
	// Keep names tools that are still on the server but could not be
	// imported (skipped): their stored cards are neither revoked nor changed.
	Keep []string
}

// Diff compares the imported cards (all of one tenant and server, already
// normalised) with the stored ones. The import owns the fields it reads from
// the source: kind, summary, description, schemas and annotations. Fields a
// platform team curates (aliases, tags, when_not_to_use, required scopes
// unless OverrideScopes) are kept from the stored card, except that an
// empty when_not_to_use takes the source's (a deprecation notice) and a
// tool the source deprecates gets the deprecated tag.
func Diff(tenant, server string, stored, imported []cards.Card, opt Options) (Plan, error) {
	plan := Plan{Tenant: tenant, Server: server}
	byName := make(map[string]cards.Card, len(stored))
	for _, c := range stored {
		byName[c.Name] = c
	}
	seen := map[string]bool{}
	for _, in := range imported {
		if in.Tenant != tenant || in.Server != server {
			return Plan{}, fmt.Errorf("imported card %s is not in %s/%s", in.Key(), tenant, server)
		}
		if seen[in.Name] {
			return Plan{}, fmt.Errorf("the source lists tool %q twice", in.Name)
		}
		seen[in.Name] = true
		old, ok := byName[in.Name]
		if !ok {
			c := in.Clone()
			defaulted := scope(&c, opt.Scopes)
			c.Status = cards.StatusActive
			c.Version = 0
			if err := cards.Normalize(&c); err != nil {
				return Plan{}, fmt.Errorf("tool %q: %w", in.Name, err)
			}
			plan.Changes = append(plan.Changes, Change{Action: Create, Card: c, Defaulted: defaulted})
			continue
		}
		want := old.Clone()
		want.Kind = in.Kind
		want.Summary = in.Summary
		want.Description = in.Description
		want.InputSchema = in.InputSchema
		want.OutputSchema = in.OutputSchema
		want.Annotations = in.Annotations
		if len(want.Aliases) == 0 {
			want.Aliases = in.Aliases
		}
		if want.WhenNotToUse == "" {
			want.WhenNotToUse = in.WhenNotToUse
		}
		if slices.Contains(in.Tags, cards.TagDeprecated) && !slices.Contains(want.Tags, cards.TagDeprecated) {
			want.Tags = append(slices.Clone(want.Tags), cards.TagDeprecated)
		}
		defaulted := false
		if opt.OverrideScopes {
			want.RequiredScopes = slices.Clone(in.RequiredScopes)
			defaulted = scope(&want, opt.Scopes)
		}
		action := Update
		switch old.Status {
		case cards.StatusRevoked:
			if opt.Reactivate {
				want.Status, action = cards.StatusActive, Reactivate
			} else {
				plan.Changes = append(plan.Changes, Change{Action: KeptRevoked, Card: old})
				continue
			}
		}
		if err := cards.Normalize(&want); err != nil {
			return Plan{}, fmt.Errorf("tool %q: %w", in.Name, err)
		}
		want.Version = old.Version // optimistic concurrency: fail if it moved meanwhile
		if action == Update && cards.SameContent(&want, &old) {
			plan.Changes = append(plan.Changes, Change{Action: Unchanged, Card: old})
			continue
		}
		plan.Changes = append(plan.Changes, Change{Action: action, Card: want, Fields: changedFields(&old, &want), Defaulted: defaulted})
	}
	keep := map[string]bool{}
	for _, n := range opt.Keep {
		keep[n] = true
	}
	for _, old := range stored {
		if seen[old.Name] || keep[old.Name] || old.Kind != opt.Kind || old.Status == cards.StatusRevoked {
			continue
		}
		c := old.Clone()
		c.Status = cards.StatusRevoked
		plan.Changes = append(plan.Changes, Change{Action: Revoke, Card: c, Fields: []string{"status"}})
	}
	slices.SortFunc(plan.Changes, func(a, b Change) int {
		if a.Card.Name < b.Card.Name {
			return -1
		}
		if a.Card.Name > b.Card.Name {
			return 1
		}
		return 0
	})
	return plan, nil
}

// scope sets the required scopes of an imported card: those its source
// names plus the import's; when that is none at all, its server's default
// (and it reports true).
func scope(c *cards.Card, extra []string) bool {
	c.RequiredScopes = append(slices.Clone(c.RequiredScopes), extra...)
	if len(c.RequiredScopes) > 0 {
		return false
	}
	c.RequiredScopes = []string{DefaultScope(c)}
	return true
}

// The default scopes of an imported tool that names none: the server's
// name and the tool's effect, so that a platform team opens a server's
// tools by granting SERVER:read (or SERVER:* for all of them).
const (
	ReadSuffix  = ":read"  // read-only tools (annotation read_only)
	WriteSuffix = ":write" // tools that are neither read-only nor declared destructive
	AdminSuffix = ":admin" // destructive tools (annotation destructive)
)

// DefaultScope is the scope an imported card gets when neither its source
// nor the import names one: SERVER:read when it is read-only, SERVER:admin
// when it is destructive, SERVER:write otherwise (a tool that says nothing
// about its effects counts as writing).
func DefaultScope(c *cards.Card) string {
	switch a := c.Annotations; {
	case a.ReadOnly != nil && *a.ReadOnly:
		return c.Server + ReadSuffix
	case a.Destructive != nil && *a.Destructive:
		return c.Server + AdminSuffix
	default:
		return c.Server + WriteSuffix
	}
}

func changedFields(a, b *cards.Card) []string {
	var out []string
	add := func(name string, differ bool) {
		if differ {
			out = append(out, name)
		}
	}
	add("kind", a.Kind != b.Kind)
	add("status", a.Status != b.Status)
	add("summary", a.Summary != b.Summary)
	add("description", a.Description != b.Description)
	add("aliases", !slices.Equal(a.Aliases, b.Aliases))
	add("tags", !slices.Equal(a.Tags, b.Tags))
	add("when_not_to_use", a.WhenNotToUse != b.WhenNotToUse)
	add("required_scopes", !slices.Equal(a.RequiredScopes, b.RequiredScopes))
	add("input_schema", string(a.InputSchema) != string(b.InputSchema))
	add("output_schema", string(a.OutputSchema) != string(b.OutputSchema))
	add("annotations", !sameAnnotations(a.Annotations, b.Annotations))
	return out
}

func sameAnnotations(a, b cards.Annotations) bool {
	eq := func(x, y *bool) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return eq(a.ReadOnly, b.ReadOnly) && eq(a.Destructive, b.Destructive) && eq(a.Idempotent, b.Idempotent) && eq(a.OpenWorld, b.OpenWorld)
}

// Apply writes a plan in one atomic put; a plan without writes writes nothing.
func Apply(ctx context.Context, cat Catalog, plan Plan) error {
	w := plan.Writes()
	if len(w) == 0 {
		return nil
	}
	if len(w) > 1000 {
		return fmt.Errorf("the import changes %d cards; one atomic write holds at most 1,000", len(w))
	}
	return cat.Put(ctx, w)
}

// StoreCatalog adapts a cards.Store (an embedded store opened directly).
type StoreCatalog struct{ Store cards.Store }

// List pages through the namespace.
func (s StoreCatalog) List(ctx context.Context, tenant, server string) ([]cards.Card, error) {
	var out []cards.Card
	q := cards.ListQuery{Tenant: tenant, Server: server, Limit: cards.MaxPageSize}
	for {
		p, err := s.Store.List(ctx, q)
		if err != nil {
			return nil, err
		}
		out = append(out, p.Cards...)
		if p.NextCursor == "" {
			return out, nil
		}
		q.Cursor = p.NextCursor
	}
}

// Put writes atomically.
func (s StoreCatalog) Put(ctx context.Context, cs []cards.Card) error {
	_, err := s.Store.Put(ctx, cs)
	return err
}
