package server

import (
	"encoding/json"
	"sync"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/codec/apiconv"
	"github.com/seed0cff8200/cardex/internal/codec/toolformat"
	"github.com/seed0cff8200/cardex/internal/codec/toolname"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// MaxConvertedCards and MaxConvertedBytes bound the cards whose API form
// DiscoverTools keeps (toolCards): how many, and about how much memory
// their text and schemas take (twice: the card kept to compare, and its
// conversion).
const (
	MaxConvertedCards = 4096
	MaxConvertedBytes = 32 << 20
)

// toolCards keeps the API form of the cards that discovery answers return
// (the card with its schemas as text, its provider name, and its tool
// definitions in the provider formats asked for), so that a
// card that is returned again is not converted again. An entry is found by
// the card's key and used only when every field the conversion reads is
// equal to the card at hand (apiconv.SameToolCard): an answer holds exactly
// what converting the card afresh would give, and a card that changed is
// converted again and replaces its entry. Nothing in it depends on the
// caller; the retriever decides which cards a caller gets. Safe for
// concurrent use.
type toolCards struct {
	mu    sync.RWMutex
	byKey map[cards.Key]*toolCard
	bytes int
}

// toolCard is one card's API form. Its pb message is shared by every answer
// that returns the card and must not be modified.
type toolCard struct {
	src      cards.Card
	pb       *pb.Card
	provider string
	// defs holds the card's tool definitions by format (toolformat.Format
	// → json.RawMessage), made when first asked (definition).
	defs sync.Map
	size int // guarded by toolCards.mu
}

// get returns c's API form.
func (tc *toolCards) get(c *cards.Card) *toolCard {
	k := c.Key()
	tc.mu.RLock()
	e := tc.byKey[k]
	tc.mu.RUnlock()
	if e != nil && apiconv.SameToolCard(&e.src, c) {
		return e
	}
	e = &toolCard{src: c.Clone(), pb: apiconv.ToolCardToProto(c, true), provider: toolname.Provider(c.Server, c.Name), size: 2 * textBytes(c)}
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.byKey == nil {
		tc.byKey = map[cards.Key]*toolCard{}
	}
	if old := tc.byKey[k]; old != nil {
		tc.bytes -= old.size
		delete(tc.byKey, k)
	}
	if e.size > MaxConvertedBytes {
		return e // answered, not kept
	}
	// Map order is random: the entries evicted are any.
	for other, old := range tc.byKey {
		if len(tc.byKey) < MaxConvertedCards && tc.bytes+e.size <= MaxConvertedBytes {
			break
		}
		tc.bytes -= old.size
		delete(tc.byKey, other)
	}
	tc.byKey[k] = e
	tc.bytes += e.size
	return e
}

// definition returns the tool definition in format f of the card e was
// found for (toolformat.Definition reads only fields that SameToolCard
// compares), and keeps it with e while e is kept and the bytes allow.
func (tc *toolCards) definition(e *toolCard, f toolformat.Format) json.RawMessage {
	if d, ok := e.defs.Load(f); ok {
		return d.(json.RawMessage)
	}
	d := toolformat.Definition(f, &e.src)
	tc.mu.Lock()
	defer tc.mu.Unlock()
	if tc.byKey[e.src.Key()] == e && tc.bytes+len(d) <= MaxConvertedBytes {
		if _, had := e.defs.LoadOrStore(f, d); !had {
			e.size += len(d)
			tc.bytes += len(d)
		}
	}
	return d
}

// len is how many cards are kept.
func (tc *toolCards) len() int {
	tc.mu.RLock()
	defer tc.mu.RUnlock()
	return len(tc.byKey)
}

// textBytes is about how many bytes of text and schemas a card holds.
func textBytes(c *cards.Card) int {
	n := len(c.Tenant) + len(c.Server) + len(c.Name) + len(c.Kind) + len(c.Summary) + len(c.Description) + len(c.WhenNotToUse) +
		len(c.Status) + len(c.InputSchema) + len(c.OutputSchema)
	for _, l := range [][]string{c.Aliases, c.Tags, c.RequiredScopes} {
		for _, s := range l {
			n += len(s) + 16
		}
	}
	return n + 256 // the structs themselves
}
