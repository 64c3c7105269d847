package console

import (
	"cmp"
	"encoding/json"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/ops/lint"
	"github.com/seed0cff8200/cardex/internal/telemetry/feedback"
)

// Kinds of recorded misses, as the misses page tells them apart.
const (
	missLowConfidence = "low_confidence" // a discovery whose best match was weak
	missImplicit      = "implicit_miss"  // a tool described or authorized that no recent shortlist held
	missNoneFit       = "none_fit"       // an outcome saying no tool of the shortlist fit
	missOutcome       = "used_elsewhere" // an outcome naming a used tool the shortlist lacked
)

var missKinds = []string{missLowConfidence, missImplicit, missNoneFit, missOutcome}

var missLabels = map[string]string{
	missLowConfidence: "low confidence",
	missImplicit:      "implicit miss",
	missNoneFit:       "none fit",
	missOutcome:       "used a tool not shortlisted",
}

// missKind classifies a feedback event; "" for one that is not a miss.
func missKind(e *feedback.Event) string {
	if !e.Miss {
		return ""
	}
	switch {
	case e.Type == feedback.TypeLowConfidence:
		return missLowConfidence
	case e.Type == feedback.TypeImplicitMiss:
		return missImplicit
	case e.NoneFit:
		return missNoneFit
	case e.Type == feedback.TypeOutcome:
		return missOutcome
	}
	return ""
}

type missRow struct {
	Time      time.Time
	Tenant    string
	Kind      string
	Label     string
	Query     string
	Hashed    bool
	Tool      *cards.Key
	Shortlist []string
	PlayURL   string
}

func rowOf(e *feedback.Event) missRow {
	k := missKind(e)
	r := missRow{Time: e.Time, Tenant: e.Tenant, Kind: k, Label: missLabels[k], Query: e.Query, Hashed: e.Query == "" && e.QueryHash != ""}
	if e.Tool != nil {
		r.Tool = &cards.Key{Tenant: e.Tenant, Server: e.Tool.Server, Name: e.Tool.Name}
	}
	for _, t := range e.Shortlist {
		r.Shortlist = append(r.Shortlist, t.Server+"/"+t.Name)
	}
	if e.Query != "" {
		r.PlayURL = playURL(e.Tenant, e.Query)
	}
	return r
}

type toolMisses struct {
	Key         cards.Key
	Counts      map[string]int
	Total       int
	Last        time.Time
	Suggestions []string
	Version     int64 // 0: not an active card any more
}

type missesData struct {
	Tenants   []string
	Tenant    string
	Days      int
	DaysOpts  []int
	Total     int
	Counts    map[string]int
	Kinds     []string
	Labels    map[string]string
	Chart     string
	ChartRows []chartDay
	Tools     []toolMisses
	Unnamed   []missRow // misses that point to no tool: low confidence, none fit
	Hidden    int       // unnamed misses past MaxUnnamed
	Skipped   int       // misses whose query was not kept in clear
	ExportURL string
}

type chartDay struct {
	Day    time.Time
	Counts []int // by missKinds
}

// MaxUnnamed bounds the misses without a tool that the page lists.
const MaxUnnamed = 100

// missEvents are the feedback log's misses of a tenant ("" all) in the
// last days (0: all).
func (c *Console) missEvents(tenant string, days int, now time.Time) ([]feedback.Event, error) {
	events, err := c.feedback.Events()
	if err != nil {
		return nil, err
	}
	var since time.Time
	if days > 0 {
		since = now.AddDate(0, 0, -days)
	}
	var out []feedback.Event
	for _, e := range events {
		if missKind(&e) == "" || (tenant != "" && e.Tenant != tenant) || e.Time.Before(since) {
			continue
		}
		out = append(out, e)
	}
	return out, nil
}

func missFilter(r *http.Request) (tenant string, days int, err error) {
	q := r.URL.Query()
	tenant = q.Get("tenant")
	if tenant != "" && !cards.ValidName(tenant) {
		return "", 0, cards.Invalid("tenant", "must match [A-Za-z0-9_.-]{1,%d}", cards.MaxNameLen)
	}
	days = 30
	if v := q.Get("days"); v != "" {
		if days, err = strconv.Atoi(v); err != nil || days < 0 {
			return "", 0, cards.Invalid("days", "%q is not a number of days (0: all)", v)
		}
	}
	return tenant, days, nil
}

func (c *Console) missesPage(w http.ResponseWriter, r *http.Request, s *session) {
	ctx := r.Context()
	tenant, days, err := missFilter(r)
	if err != nil {
		c.fail(w, r, "Misses", err)
		return
	}
	now := time.Now()
	events, err := c.missEvents(tenant, days, now)
	if err != nil {
		c.fail(w, r, "Misses", err)
		return
	}
	tenants, err := c.tenants.Tenants(ctx)
	if err != nil {
		c.fail(w, r, "Misses", err)
		return
	}
	d := missesData{Tenants: tenants, Tenant: tenant, Days: days, DaysOpts: []int{7, 30, 90, 0}, Total: len(events),
		Counts: map[string]int{}, Kinds: missKinds, Labels: missLabels,
		ExportURL: Path + "misses/queries.jsonl?" + url.Values{"tenant": {tenant}, "days": {strconv.Itoa(days)}}.Encode()}
	_, d.Skipped = feedback.ReviewQueries(events)

	// Over time: one bar a day, stacked by kind.
	byDay := map[time.Time][]int{}
	for i := range events {
		e := &events[i]
		k := missKind(e)
		d.Counts[k]++
		day := e.Time.UTC().Truncate(24 * time.Hour)
		if byDay[day] == nil {
			byDay[day] = make([]int, len(missKinds))
		}
		byDay[day][slices.Index(missKinds, k)]++
	}
	if len(events) > 0 {
		first := events[0].Time.UTC().Truncate(24 * time.Hour)
		if days > 0 {
			first = now.UTC().AddDate(0, 0, -days+1).Truncate(24 * time.Hour)
		}
		for day := first; !day.After(now.UTC()); day = day.AddDate(0, 0, 1) {
			counts := byDay[day]
			if counts == nil {
				counts = make([]int, len(missKinds))
			}
			d.ChartRows = append(d.ChartRows, chartDay{Day: day, Counts: counts})
		}
		d.Chart = missChart(d.ChartRows)
	}

	// Grouped by the tool they point to.
	byTool := map[cards.Key]*toolMisses{}
	for i := range events {
		e := &events[i]
		if e.Tool == nil {
			if len(d.Unnamed) < MaxUnnamed {
				d.Unnamed = append(d.Unnamed, rowOf(e))
			} else {
				d.Hidden++
			}
			continue
		}
		k := cards.Key{Tenant: e.Tenant, Server: e.Tool.Server, Name: e.Tool.Name}
		t := byTool[k]
		if t == nil {
			t = &toolMisses{Key: k, Counts: map[string]int{}}
			byTool[k] = t
		}
		t.Counts[missKind(e)]++
		t.Total++
		t.Last = e.Time
	}
	// Suggested aliases: lint's, from the tenants' active cards.
	perTenant := map[string]bool{}
	for k := range byTool {
		perTenant[k.Tenant] = true
	}
	for ten := range perTenant {
		active, err := tenantCards(ctx, c.cfg.Store, ten, cards.StatusActive)
		if err != nil {
			c.fail(w, r, "Misses", err)
			return
		}
		for _, cd := range active {
			if t := byTool[cd.Key()]; t != nil {
				t.Version = cd.Version
			}
		}
		for _, f := range lint.Missed(active, events, 5) {
			if t := byTool[f.Card]; t != nil {
				t.Suggestions = f.SuggestedAliases
			}
		}
	}
	for _, t := range byTool {
		d.Tools = append(d.Tools, *t)
	}
	slices.SortFunc(d.Tools, func(a, b toolMisses) int {
		return cmp.Or(cmp.Compare(b.Total, a.Total), cmp.Compare(a.Key.String(), b.Key.String()))
	})
	slices.Reverse(d.Unnamed) // latest first
	c.render(w, r, 0, "misses", page{Title: "Misses", Nav: "misses", Session: s, Data: d})
}

// missesExport answers the misses as queries.jsonl rows for review, the
// rows `cardex eval --from-log` prints for the same events.
func (c *Console) missesExport(w http.ResponseWriter, r *http.Request, s *session) {
	tenant, days, err := missFilter(r)
	if err != nil {
		c.fail(w, r, "Misses", err)
		return
	}
	events, err := c.missEvents(tenant, days, time.Now())
	if err != nil {
		c.fail(w, r, "Misses", err)
		return
	}
	rows, skipped := feedback.ReviewQueries(events)
	name := "queries.jsonl"
	if tenant != "" {
		name = "queries-" + tenant + ".jsonl"
	}
	w.Header().Set("Content-Type", "application/jsonl; charset=utf-8")
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`"`)
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Cardex-Skipped", strconv.Itoa(skipped))
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, row := range rows {
		if err := enc.Encode(row); err != nil {
			return
		}
	}
}
