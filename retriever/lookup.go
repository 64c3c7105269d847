package retriever

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/seed0cff8200/cardex/cards"
)

// Lookup limits.
const (
	DefaultPageSize = 20
	MaxPageSize     = 100
	MaxArgsBytes    = 1 << 20
	// maxSearchDepth bounds how deep ranked SearchTools pagination goes:
	// the fused ranking holds at most LegDepth hits of each leg.
	maxSearchDepth = LegDepth
)

// Resolved is the answer to a lookup by name: one card, or the servers of
// several authorized cards that share the bare name.
type Resolved struct {
	Card      cards.Card
	Ambiguous []string
}

func validateRef(name, server string) error {
	if name == "" {
		return cards.Invalid("name", "is required")
	}
	if !cards.ValidName(name) {
		return cards.Invalid("name", "must match [A-Za-z0-9_.-]{1,%d}", cards.MaxNameLen)
	}
	if server != "" && !cards.ValidName(server) {
		return cards.Invalid("server", "must match [A-Za-z0-9_.-]{1,%d}", cards.MaxNameLen)
	}
	return nil
}

// ValidatePin refuses a malformed pin (an always_load entry, named field):
// its server and name are both required and follow the card-name rule. A
// well-formed pin of a card the caller may not see is no error: it is left
// out, as unknown as one that does not exist.
func ValidatePin(field string, k cards.Key) error {
	for _, f := range []struct{ name, v string }{{"server", k.Server}, {"name", k.Name}} {
		switch {
		case f.v == "":
			return cards.Invalid(field+"."+f.name, "is required")
		case !cards.ValidName(f.v):
			return cards.Invalid(field+"."+f.name, "is %d characters; it must match [A-Za-z0-9_.-]{1,%d}", utf8.RuneCountInString(f.v), cards.MaxNameLen)
		}
	}
	return nil
}

// resolve finds the authorized card for (name, server). Call with r.mu held.
// A card outside the caller's tenant, scopes or active status is
// indistinguishable from one that does not exist.
func (r *Retriever) resolve(c Caller, name, server string) (*entry, []string, error) {
	var found []*entry
	for _, e := range r.byName[c.Tenant][name] {
		if (server == "" || e.card.Server == server) && Allowed(c, &e.card) {
			found = append(found, e)
		}
	}
	switch len(found) {
	case 0:
		return nil, nil, fmt.Errorf("tool %q: %w", name, cards.ErrNotFound)
	case 1:
		return found[0], nil, nil
	}
	servers := make([]string, len(found))
	for i, e := range found {
		servers[i] = e.card.Server
	}
	slices.Sort(servers)
	return nil, servers, nil
}

// Describe returns one authorized card with its schemas, or the candidate
// servers when the bare name is ambiguous, or ErrNotFound.
func (r *Retriever) Describe(ctx context.Context, c Caller, name, server string) (Resolved, error) {
	if err := validateCaller(c); err != nil {
		return Resolved{}, err
	}
	if err := validateRef(name, server); err != nil {
		return Resolved{}, err
	}
	release, err := r.reside(ctx, c.Tenant)
	if err != nil {
		return Resolved{}, err
	}
	defer release()
	r.mu.RLock()
	defer r.mu.RUnlock()
	e, amb, err := r.resolve(c, name, server)
	if err != nil {
		return Resolved{}, err
	}
	if amb != nil {
		return Resolved{Ambiguous: amb}, nil
	}
	return Resolved{Card: e.card.Clone()}, nil
}

// Decision is AuthorizeCall's verdict.
type Decision string

// Decisions.
const (
	Allow                  Decision = "allow"
	DenyUnknownTool        Decision = "deny_unknown_tool"
	DenyAmbiguous          Decision = "deny_ambiguous"
	DenyInvalidArguments   Decision = "deny_invalid_arguments"
	unknownToolMessageBase          = "unknown tool"
)

// Authorization is the answer to an execution gateway.
type Authorization struct {
	Decision   Decision
	Message    string
	Key        cards.Key // the authorized card, when allowed
	Version    int64
	Ambiguous  []string
	Violations []string
}

// Authorize re-checks tenant, scopes and status for one call, whatever was
// shown to the model, and validates the arguments against the input schema.
func (r *Retriever) Authorize(ctx context.Context, c Caller, name, server string, args []byte) (Authorization, error) {
	if err := validateCaller(c); err != nil {
		return Authorization{}, err
	}
	if err := validateRef(name, server); err != nil {
		return Authorization{}, err
	}
	if len(args) > MaxArgsBytes {
		return Authorization{}, cards.Invalid("arguments_json", "is %d bytes; the limit is %d", len(args), MaxArgsBytes)
	}
	release, err := r.reside(ctx, c.Tenant)
	if err != nil {
		return Authorization{}, err
	}
	defer release()
	r.mu.RLock()
	e, amb, err := r.resolve(c, name, server)
	r.mu.RUnlock()
	switch {
	case err != nil:
		return Authorization{Decision: DenyUnknownTool, Message: fmt.Sprintf("%s %q", unknownToolMessageBase, name)}, nil
	case amb != nil:
		return Authorization{Decision: DenyAmbiguous, Ambiguous: amb,
			Message: fmt.Sprintf("tool %q is ambiguous: name a server (one of %s)", name, strings.Join(amb, ", "))}, nil
	}
	out := Authorization{Key: e.card.Key(), Version: e.card.Version}
	// Validation is bounded work (cards.Schema.Validate), but not free: a
	// caller that has gone, or whose deadline passed, gets none of it.
	if err := ctx.Err(); err != nil {
		return Authorization{}, err
	}
	if v := argumentViolations(e, args); len(v) > 0 {
		out.Decision, out.Violations = DenyInvalidArguments, v
		out.Message = "arguments do not match the input schema of " + e.card.Server + "/" + e.card.Name
		return out, nil
	}
	out.Decision, out.Message = Allow, "allowed"
	return out, nil
}

func argumentViolations(e *entry, args []byte) []string {
	if len(strings.TrimSpace(string(args))) == 0 {
		args = []byte("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil || obj == nil {
		return []string{"arguments must be a JSON object"}
	}
	if _, err := cards.ScanJSON(args, cards.MaxArgumentsDepth); err != nil {
		return []string{err.Error()} // a duplicate key (at its path), or nested too deep
	}
	schema, err := e.inputSchema()
	if err != nil {
		return []string{"the card's input schema does not compile: " + err.Error()}
	}
	if schema == nil {
		return nil
	}
	if err := schema.Validate(args); err != nil {
		var out []string
		for _, line := range strings.Split(err.Error(), "\n") {
			line = strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(line), "- "))
			if line != "" && !strings.HasPrefix(line, "jsonschema validation failed") {
				out = append(out, line)
			}
		}
		if len(out) == 0 {
			out = []string{err.Error()}
		}
		return out
	}
	return nil
}

// Summary is one SearchTools row.
type Summary struct {
	Server, Name, Summary string
}

type searchCursor struct {
	Offset int    `json:"o"`
	Query  string `json:"q"` // hash prefix of the query the cursor belongs to
}

func queryTag(q string) string {
	sum := sha256.Sum256([]byte(q))
	return base64.RawURLEncoding.EncodeToString(sum[:6])
}

// Search lists authorized tools by name and summary: every one in (server,
// name) order when query is empty, else ranked by the hybrid pipeline.
// Pagination uses an opaque cursor tied to the query.
func (r *Retriever) Search(ctx context.Context, c Caller, query string, pageSize int, cursor string) ([]Summary, string, error) {
	if err := validateCaller(c); err != nil {
		return nil, "", err
	}
	if err := validateQuery("query", query, false); err != nil {
		return nil, "", err
	}
	switch {
	case pageSize == 0:
		pageSize = DefaultPageSize
	case pageSize < 0 || pageSize > MaxPageSize:
		return nil, "", cards.Invalid("page_size", "is %d; it must be between 1 and %d (default %d)", pageSize, MaxPageSize, DefaultPageSize)
	}
	offset := 0
	if cursor != "" {
		var cur searchCursor
		raw, err := base64.RawURLEncoding.DecodeString(cursor)
		if err == nil {
			err = json.Unmarshal(raw, &cur)
		}
		if err != nil || cur.Offset < 0 || cur.Query != queryTag(query) {
			return nil, "", cards.Invalid("cursor", "is not a cursor from a previous page of this query")
		}
		offset = cur.Offset
	}
	req := Request{Caller: c, Query: query}
	ops, err := parseRequestOps(&req)
	if err != nil {
		return nil, "", err
	}
	req.ops = ops
	release, err := r.reside(ctx, c.Tenant)
	if err != nil {
		return nil, "", err
	}
	defer release()
	var ids []string
	switch {
	case req.ops.query.Select != nil:
		r.mu.RLock()
		for _, e := range r.selected(r.candidates(c), req.ops.query.Select) {
			ids = append(ids, e.id)
		}
		r.mu.RUnlock()
	case strings.TrimSpace(query) == "":
		r.mu.RLock()
		for id := range r.candidates(c).entries {
			ids = append(ids, id)
		}
		r.mu.RUnlock()
		slices.Sort(ids)
	default:
		depth := min(offset+pageSize+1, maxSearchDepth)
		res, err := r.run(ctx, req, depth, DefaultAlpha)
		if err != nil {
			return nil, "", err
		}
		for _, t := range res.Tools {
			ids = append(ids, DocID(t.Card.Key()))
		}
	}
	if offset >= len(ids) {
		return nil, "", nil
	}
	end := min(offset+pageSize, len(ids))
	r.mu.RLock()
	out := make([]Summary, 0, end-offset)
	for _, id := range ids[offset:end] {
		if e := r.byID[id]; e != nil {
			out = append(out, Summary{Server: e.card.Server, Name: e.card.Name, Summary: e.card.Summary})
		}
	}
	r.mu.RUnlock()
	next := ""
	if end < len(ids) {
		raw, _ := json.Marshal(searchCursor{Offset: end, Query: queryTag(query)})
		next = base64.RawURLEncoding.EncodeToString(raw)
	}
	return out, next, nil
}
