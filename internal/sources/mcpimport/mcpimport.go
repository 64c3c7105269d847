// Package mcpimport turns an MCP server's tools/list into capability cards
// of kind mcp_tool.
package mcpimport

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed0cff8200/cardex/cards"
)

// MaxPages bounds how many tools/list pages an import follows: a server whose
// cursors never end is an error, not an endless loop.
const MaxPages = 1000

// ListAll fetches every tool of a server, following tools/list pagination to
// the last page. Any failure (including a repeated cursor) fails the whole
// listing: a partial list must never look like a complete one, or the
// tools on the missing pages would be revoked.
func ListAll(ctx context.Context, cs *mcp.ClientSession) ([]*mcp.Tool, int, error) {
	var out []*mcp.Tool
	cursor := ""
	seen := map[string]bool{}
	for page := 1; ; page++ {
		if page > MaxPages {
			return nil, page - 1, fmt.Errorf("tools/list: more than %d pages; giving up", MaxPages)
		}
		res, err := cs.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return nil, page - 1, fmt.Errorf("tools/list page %d: %w", page, err)
		}
		out = append(out, res.Tools...)
		if res.NextCursor == "" {
			return out, page, nil
		}
		if seen[res.NextCursor] {
			return nil, page, fmt.Errorf("tools/list page %d: the server repeated a cursor", page)
		}
		seen[res.NextCursor] = true
		cursor = res.NextCursor
	}
}

// Skipped is a tool that could not become a card.
type Skipped struct {
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// ToCards maps tools to normalised cards of (tenant, server). A tool whose
// name breaks the MCP tool-name rule or the reserved prefix, or whose schema
// does not compile, is skipped with the reason.
func ToCards(tenant, server string, tools []*mcp.Tool) ([]cards.Card, []Skipped) {
	var out []cards.Card
	var skipped []Skipped
	for _, t := range tools {
		if t == nil {
			continue
		}
		c, err := ToCard(tenant, server, t)
		if err != nil {
			skipped = append(skipped, Skipped{Name: printable(t.Name), Reason: err.Error()})
			continue
		}
		out = append(out, c)
	}
	return out, skipped
}

// ToCard maps one tool: description → summary (its first sentence) and
// description (the whole text), inputSchema and outputSchema kept, title as
// an alias, annotations mapped.
func ToCard(tenant, server string, t *mcp.Tool) (cards.Card, error) {
	if !cards.ValidName(t.Name) {
		return cards.Card{}, fmt.Errorf("name does not follow the MCP tool-name rule [A-Za-z0-9_.-]{1,128}")
	}
	c := cards.Card{
		Tenant: tenant,
		Server: server,
		Name:   t.Name,
		Kind:   cards.KindMCPTool,
		Status: cards.StatusActive,
	}
	desc := cards.Sanitize(t.Description)
	title := t.Title
	if title == "" && t.Annotations != nil {
		title = t.Annotations.Title
	}
	title = cards.Sanitize(title)
	c.Summary = Summary(t.Description)
	if c.Summary == "" {
		c.Summary = title
	}
	if c.Summary == "" {
		c.Summary = strings.NewReplacer("_", " ", "-", " ", ".", " ").Replace(t.Name)
	}
	if desc != c.Summary {
		c.Description = cards.CutAtWord(desc, cards.MaxDescriptionLen)
	}
	if title != "" {
		c.Aliases = []string{cards.CutAtWord(title, cards.MaxAliasLen)}
	}
	if notice := Deprecation(t.Description); notice != "" {
		c.WhenNotToUse = cards.CutAtWord(notice, cards.MaxWhenNotToUseLen)
		c.Tags = append(c.Tags, cards.TagDeprecated)
	}
	if a := t.Annotations; a != nil {
		ro, idem := a.ReadOnlyHint, a.IdempotentHint
		c.Annotations = cards.Annotations{ReadOnly: &ro, Idempotent: &idem, Destructive: a.DestructiveHint, OpenWorld: a.OpenWorldHint}
	}
	var err error
	if c.InputSchema, err = schemaJSON(t.InputSchema); err != nil {
		return cards.Card{}, fmt.Errorf("inputSchema: %w", err)
	}
	if c.OutputSchema, err = schemaJSON(t.OutputSchema); err != nil {
		return cards.Card{}, fmt.Errorf("outputSchema: %w", err)
	}
	if err := cards.Normalize(&c); err != nil {
		return cards.Card{}, err
	}
	return c, nil
}

func schemaJSON(v any) (json.RawMessage, error) {
	if v == nil {
		return nil, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	if string(b) == "null" {
		return nil, nil
	}
	return b, nil
}

// Summary is the first sentence of a description (its first paragraph,
// then up to the first '.', '!' or '?' followed by a space), sanitised and
// cut to the summary limit at a word boundary. A deprecation notice
// elsewhere in the description (Deprecation) is kept after it: a model
// that reads only the summary must still learn that the tool is on its
// way out.
func Summary(description string) string {
	text := strings.TrimSpace(description)
	if i := strings.Index(text, "\n\n"); i >= 0 {
		text = text[:i]
	}
	return WithNotice(firstSentence(cards.Sanitize(text)), Deprecation(description))
}

// WithNotice is a summary with a deprecation notice after it (unless it
// holds it already), both cut so that the whole is within the summary limit.
func WithNotice(summary, notice string) string {
	if notice == "" || strings.Contains(summary, notice) {
		return cards.CutAtWord(summary, cards.MaxSummaryLen)
	}
	notice = cards.CutAtWord(notice, cards.MaxSummaryLen/2)
	if summary == "" {
		return notice
	}
	return cards.CutAtWord(summary, cards.MaxSummaryLen-1-utf8.RuneCountInString(notice)) + " " + notice
}

// sentences splits sanitised text after every '.', '!' or '?' that a space
// or the end follows ("e.g. " and "i.e. " end none).
func sentences(text string) []string {
	var out []string
	rs := []rune(text)
	start := 0
	for i, r := range rs {
		if (r == '.' || r == '!' || r == '?') && (i+1 == len(rs) || unicode.IsSpace(rs[i+1])) {
			if i >= 3 && (string(rs[i-3:i+1]) == "e.g." || string(rs[i-3:i+1]) == "i.e.") {
				continue
			}
			out = append(out, strings.TrimSpace(string(rs[start:i+1])))
			start = i + 1
		}
	}
	if rest := strings.TrimSpace(string(rs[start:])); rest != "" {
		out = append(out, rest)
	}
	return out
}

func firstSentence(text string) string {
	if s := sentences(text); len(s) > 0 {
		return s[0]
	}
	return ""
}

// deprecated matches a sentence that opens with a deprecation notice:
// "DEPRECATED: use x", "Deprecated. Use x instead.", "(Deprecated) ...",
// "Deprecated in favour of x" — not a sentence that merely uses the word
// ("Check whether packages are deprecated").
var deprecated = regexp.MustCompile(`(?i)^[(\[*_]*deprecated\b\s*([:.!)\]—–-]|$|(in favou?r|since|use|please|and|;)\b)`)

// Deprecation is the deprecation notice of a tool's description: the first
// sentence that opens with one (and the sentence after it when the notice
// is a bare "Deprecated."), or "" when there is none.
func Deprecation(description string) string {
	ss := sentences(cards.Sanitize(description))
	for i, s := range ss {
		if !deprecated.MatchString(s) {
			continue
		}
		if len(strings.Fields(s)) == 1 && i+1 < len(ss) {
			s += " " + ss[i+1]
		}
		return s
	}
	return ""
}

func printable(s string) string {
	return cards.Cut(cards.Sanitize(s), 80)
}

// ServerInfo is the server entry an MCP server describes in its initialize
// answer: serverInfo's title (its name when there is none) as the title,
// serverInfo's description and the instructions as the description,
// sanitised and cut to the limits. The software version has no place in a
// server entry. ok is false when the answer says nothing to keep.
func ServerInfo(tenant, server string, res *mcp.InitializeResult) (cards.ServerInfo, bool) {
	si := cards.ServerInfo{Tenant: tenant, Name: server}
	if res == nil {
		return si, false
	}
	var parts []string
	if impl := res.ServerInfo; impl != nil {
		si.Title = cards.Sanitize(impl.Title)
		if si.Title == "" {
			si.Title = cards.Sanitize(impl.Name)
		}
		parts = append(parts, cards.Sanitize(impl.Description))
	}
	parts = append(parts, cards.Sanitize(res.Instructions))
	parts = slices.DeleteFunc(parts, func(s string) bool { return s == "" })
	si.Title = cards.CutAtWord(si.Title, cards.MaxSummaryLen)
	si.Description = cards.CutAtWord(strings.Join(parts, " "), cards.MaxDescriptionLen)
	return si, si.Title != "" || si.Description != ""
}
