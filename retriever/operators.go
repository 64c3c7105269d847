package retriever

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/seed0cff8200/cardex/cards"
)

// Query operators, the two forms of Claude Code's tool search:
//
//   - select:SERVER/NAME[,SERVER/NAME…] returns exactly those tools, in the
//     order given, without ranking: each name is looked up inside the
//     caller's candidate set, so a tool the caller may not use is absent,
//     like one that does not exist. A name may also be the MCP front's
//     qualified SERVER__NAME, or a bare NAME when exactly one of the
//     caller's tools has it (an ambiguous one is absent).
//   - +word keeps only the tools whose server or name contains word, or
//     whose summary, description, aliases or tags hold it as a word (case
//     is ignored); the tools kept are ranked by the whole text, the word
//     included ("+slack send" ranks the slack tools for "slack send").
//
// Each text of a request (the query, every intent) carries its own
// operators. Selected tools are placed like pins, after them and before
// the ranked ones, and are not counted in top_k.

// Operator limits.
const (
	// SelectPrefix starts a selection.
	SelectPrefix = "select:"
	// MaxSelect is the most names one selection may give.
	MaxSelect = MaxTopK
	// MaxRequired is the most +words one text may give.
	MaxRequired = 8
)

// Ref names a tool in a selection. Server is empty for a bare name.
type Ref struct {
	Server, Name string
}

// Operators are the operators of one text.
type Operators struct {
	// Select is non-nil when the text is a selection (select:...).
	Select []Ref
	// Required are the +words, lower-case, in order, without duplicates.
	Required []string
	// Text is what is ranked: the text with the "+" of every required word
	// removed ("" for a selection).
	Text string
}

// ParseOperators reads the operators of one text; field names it in errors
// ("query", "intents[2]").
func ParseOperators(field, text string) (Operators, error) {
	t := strings.TrimSpace(text)
	if len(t) >= len(SelectPrefix) && strings.EqualFold(t[:len(SelectPrefix)], SelectPrefix) {
		return parseSelect(field, t[len(SelectPrefix):])
	}
	words := strings.Fields(t)
	var ops Operators
	for i, w := range words {
		if len(w) < 2 || w[0] != '+' {
			continue
		}
		term := strings.ToLower(w[1:])
		if !strings.ContainsFunc(term, isWordRune) {
			continue // "++" or "+-" is text, not an operator
		}
		words[i] = w[1:]
		if !slices.Contains(ops.Required, term) {
			ops.Required = append(ops.Required, term)
		}
	}
	if len(ops.Required) > MaxRequired {
		return Operators{}, cards.Invalid(field, "has %d required words (+word); the limit is %d", len(ops.Required), MaxRequired)
	}
	if len(ops.Required) == 0 {
		ops.Text = text
	} else {
		ops.Text = strings.Join(words, " ")
	}
	return ops, nil
}

func parseSelect(field, list string) (Operators, error) {
	items := strings.FieldsFunc(list, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })
	if len(items) == 0 {
		return Operators{}, cards.Invalid(field, "select: names no tool; give select:SERVER/NAME[,SERVER/NAME...]")
	}
	if len(items) > MaxSelect {
		return Operators{}, cards.Invalid(field, "select: names %d tools; the limit is %d", len(items), MaxSelect)
	}
	ops := Operators{Select: make([]Ref, 0, len(items))}
	for _, it := range items {
		server, name, qualified := strings.Cut(it, "/")
		if !qualified {
			server, name = "", it
		}
		if !cards.ValidName(name) || (qualified && !cards.ValidName(server)) {
			return Operators{}, cards.Invalid(field, "select: %q is not SERVER/NAME (each part must match [A-Za-z0-9_.-]{1,%d})", cards.Cut(it, 64), cards.MaxNameLen)
		}
		if ref := (Ref{Server: server, Name: name}); !slices.Contains(ops.Select, ref) {
			ops.Select = append(ops.Select, ref)
		}
	}
	return ops, nil
}

func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }

// requestOps are the operators of a request's texts.
type requestOps struct {
	query   Operators
	intents []Operators
}

// parseRequestOps reads the operators of the query and of every intent.
func parseRequestOps(req *Request) (requestOps, error) {
	var out requestOps
	var err error
	if out.query, err = ParseOperators("query", req.Query); err != nil {
		return requestOps{}, err
	}
	for i, in := range req.Intents {
		ops, err := ParseOperators(fmt.Sprintf("intents[%d]", i), in)
		if err != nil {
			return requestOps{}, err
		}
		out.intents = append(out.intents, ops)
	}
	return out, nil
}

// selected resolves a selection inside a candidate set, in order and
// without duplicates: a name outside the set is absent. Call with r.mu
// held.
func (r *Retriever) selected(cs *candSet, refs []Ref) []*entry {
	var out []*entry
	add := func(e *entry) {
		if e != nil && !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	for _, ref := range refs {
		if ref.Server != "" {
			add(cs.entries[DocID(cards.Key{Tenant: cs.filter.Tenant, Server: ref.Server, Name: ref.Name})])
			continue
		}
		// SERVER__NAME, as the MCP front lists a tool (split at the first
		// "__"), means that tool first, as in describe_tool; else the bare
		// name.
		if server, name, ok := strings.Cut(ref.Name, "__"); ok && server != "" && name != "" {
			if e := cs.entries[DocID(cards.Key{Tenant: cs.filter.Tenant, Server: server, Name: name})]; e != nil {
				add(e)
				continue
			}
		}
		add(r.onlyNamed(cs, ref.Name))
	}
	return out
}

// onlyNamed is the one tool of the candidate set with a bare name, or nil
// when none or several have it.
func (r *Retriever) onlyNamed(cs *candSet, name string) *entry {
	var found *entry
	for _, e := range r.byName[cs.filter.Tenant][name] {
		if cs.entries[e.id] == nil {
			continue
		}
		if found != nil {
			return nil
		}
		found = e
	}
	return found
}

// narrow is the part of a candidate set whose tools hold every required
// word (see Operators), of a view of n entry numbers. It is computed per
// request, never cached.
func narrow(cs *candSet, required []string, n int) *candSet {
	out := &candSet{filter: Filter{Tenant: cs.filter.Tenant, IDs: []string{}}, entries: map[string]*entry{}}
	servers := map[string]bool{}
	for id, e := range cs.entries {
		if !holdsAll(&e.card, required) {
			continue
		}
		out.entries[id] = e
		out.filter.IDs = append(out.filter.IDs, id)
		out.tokens += int64(e.tokens)
		servers[e.card.Server] = true
		out.deprecated = out.deprecated || e.deprecated
	}
	slices.Sort(out.filter.IDs)
	out.member = memberBits(out.entries, n)
	for s := range servers {
		out.servers = append(out.servers, s)
	}
	slices.Sort(out.servers)
	return out
}

// holdsAll reports whether a card holds every required word.
func holdsAll(c *cards.Card, required []string) bool {
	for _, w := range required {
		if !holds(c, w) {
			return false
		}
	}
	return true
}

// holds reports whether a card holds a required word (lower-case): inside
// its server or name, or as a word of its summary, description, aliases or
// tags.
func holds(c *cards.Card, w string) bool {
	if strings.Contains(strings.ToLower(c.Server), w) || strings.Contains(strings.ToLower(c.Name), w) {
		return true
	}
	if hasWord(c.Summary, w) || hasWord(c.Description, w) {
		return true
	}
	return slices.ContainsFunc(c.Aliases, func(a string) bool { return hasWord(a, w) }) ||
		slices.ContainsFunc(c.Tags, func(t string) bool { return hasWord(t, w) })
}

// hasWord reports whether w (lower-case) occurs in text, ignoring case, with
// no letter or digit right before or after it.
func hasWord(text, w string) bool {
	low := strings.ToLower(text)
	for from := 0; from < len(low); {
		i := strings.Index(low[from:], w)
		if i < 0 {
			return false
		}
		start, end := from+i, from+i+len(w)
		before, _ := utf8.DecodeLastRuneInString(low[:start])
		after, _ := utf8.DecodeRuneInString(low[end:])
		if (start == 0 || !isWordRune(before)) && (end == len(low) || !isWordRune(after)) {
			return true
		}
		_, size := utf8.DecodeRuneInString(low[start:])
		from = start + size
	}
	return false
}

// ranked reports whether the text is ranked: not a selection, and not
// blank.
func (o Operators) ranked() bool { return o.Select == nil && strings.TrimSpace(o.Text) != "" }

// SelectedReason is the reason of a tool placed by select:.
const SelectedReason = "selected (select:)"

// placeSelected places the tools of the request's selections after the
// pins: the query's, then each intent's, in order. A tool already placed
// (pinned, or selected by another text) stays where it is. Call with r.mu
// held. shown are the entries of res.Tools, position for position; it
// grows with them.
func (r *Retriever) placeSelected(req Request, cs *candSet, res *Result, shown *[]*entry) {
	place := func(sel []Ref, intent int) {
		for _, e := range r.selected(cs, sel) {
			i := slices.Index(*shown, e)
			if i < 0 {
				i = len(res.Tools)
				*shown = append(*shown, e)
				res.Tools = append(res.Tools, Scored{Card: e.card, Reason: SelectedReason, Tokens: e.tokens,
					Scores: Fused{ID: e.id, Confidence: 1}})
			}
			t := &res.Tools[i]
			if intent < 0 {
				t.ForQuery = true
			} else {
				t.Intents = mergeIntents(t.Intents, []int{intent})
			}
		}
	}
	place(req.ops.query.Select, -1)
	for i, in := range req.ops.intents {
		place(in.Select, i)
	}
}

// mergeIntents is the sorted union of two ascending lists of intents.
func mergeIntents(a, b []int) []int {
	out := slices.Clone(a)
	for _, x := range b {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	slices.Sort(out)
	return out
}
