package mcpfront

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/access/tokens"
	"github.com/seed0cff8200/cardex/internal/codec/toolname"
	"github.com/seed0cff8200/cardex/internal/execution/gateway"
)

// Listing limits.
const (
	// DefaultPageSize is how many tools a tools/list page holds in full mode.
	DefaultPageSize = 100
	// MaxDescriptionLen bounds a listed tool's description, in code points.
	MaxDescriptionLen = 500
)

// Listed is one tool of a token's tools/list.
type Listed struct {
	Tool *mcp.Tool
	// Card is the real tool; nil for a meta-tool.
	Card *cards.Card
}

// List is what tools/list shows a token, in order. Progressive: the three
// meta-tools, then the pinned tools the token may use and can call, in the
// order of always_load. Full: every tool the token may use and can call, by
// qualified name. Skipped names the tools left out because MCP cannot list
// them (no qualified name; an input schema that is not of type object).
func List(ctx context.Context, gw *gateway.Gateway, id tokens.Identity) (tools []Listed, skipped []string, err error) {
	c := callerOf(id)
	var cs []cards.Card
	if id.Disclosure == tokens.Full {
		cs, err = gw.Tools(ctx, c)
	} else {
		for _, t := range Tools() {
			tools = append(tools, Listed{Tool: t})
		}
		cs, err = gw.Pinned(ctx, c, id.Pins())
	}
	if err != nil {
		return nil, nil, err
	}
	var real []Listed
	for i := range cs {
		card := &cs[i]
		t, err := toolFor(card)
		if err != nil {
			skipped = append(skipped, fmt.Sprintf("%s/%s: %v", card.Server, card.Name, err))
			continue
		}
		real = append(real, Listed{Tool: t, Card: card})
	}
	if id.Disclosure == tokens.Full {
		slices.SortFunc(real, func(a, b Listed) int { return strings.Compare(a.Tool.Name, b.Tool.Name) })
	}
	return append(tools, real...), skipped, nil
}

// toolFor is a card's MCP tool definition: its qualified name, its
// description (the summary when it has none) cut to MaxDescriptionLen code
// points, its schemas as registered and its annotations.
func toolFor(c *cards.Card) (*mcp.Tool, error) {
	name, ok := toolname.Qualify(c.Server, c.Name)
	if !ok {
		return nil, fmt.Errorf("no qualified name (SERVER%sNAME must match [A-Za-z0-9_.-]{1,128}, and the server must not hold %q, end in \"_\" or be \"cardex\")", toolname.Sep, toolname.Sep)
	}
	in := json.RawMessage(c.InputSchema)
	if len(in) == 0 {
		in = json.RawMessage(`{"type":"object"}`)
	} else if !objectSchema(in) {
		return nil, fmt.Errorf("its input schema is not of type object, which MCP requires of a listed tool")
	}
	desc := c.Description
	if desc == "" {
		desc = c.Summary
	}
	t := &mcp.Tool{Name: name, Description: cards.Cut(desc, MaxDescriptionLen), InputSchema: in, Annotations: annotations(c.Annotations)}
	if len(c.OutputSchema) > 0 && objectSchema(c.OutputSchema) {
		t.OutputSchema = json.RawMessage(c.OutputSchema)
	}
	return t, nil
}

func objectSchema(raw []byte) bool {
	var s struct {
		Type any `json:"type"`
	}
	return json.Unmarshal(raw, &s) == nil && s.Type == "object"
}

func annotations(a cards.Annotations) *mcp.ToolAnnotations {
	if a == (cards.Annotations{}) {
		return nil
	}
	out := &mcp.ToolAnnotations{DestructiveHint: a.Destructive, OpenWorldHint: a.OpenWorld}
	if a.ReadOnly != nil {
		out.ReadOnlyHint = *a.ReadOnly
	}
	if a.Idempotent != nil {
		out.IdempotentHint = *a.Idempotent
	}
	return out
}

const cursorPrefix = "after:"

// Page returns one page of a token's list. A progressive list (at most
// three meta-tools and MaxAlwaysLoad pins) is always one page. A full list
// is ordered by name, and the cursor names the last tool of the previous
// page, so a change between two pages neither repeats nor skips a tool that
// stayed.
func Page(tools []Listed, disclosure, cursor string, size int) ([]Listed, string, error) {
	if size <= 0 {
		size = DefaultPageSize
	}
	after := ""
	if cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || disclosure != tokens.Full || !strings.HasPrefix(string(raw), cursorPrefix) {
			return nil, "", cards.Invalid("cursor", "is not a cursor from a previous tools/list page")
		}
		after = strings.TrimPrefix(string(raw), cursorPrefix)
	}
	if disclosure != tokens.Full {
		return tools, "", nil
	}
	start, _ := slices.BinarySearchFunc(tools, after, func(l Listed, after string) int {
		if l.Tool.Name <= after {
			return -1
		}
		return 1
	})
	if start+size >= len(tools) {
		return tools[start:], "", nil
	}
	page := tools[start : start+size]
	return page, base64.RawURLEncoding.EncodeToString([]byte(cursorPrefix + page[len(page)-1].Tool.Name)), nil
}
