package eval

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/retriever"
)

// NoServer is the server namespace of tools from a catalogue without
// servers (MetaTool). It is a lone separator, so neither leg of the search
// sees a word in it.
const NoServer = "_"

// Catalog is a dataset's tools as cards of one tenant, with the way back
// from a card's key to the tool's label.
type Catalog struct {
	Tenant string
	Cards  []cards.Card
	// Servers are the dataset's server entries (servers.jsonl) whose
	// server has a card here.
	Servers []cards.ServerInfo
	labels  map[[2]string]string // (server, name) → label
	// SchemasDropped lists, as "label: reason", the tools whose input
	// schema did not pass the card rules (it is left off the card).
	SchemasDropped []string
}

// Label returns the dataset label of the card (server, name), or "" when
// the key is not one of the catalogue's.
func (c *Catalog) Label(server, name string) string { return c.labels[[2]string{server, name}] }

// NewCatalog turns a dataset's tools into cards for tenant, the way a
// platform team would register an imported MCP tool:
//
//   - server = the tool's server (NoServer when it has none), name = the
//     bare tool name, kind mcp_tool (function when there is no server);
//   - summary = the description's first sentence, at most
//     cards.MaxSummaryLen characters (cut at a word); the split tool name
//     when the description is empty;
//   - description = the whole description (at most cards.MaxDescriptionLen
//     characters) when it says more than the summary;
//   - input_schema as published; no aliases, tags, scopes or
//     when_not_to_use, since the datasets have none;
//   - search_examples from the dataset's Examples, cut to the card limits,
//     as a person's (the one who runs the evaluation applies them). A card
//     without examples says so with a source and no examples, which clears
//     examples an earlier run left on a server.
//
// Every card is normalised here, so a registration cannot fail on one bad
// tool: a schema that breaks the card rules is dropped from its card and
// listed in SchemasDropped; any other broken rule is an error.
func NewCatalog(d *Dataset, tenant string) (*Catalog, error) {
	c := &Catalog{Tenant: tenant, labels: make(map[[2]string]string, len(d.Tools))}
	for i := range d.Tools {
		t := &d.Tools[i]
		card := ToolCard(t, tenant)
		examples := cardExamples(d.Examples[t.Name])
		card.SearchExamples, card.ExamplesSource = examples, &cards.ExamplesSource{Author: cards.AuthorPerson}
		if err := cards.Normalize(&card); err != nil {
			fe, ok := err.(*cards.FieldError)
			if !ok || fe.Field != "input_schema" {
				return nil, fmt.Errorf("tool %s: %w", t.Name, err)
			}
			card = ToolCard(t, tenant)
			card.SearchExamples, card.ExamplesSource = examples, &cards.ExamplesSource{Author: cards.AuthorPerson}
			card.InputSchema = nil
			if err := cards.Normalize(&card); err != nil {
				return nil, fmt.Errorf("tool %s: %w", t.Name, err)
			}
			reason, _, _ := strings.Cut(fe.Error(), "\n") // the first line; the rest is the validator's trace
			c.SchemasDropped = append(c.SchemasDropped, t.Name+": "+reason)
		}
		k := [2]string{card.Server, card.Name}
		if prev, dup := c.labels[k]; dup {
			return nil, fmt.Errorf("tools %s and %s both become card %s/%s", prev, t.Name, k[0], k[1])
		}
		c.labels[k] = t.Name
		c.Cards = append(c.Cards, card)
	}
	has := map[string]bool{}
	for _, card := range c.Cards {
		has[card.Server] = true
	}
	for _, s := range d.Servers {
		if has[s.Server] {
			c.Servers = append(c.Servers, cards.ServerInfo{Tenant: tenant, Name: s.Server,
				Title: cards.Sanitize(s.Title), Description: cards.Sanitize(s.Description)})
		}
	}
	return c, nil
}

// cardExamples cuts a tool's examples to the card limits: the first
// cards.MaxSearchExamples, each at most cards.MaxSearchExampleLen
// characters.
func cardExamples(ex []string) []string {
	ex = ex[:min(len(ex), cards.MaxSearchExamples)]
	out := make([]string, len(ex))
	for i, e := range ex {
		out[i] = cutRunes(cards.Sanitize(e), cards.MaxSearchExampleLen)
	}
	return out
}

// ToolCard maps one tool to a card (not yet normalised); see NewCatalog.
func ToolCard(t *Tool, tenant string) cards.Card {
	server, kind := t.Server, cards.KindMCPTool
	if server == "" {
		server, kind = NoServer, cards.KindFunction
	}
	desc := cards.Sanitize(t.Description)
	summary := FirstSentence(desc, cards.MaxSummaryLen)
	if summary == "" {
		summary = retriever.SplitIdentifiers(t.BareName())
	}
	card := cards.Card{
		Tenant:  tenant,
		Server:  server,
		Name:    t.BareName(),
		Kind:    kind,
		Summary: summary,
	}
	if desc != summary {
		card.Description = cutRunes(desc, cards.MaxDescriptionLen)
	}
	if t.HasSchema() {
		card.InputSchema = append([]byte(nil), t.InputSchema...)
	}
	return card
}

// FirstSentence returns the text up to and including the first sentence end
// ('.', '!' or '?' followed by a space, or '。', '！', '？'), or the whole
// text when it has none; at most limit characters, cut at a word boundary
// with "…" when longer.
func FirstSentence(s string, limit int) string {
	s = strings.TrimSpace(s)
	rs := []rune(s)
	end := len(rs)
scan:
	for i, r := range rs {
		switch r {
		case '。', '！', '？':
			end = i + 1
			break scan
		case '.', '!', '?':
			if i+1 < len(rs) && unicode.IsSpace(rs[i+1]) {
				end = i + 1
				break scan
			}
		}
	}
	return cutRunes(string(rs[:end]), limit)
}

// cutRunes shortens s to at most limit characters, cutting at the last
// space of the allowed part (if there is one in its second half) and
// ending with "…".
func cutRunes(s string, limit int) string {
	if utf8.RuneCountInString(s) <= limit {
		return s
	}
	rs := []rune(s)[:limit-1]
	if i := lastSpace(rs); i > len(rs)/2 {
		rs = rs[:i]
	}
	return strings.TrimRightFunc(string(rs), unicode.IsSpace) + "…"
}

func lastSpace(rs []rune) int {
	for i := len(rs) - 1; i >= 0; i-- {
		if unicode.IsSpace(rs[i]) {
			return i
		}
	}
	return -1
}
