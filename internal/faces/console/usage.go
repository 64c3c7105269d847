package console

import (
	"cmp"
	"encoding/json"
	"net/http"
	"slices"
	"time"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/telemetry/feedback"
)

// MaxUsageCallers bounds the callers the usage page lists per tenant (the
// most active first).
const MaxUsageCallers = 20

type hotRow struct {
	Key       cards.Key
	Uses      float64
	Share     float64
	Candidate bool
	Active    bool
}

type callerPins struct {
	SubjectHash string
	Uses        float64
	Pins        []hotRow
	AlwaysLoad  string // the pins as a DiscoverTools always_load value
}

type tenantUsage struct {
	Tenant     string
	Tools      []hotRow
	AlwaysLoad string
	Callers    []callerPins
	Held       []feedback.Held
}

type usageData struct {
	Tenants  []string
	Tenant   string
	Days     int
	DaysOpts []int
	AutoPins int
	Usage    []tenantUsage
}

// alwaysLoad renders pins as the JSON of DiscoverTools' always_load.
func alwaysLoad(rows []hotRow) string {
	type ref struct {
		Server string `json:"server"`
		Name   string `json:"name"`
	}
	var refs []ref
	for _, r := range rows {
		refs = append(refs, ref{r.Key.Server, r.Key.Name})
	}
	if len(refs) == 0 {
		return ""
	}
	b, _ := json.Marshal(refs)
	return string(b)
}

// hotRows turns a tally into its first n rows; the candidate pins (at
// most feedback.MaxPins) are among the tenant's active cards only.
func hotRows(tenant string, tools []feedback.HotTool, active map[cards.Key]bool, n int) []hotRow {
	var out []hotRow
	pins := 0
	for _, t := range tools[:min(n, len(tools))] {
		k := cards.Key{Tenant: tenant, Server: t.Server, Name: t.Name}
		cand := active[k] && pins < feedback.MaxPins && feedback.IsCandidate(t)
		if cand {
			pins++
		}
		out = append(out, hotRow{Key: k, Uses: t.Uses, Share: t.Share, Candidate: cand, Active: active[k]})
	}
	return out
}

func (c *Console) usagePage(w http.ResponseWriter, r *http.Request, s *session) {
	ctx := r.Context()
	tenant, days, err := missFilter(r)
	if err != nil {
		c.fail(w, r, "Usage", err)
		return
	}
	now := time.Now()
	all, err := c.feedback.Events()
	if err != nil {
		c.fail(w, r, "Usage", err)
		return
	}
	var since time.Time
	if days > 0 {
		since = now.AddDate(0, 0, -days)
	}
	var events []feedback.Event
	for _, e := range all {
		if (tenant == "" || e.Tenant == tenant) && !e.Time.Before(since) {
			events = append(events, e)
		}
	}
	hot := feedback.HotFromEvents(events)
	tenants, err := c.tenants.Tenants(ctx)
	if err != nil {
		c.fail(w, r, "Usage", err)
		return
	}
	d := usageData{Tenants: tenants, Tenant: tenant, Days: days, DaysOpts: []int{7, 30, 90, 0}, AutoPins: c.cfg.AutoPins}
	var held []feedback.Held
	if c.cfg.Guard != nil {
		held = c.cfg.Guard.Held()
	}
	shown := tenants
	if tenant != "" {
		shown = []string{tenant}
	}
	for _, ten := range shown {
		tools := hot.Tenant(ten, now)
		var heldHere []feedback.Held
		for _, h := range held {
			if h.Tenant == ten {
				heldHere = append(heldHere, h)
			}
		}
		if len(tools) == 0 && len(heldHere) == 0 {
			continue
		}
		cs, err := tenantCards(ctx, c.cfg.Store, ten, cards.StatusActive)
		if err != nil {
			c.fail(w, r, "Usage", err)
			return
		}
		active := map[cards.Key]bool{}
		for _, cd := range cs {
			active[cd.Key()] = true
		}
		u := tenantUsage{Tenant: ten, Tools: hotRows(ten, tools, active, 20), Held: heldHere}
		var pins []hotRow
		for _, row := range u.Tools {
			if row.Candidate {
				pins = append(pins, row)
			}
		}
		u.AlwaysLoad = alwaysLoad(pins)
		for _, sh := range hot.Callers(ten) {
			ct := hot.Caller(ten, sh, now)
			cp := callerPins{SubjectHash: sh}
			for _, t := range ct {
				cp.Uses += t.Uses
			}
			for _, row := range hotRows(ten, ct, active, feedback.MaxPins) {
				if row.Candidate {
					cp.Pins = append(cp.Pins, row)
				}
			}
			cp.AlwaysLoad = alwaysLoad(cp.Pins)
			u.Callers = append(u.Callers, cp)
		}
		slices.SortFunc(u.Callers, func(a, b callerPins) int {
			return cmp.Or(cmp.Compare(b.Uses, a.Uses), cmp.Compare(a.SubjectHash, b.SubjectHash))
		})
		u.Callers = u.Callers[:min(len(u.Callers), MaxUsageCallers)]
		d.Usage = append(d.Usage, u)
	}
	c.render(w, r, 0, "usage", page{Title: "Usage", Nav: "usage", Session: s, Data: d})
}
