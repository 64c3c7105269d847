package feedback

import (
	"fmt"
	"slices"
	"strings"
)

// ReviewQuery is one recorded miss as a row of an eval queries.jsonl, for a
// person to review before it joins a labelled set: Expected holds the tool
// the signal points to ("server/name"), or nothing when none fit and the
// reviewer must say which tool was needed.
type ReviewQuery struct {
	ID       string   `json:"id"`
	Query    string   `json:"query"`
	Expected []string `json:"expected"`
	// Source: outcome, implicit_miss, none_fit or low_confidence.
	Source string `json:"source"`
	Tenant string `json:"tenant"`
	// Shortlist is what cardex returned, for the reviewer's context.
	Shortlist []string `json:"shortlist,omitempty"`
	Time      string   `json:"time"`
}

// ReviewQueries turns recorded misses into review rows: one per distinct
// (tenant, query, tool), in log order. Events whose query was not kept in
// clear (hash or off mode) cannot become queries; they are counted in
// skipped. Hits (outcomes that were not misses) are left out.
func ReviewQueries(events []Event) (out []ReviewQuery, skipped int) {
	seen := map[string]bool{}
	for _, e := range events {
		if !e.Miss {
			continue
		}
		if e.Query == "" {
			skipped++
			continue
		}
		source := e.Type
		var expected []string
		switch {
		case e.Tool != nil:
			expected = []string{e.Tool.Server + "/" + e.Tool.Name}
		case e.NoneFit:
			source = "none_fit"
		}
		key := e.Tenant + "\x00" + strings.ToLower(e.Query) + "\x00" + strings.Join(expected, ",")
		if seen[key] {
			continue
		}
		seen[key] = true
		var short []string
		for _, t := range e.Shortlist {
			short = append(short, t.Server+"/"+t.Name)
		}
		out = append(out, ReviewQuery{
			ID:        fmt.Sprintf("log-%s-%d", e.DiscoveryID, len(out)+1),
			Query:     e.Query,
			Expected:  slices.Clip(append([]string{}, expected...)),
			Source:    source,
			Tenant:    e.Tenant,
			Shortlist: short,
			Time:      e.Time.UTC().Format("2006-01-02T15:04:05Z"),
		})
	}
	return out, skipped
}
