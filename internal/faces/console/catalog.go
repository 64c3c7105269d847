package console

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/access/audittrail"
	"github.com/seed0cff8200/cardex/internal/access/ratelimit"
	"github.com/seed0cff8200/cardex/internal/ops/lint"
	"github.com/seed0cff8200/cardex/internal/sources/enrich"
	"github.com/seed0cff8200/cardex/internal/telemetry/feedback"
)

// CatalogPageSize is how many cards the catalogue page lists at once.
const CatalogPageSize = 100

type serverRow struct {
	Name   string
	Entry  *cards.ServerInfo
	Counts map[string]int
	Total  int
}

type catalogData struct {
	Tenants  []string
	Tenant   string
	Servers  []serverRow
	Server   string
	Status   string
	Kind     string
	Query    string
	Cards    []cards.Card
	Matched  int
	Total    int
	Page     int
	PrevURL  string
	NextURL  string
	Statuses []cards.Status
	Kinds    []cards.Kind
	// Enrichment is the enrichment worker's status (nil: none runs).
	Enrichment *enrich.Status
}

// tenantCards reads every card of a tenant, in (server, name) order.
func tenantCards(ctx context.Context, st cards.Store, tenant string, status ...cards.Status) ([]cards.Card, error) {
	var out []cards.Card
	q := cards.ListQuery{Tenant: tenant, Status: status, Limit: cards.MaxPageSize}
	for {
		p, err := st.List(ctx, q)
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

func (c *Console) catalogPage(w http.ResponseWriter, r *http.Request, s *session) {
	ctx := r.Context()
	q := r.URL.Query()
	d := catalogData{Tenant: q.Get("tenant"), Server: q.Get("server"), Status: q.Get("status"), Kind: q.Get("kind"), Query: strings.TrimSpace(q.Get("q")),
		Statuses: []cards.Status{cards.StatusActive, cards.StatusPending, cards.StatusRevoked},
		Kinds:    []cards.Kind{cards.KindMCPTool, cards.KindRESTOperation, cards.KindSQLView, cards.KindFunction}}
	if c.cfg.Enrichment != nil {
		st := c.cfg.Enrichment.Status()
		d.Enrichment = &st
	}
	tenants, err := c.tenants.Tenants(ctx)
	if err != nil {
		c.fail(w, r, "Catalogue", err)
		return
	}
	d.Tenants = tenants
	if d.Tenant == "" && len(tenants) > 0 {
		d.Tenant = tenants[0]
	}
	if d.Tenant == "" {
		c.render(w, r, 0, "catalog", page{Title: "Catalogue", Nav: "catalog", Session: s, Data: d})
		return
	}
	if !cards.ValidName(d.Tenant) {
		c.fail(w, r, "Catalogue", cards.Invalid("tenant", "must match [A-Za-z0-9_.-]{1,%d}", cards.MaxNameLen))
		return
	}
	all, err := tenantCards(ctx, c.cfg.Store, d.Tenant)
	if err != nil {
		c.fail(w, r, "Catalogue", err)
		return
	}
	entries, err := c.cfg.Store.Servers(ctx, d.Tenant)
	if err != nil {
		c.fail(w, r, "Catalogue", err)
		return
	}
	d.Servers = serverRows(all, entries)
	d.Total = len(all)
	terms := strings.Fields(strings.ToLower(d.Query))
	var matched []cards.Card
	for i := range all {
		cd := &all[i]
		if (d.Server == "" || cd.Server == d.Server) && (d.Status == "" || string(cd.Status) == d.Status) &&
			(d.Kind == "" || string(cd.Kind) == d.Kind) && matches(cd, terms) {
			matched = append(matched, *cd)
		}
	}
	d.Matched = len(matched)
	d.Page, _ = strconv.Atoi(q.Get("page"))
	d.Page = max(d.Page, 1)
	from := min((d.Page-1)*CatalogPageSize, len(matched))
	to := min(from+CatalogPageSize, len(matched))
	d.Cards = matched[from:to]
	link := func(p int) string {
		v := url.Values{"tenant": {d.Tenant}, "server": {d.Server}, "status": {d.Status}, "kind": {d.Kind}, "q": {d.Query}, "page": {strconv.Itoa(p)}}
		return Path + "catalog?" + v.Encode()
	}
	if d.Page > 1 {
		d.PrevURL = link(d.Page - 1)
	}
	if to < len(matched) {
		d.NextURL = link(d.Page + 1)
	}
	c.render(w, r, 0, "catalog", page{Title: "Catalogue", Nav: "catalog", Session: s, Data: d})
}

// matches says whether every search term is in the card's name, server,
// summary, aliases, tags or scopes.
func matches(c *cards.Card, terms []string) bool {
	if len(terms) == 0 {
		return true
	}
	hay := strings.ToLower(strings.Join(append(append(append([]string{c.Server, c.Name, c.Summary, c.Description}, c.Aliases...), c.Tags...), c.RequiredScopes...), "\n"))
	for _, t := range terms {
		if !strings.Contains(hay, t) {
			return false
		}
	}
	return true
}

// serverRows are the tenant's servers: every server entry and every server
// its cards name, with the cards counted by status.
func serverRows(all []cards.Card, entries []cards.ServerInfo) []serverRow {
	byName := map[string]*serverRow{}
	row := func(name string) *serverRow {
		if byName[name] == nil {
			byName[name] = &serverRow{Name: name, Counts: map[string]int{}}
		}
		return byName[name]
	}
	for i := range entries {
		row(entries[i].Name).Entry = &entries[i]
	}
	for i := range all {
		sr := row(all[i].Server)
		sr.Counts[string(all[i].Status)]++
		sr.Total++
	}
	out := make([]serverRow, 0, len(byName))
	for _, sr := range byName {
		out = append(out, *sr)
	}
	slices.SortFunc(out, func(a, b serverRow) int { return cmp.Compare(a.Name, b.Name) })
	return out
}

type cardData struct {
	Card        cards.Card
	Key         cards.Key
	Entry       *cards.ServerInfo
	Input       string
	Output      string
	Learned     []string
	Findings    []lint.Finding
	Suggestions []string
	Misses      []missRow
	MissCount   int
	Statuses    []cards.Status
	Examples    examplesData
}

// MaxCardMisses is how many of a card's latest misses its page lists.
const MaxCardMisses = 20

func keyOf(r *http.Request) (cards.Key, error) {
	k := cards.Key{Tenant: r.PathValue("tenant"), Server: r.PathValue("server"), Name: r.PathValue("name")}
	for _, f := range []struct{ field, v string }{{"tenant", k.Tenant}, {"server", k.Server}, {"name", k.Name}} {
		if !cards.ValidName(f.v) {
			return k, cards.Invalid(f.field, "must match [A-Za-z0-9_.-]{1,%d}", cards.MaxNameLen)
		}
	}
	return k, nil
}

func (c *Console) cardPage(w http.ResponseWriter, r *http.Request, s *session) {
	c.showCard(w, r, s, 0, "", r.URL.Query().Get("done"))
}

// showCard renders a card's page, with an error from a write when there
// was one.
func (c *Console) showCard(w http.ResponseWriter, r *http.Request, s *session, status int, errMsg, notice string) {
	ctx := r.Context()
	k, err := keyOf(r)
	if err != nil {
		c.fail(w, r, "Card", err)
		return
	}
	cd, err := c.cfg.Store.Get(ctx, k)
	if err != nil {
		c.fail(w, r, "Card", fmt.Errorf("card %s/%s: %w", k.Server, k.Name, err))
		return
	}
	d := cardData{Card: cd, Key: k, Input: indent(cd.InputSchema), Output: indent(cd.OutputSchema),
		Statuses: []cards.Status{cards.StatusActive, cards.StatusPending, cards.StatusRevoked}, Examples: c.examplesOf(&cd)}
	if e, err := c.cfg.Store.GetServer(ctx, k.Tenant, k.Server); err == nil {
		d.Entry = &e
	}
	if l, err := c.cfg.Store.Learned(ctx, []cards.Key{k}); err == nil {
		d.Learned = l[k]
	}
	events, err := c.feedback.Events()
	if err != nil {
		c.log.Warn("console: feedback log", "err", err)
	}
	var mine []feedback.Event
	for _, e := range events {
		if e.Miss && e.Tool != nil && e.Tenant == k.Tenant && e.Tool.Server == k.Server && e.Tool.Name == k.Name {
			mine = append(mine, e)
		}
	}
	d.MissCount = len(mine)
	for i := len(mine) - 1; i >= 0 && len(d.Misses) < MaxCardMisses; i-- {
		d.Misses = append(d.Misses, rowOf(&mine[i]))
	}
	if cd.Status == cards.StatusActive {
		active, err := tenantCards(ctx, c.cfg.Store, k.Tenant, cards.StatusActive)
		if err != nil {
			c.fail(w, r, "Card", err)
			return
		}
		fs, err := lint.Run(ctx, active, mine, c.lintEmb, lint.Options{Card: &k})
		if err != nil {
			c.fail(w, r, "Card", err)
			return
		}
		d.Findings = fs
		for _, f := range fs {
			if f.Kind == lint.KindMissed {
				d.Suggestions = f.SuggestedAliases
			}
		}
	}
	c.render(w, r, status, "card", page{Title: k.Server + "/" + k.Name, Nav: "catalog", Session: s, Error: errMsg, Notice: notice, Data: d})
}

func indent(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return string(raw)
	}
	return b.String()
}

// writeStatus sets a card's status (active, pending, revoked).
func (c *Console) writeStatus(w http.ResponseWriter, r *http.Request, s *session) {
	st := cards.Status(r.PostFormValue("status"))
	switch st {
	case cards.StatusActive, cards.StatusPending, cards.StatusRevoked:
	default:
		c.writeFailed(w, r, s, cards.Invalid("status", "%q is not one of active, pending, revoked", st))
		return
	}
	c.write(w, r, s, "status", func(cd *cards.Card) error {
		cd.Status = st
		return nil
	})
}

// writeAlias adds one alias to a card.
func (c *Console) writeAlias(w http.ResponseWriter, r *http.Request, s *session) {
	alias := cards.Sanitize(r.PostFormValue("alias"))
	c.write(w, r, s, "alias", func(cd *cards.Card) error {
		if alias == "" {
			return cards.Invalid("alias", "is empty")
		}
		if slices.ContainsFunc(cd.Aliases, func(a string) bool { return strings.EqualFold(a, alias) }) {
			return cards.Invalid("alias", "%q is already an alias of %s/%s", alias, cd.Server, cd.Name)
		}
		cd.Aliases = append(cd.Aliases, alias)
		return nil
	})
}

// write changes one card as PutCards would: with the version the page was
// loaded with as the optimistic-concurrency check, under the caller's rate
// limit, recorded in the audit trail with the credential's name, and
// visible to discovery when it returns.
func (c *Console) write(w http.ResponseWriter, r *http.Request, s *session, what string, change func(*cards.Card) error) {
	ctx := r.Context()
	k, err := keyOf(r)
	if err != nil {
		c.writeFailed(w, r, s, err)
		return
	}
	version, err := strconv.ParseInt(r.PostFormValue("version"), 10, 64)
	if err != nil || version < 1 {
		c.writeFailed(w, r, s, cards.Invalid("version", "is required: the card's version this page was loaded with"))
		return
	}
	principal := s.Catalog.Name
	release, err := c.limitWrite(principal)
	if err != nil {
		c.writeFailed(w, r, s, err)
		return
	}
	defer release()
	cd, err := c.cfg.Store.Get(ctx, k)
	if err != nil {
		c.writeFailed(w, r, s, fmt.Errorf("card %s/%s: %w", k.Server, k.Name, err))
		return
	}
	if err := change(&cd); err != nil {
		c.writeFailed(w, r, s, err)
		return
	}
	cd.Version = version
	entry := audittrail.Entry{Type: audittrail.TypeCatalogWrite, Method: "PutCards", Principal: principal, Tenant: k.Tenant, Server: k.Server, Name: k.Name, Detail: "console: " + what}
	res, err := c.cfg.Store.Put(ctx, []cards.Card{cd})
	if err != nil {
		entry.Outcome = "failed"
		entry.Detail += ": nothing written: " + err.Error()
		c.audit(entry)
		c.writeFailed(w, r, s, err)
		return
	}
	entry.Outcome, entry.AfterVersion, entry.BeforeVersion = string(res[0].Outcome), res[0].Version, version
	c.audit(entry)
	c.written(w, r, k, what+" "+string(res[0].Outcome)+", version "+strconv.FormatInt(res[0].Version, 10))
}

// limitWrite applies the caller's rate limits to one write; release ends
// it.
func (c *Console) limitWrite(principal string) (func(), error) {
	limitKey := "credential:" + principal
	if d := c.cfg.Limiter.Allow(ratelimit.Call, limitKey, ""); d != nil {
		return nil, d
	}
	release, d := c.cfg.Limiter.Acquire(limitKey)
	if d != nil {
		return nil, d
	}
	return release, nil
}

// written makes a write visible to discovery and shows the card again,
// saying what was done.
func (c *Console) written(w http.ResponseWriter, r *http.Request, k cards.Key, done string) {
	if err := c.cfg.Retriever.Sync(context.WithoutCancel(r.Context())); err != nil {
		c.log.Error("retriever sync after a console write failed; the periodic sync will retry", "err", err)
	}
	http.Redirect(w, r, cardURL(k)+"?done="+url.QueryEscape(done), http.StatusSeeOther)
}

func (c *Console) writeFailed(w http.ResponseWriter, r *http.Request, s *session, err error) {
	st, msg := httpStatus(w, c.log, err)
	if st == http.StatusNotFound {
		c.fail(w, r, "Card", err)
		return
	}
	c.showCard(w, r, s, st, msg, "")
}

func (c *Console) audit(e audittrail.Entry) {
	if c.cfg.Trail == nil {
		return
	}
	if err := c.cfg.Trail.Append("", e); err != nil {
		c.log.Error("audit trail append failed", "err", err)
	}
}

func pathEscape(s string) string { return url.PathEscape(s) }
