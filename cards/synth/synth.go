// Package synth generates a synthetic but realistic catalogue for tests,
// benchmarks and load tests: about forty servers over eight domains, tool
// names composed as verb_noun, summaries from a word bank, three aliases,
// two tags, one or two required scopes from a small set and an input schema
// with two to five properties. Generated deterministically from a seed, so
// every run sees the same cards.
package synth

import (
	"encoding/json"
	"fmt"
	"math/rand"
	"strings"

	"github.com/seed0cff8200/cardex/cards"
)

// RestrictedScopes are held by the benchmarks' restricted caller: a little
// under a third of the catalogue's scope set.
var RestrictedScopes = []string{"billing:*", "crm:read", "support:read", "support:write", "analytics:read"}

var synthDomains = []string{"billing", "crm", "support", "devops", "hr", "analytics", "storage", "identity"}

var synthServerStems = []string{"core", "cloud", "hub", "api", "ops"}

type synthVerb struct{ verb, third, syn, gerund string }

var synthVerbs = []synthVerb{
	{"get", "Gets", "fetch", "getting"},
	{"list", "Lists", "show", "listing"},
	{"create", "Creates", "add", "creating"},
	{"update", "Updates", "change", "updating"},
	{"delete", "Deletes", "remove", "deleting"},
	{"search", "Searches", "find", "searching"},
	{"export", "Exports", "download", "exporting"},
	{"import", "Imports", "upload", "importing"},
	{"archive", "Archives", "hide", "archiving"},
	{"restore", "Restores", "recover", "restoring"},
	{"assign", "Assigns", "give", "assigning"},
	{"approve", "Approves", "accept", "approving"},
	{"cancel", "Cancels", "stop", "cancelling"},
	{"sync", "Syncs", "refresh", "syncing"},
}

var synthNouns = []string{
	"order", "invoice", "ticket", "issue", "user", "customer", "payment", "refund",
	"subscription", "account", "contact", "lead", "deal", "report", "dashboard", "metric",
	"alert", "incident", "deployment", "pipeline", "build", "bucket", "file", "folder",
	"employee", "timesheet", "role", "group", "token", "webhook",
}

var synthAdjectives = []string{
	"open", "closed", "pending", "overdue", "recent", "archived", "active", "failed",
	"draft", "shared", "private", "monthly", "weekly", "critical", "unpaid", "external",
}

var synthContexts = []string{
	"a customer account", "the current workspace", "a project", "a team", "a date range",
	"a region", "the billing period", "an organisation", "a sales pipeline", "a service",
}

var synthTails = []string{
	"filtered by status and date range", "with pagination", "including audit history",
	"and notifies the owner", "by identifier", "in bulk", "with optional labels",
	"returning a summary", "sorted by most recent first", "for compliance review",
}

var synthParams = []struct{ name, typ string }{
	{"id", "string"}, {"customer_id", "string"}, {"status", "string"}, {"limit", "integer"},
	{"cursor", "string"}, {"from_date", "string"}, {"to_date", "string"}, {"query", "string"},
	{"amount", "number"}, {"currency", "string"}, {"assignee", "string"}, {"priority", "integer"},
	{"labels", "array"}, {"region", "string"}, {"dry_run", "boolean"}, {"notify", "boolean"},
}

var synthTags = []string{"read", "write", "admin", "reporting", "automation", "finance", "security", "internal"}

// synthServers returns about forty server names, each with its domain.
func synthServers() (names, domains []string) {
	for _, d := range synthDomains {
		for _, s := range synthServerStems {
			names = append(names, d+"-"+s)
			domains = append(domains, d)
		}
	}
	return names, domains
}

// Catalogue returns n distinct active cards of one tenant, the same for the
// same arguments.
func Catalogue(n int, seed int64, tenant string) []cards.Card {
	rng := rand.New(rand.NewSource(seed))
	servers, domains := synthServers()
	pick := func(s []string) string { return s[rng.Intn(len(s))] }
	seen := make(map[string]bool, n)
	out := make([]cards.Card, 0, n)
	for len(out) < n {
		si := rng.Intn(len(servers))
		server, domain := servers[si], domains[si]
		v := synthVerbs[rng.Intn(len(synthVerbs))]
		noun := pick(synthNouns)
		adj := pick(synthAdjectives)
		name := v.verb + "_" + noun
		if rng.Intn(3) == 0 {
			name = v.verb + "_" + adj + "_" + noun + "s"
		}
		for i := 2; seen[server+"/"+name]; i++ {
			name = fmt.Sprintf("%s_%s_v%d", v.verb, noun, i)
		}
		seen[server+"/"+name] = true

		summary := fmt.Sprintf("%s %s %s records for %s %s.", v.third, adj, noun, pick(synthContexts), pick(synthTails))
		aliases := []string{
			v.syn + " " + noun,
			v.gerund + " " + adj + " " + noun + "s",
			noun + " " + v.verb + " in " + domain,
		}
		tags := []string{domain, pick(synthTags)}
		scopes := []string{domain + ":" + []string{"read", "write", "admin"}[rng.Intn(3)]}
		if rng.Intn(5) == 0 {
			scopes = append(scopes, pick(synthDomains)+":read")
		}
		props := map[string]any{}
		nprops := 2 + rng.Intn(4)
		var required []string
		for len(props) < nprops {
			p := synthParams[rng.Intn(len(synthParams))]
			def := map[string]any{"type": p.typ, "description": "The " + strings.ReplaceAll(p.name, "_", " ") + " of the " + noun + "."}
			if p.typ == "array" {
				def["items"] = map[string]any{"type": "string"}
			}
			if _, dup := props[p.name]; !dup && len(required) == 0 {
				required = append(required, p.name)
			}
			props[p.name] = def
		}
		schema, _ := json.Marshal(map[string]any{"type": "object", "properties": props, "required": required})
		out = append(out, cards.Card{
			Tenant: tenant, Server: server, Name: name, Kind: cards.KindMCPTool,
			Summary: summary, Aliases: aliases, Tags: tags, RequiredScopes: scopes,
			InputSchema: schema,
		})
	}
	return out
}

// Queries returns n natural-language queries over the same vocabulary, the
// same for the same arguments.
func Queries(n int, seed int64) []string {
	rng := rand.New(rand.NewSource(seed))
	pick := func(s []string) string { return s[rng.Intn(len(s))] }
	templates := []func() string{
		func() string {
			v := synthVerbs[rng.Intn(len(synthVerbs))]
			return "how do I " + v.syn + " a " + pick(synthAdjectives) + " " + pick(synthNouns)
		},
		func() string {
			return synthVerbs[rng.Intn(len(synthVerbs))].verb + " " + pick(synthNouns) + " by " + strings.ReplaceAll(synthParams[rng.Intn(len(synthParams))].name, "_", " ")
		},
		func() string {
			return "show me " + pick(synthAdjectives) + " " + pick(synthNouns) + "s for " + pick(synthContexts)
		},
		func() string {
			return synthVerbs[rng.Intn(len(synthVerbs))].syn + " the " + pick(synthNouns) + " of " + pick(synthContexts) + " " + pick(synthTails)
		},
		func() string { return pick(synthNouns) + " " + pick(synthDomains) },
	}
	out := make([]string, n)
	for i := range out {
		out[i] = templates[i%len(templates)]()
	}
	return out
}

// examplePhrasings are the shapes of search examples a model writes for a
// tool (shared/eval/ENRICH_PROMPT.md): an everyday request, the domain's
// terms, a step of a larger task, an indirect description, a concrete
// example, a keyword query.
var examplePhrasings = []func(v synthVerb, noun, adj, ctx, domain string) string{
	func(v synthVerb, noun, adj, ctx, domain string) string {
		return "can you " + v.syn + " the " + adj + " " + noun + "s for " + ctx
	},
	func(v synthVerb, noun, adj, ctx, domain string) string {
		return v.verb + " " + domain + " " + noun + " records " + ctx
	},
	func(v synthVerb, noun, adj, ctx, domain string) string {
		return "first " + v.syn + " the " + noun + ", then send the result to the team"
	},
	func(v synthVerb, noun, adj, ctx, domain string) string {
		return "I need to take care of every " + adj + " " + noun + " before the deadline"
	},
	func(v synthVerb, noun, adj, ctx, domain string) string {
		return v.syn + " " + noun + " 4711 of " + ctx
	},
	func(v synthVerb, noun, adj, ctx, domain string) string {
		return v.gerund + " " + adj + " " + noun
	},
}

// WithExamples returns the cards with n search examples each (at most six
// shapes, cycled), written from the card's name and domain the way an
// enrichment model phrases them, the same for the same arguments; the
// input is not modified.
func WithExamples(cs []cards.Card, n int, seed int64) []cards.Card {
	if n <= 0 {
		return cs
	}
	rng := rand.New(rand.NewSource(seed))
	pick := func(s []string) string { return s[rng.Intn(len(s))] }
	out := make([]cards.Card, len(cs))
	for i := range cs {
		c := cs[i].Clone()
		verb, noun, _ := strings.Cut(c.Name, "_")
		v := synthVerbs[0]
		for _, sv := range synthVerbs {
			if sv.verb == verb {
				v = sv
			}
		}
		noun = strings.TrimSuffix(noun[strings.LastIndex(noun, "_")+1:], "s")
		domain, _, _ := strings.Cut(c.Server, "-")
		c.ExamplesSource = &cards.ExamplesSource{Author: cards.AuthorModel, Model: "synth", PromptVersion: "synth-v1"}
		for j := range n {
			c.SearchExamples = append(c.SearchExamples, examplePhrasings[j%len(examplePhrasings)](v, noun, pick(synthAdjectives), pick(synthContexts), domain)+
				strings.Repeat(" again", j/len(examplePhrasings)))
		}
		out[i] = c
	}
	return out
}
