package cards

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Named limits. Every one is enforced by Normalize with an error that names
// the field and the limit.
const (
	MaxNameLen         = 128 // name, server, tenant: code points
	MaxSummaryLen      = 500 // code points
	MaxDescriptionLen  = 4000
	MaxWhenNotToUseLen = 1000
	MaxAliases         = 32
	MaxAliasLen        = 200
	MaxTags            = 32
	MaxTagLen          = 64
	MaxScopes          = 32
	MaxScopeLen        = 128
	MaxSchemaBytes     = 64 << 10 // per schema, after normalisation
	ReservedPrefix     = "cardex__"
)

var (
	nameRule  = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
	scopeRule = regexp.MustCompile(`^[A-Za-z0-9_.:/-]{1,128}$`)
)

// ValidName reports whether s follows the MCP tool-name rule
// ([A-Za-z0-9_.-]{1,128}).
func ValidName(s string) bool { return nameRule.MatchString(s) }

// ReservedNames are the names of cardex's own meta-tools: no card may
// take one (in any case), so that none impersonates them.
var ReservedNames = []string{"search_tools", "describe_tool", "call_tool"}

// ReservedServer is the server name reserved for cardex: a server named
// so, or with the prefix ReservedPrefix, would make its tools' qualified
// names (SERVER__NAME) start with the reserved prefix.
const ReservedServer = "cardex"

// CheckName refuses a card name that is reserved: the prefix cardex__ or
// a meta-tool's name.
func CheckName(name string) error {
	l := strings.ToLower(name)
	if strings.HasPrefix(l, ReservedPrefix) {
		return Invalid("name", "the prefix %q is reserved for cardex's own tools", ReservedPrefix)
	}
	if slices.Contains(ReservedNames, l) {
		return Invalid("name", "%q is reserved: it is the name of one of cardex's own tools (%s)", Cut(name, 40), strings.Join(ReservedNames, ", "))
	}
	return nil
}

// CheckServer refuses a server name that is reserved for cardex (field
// names the field the name is in: server for a card, name for a server
// entry).
func CheckServer(field, server string) error {
	l := strings.ToLower(server)
	if l == ReservedServer || strings.HasPrefix(l, ReservedPrefix) {
		return Invalid(field, "%q is reserved for cardex's own tools (the server %q and the prefix %q)", Cut(server, 140), ReservedServer, ReservedPrefix)
	}
	return nil
}

// Sanitize removes control, zero-width and bidirectional formatting
// characters, turns newlines and tabs into spaces, collapses runs of
// whitespace and trims. It is applied to every text that reaches a model.
func Sanitize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	space := false
	for _, r := range s {
		switch {
		case r == utf8.RuneError:
			continue
		case r == '\n' || r == '\t' || r == '\r' || unicode.IsSpace(r):
			space = true
			continue
		case unicode.IsControl(r), unicode.Is(unicode.Cf, r):
			// Cf covers zero-width (U+200B..U+200D, U+FEFF, U+2060) and
			// bidi controls (U+202A..U+202E, U+2066..U+2069, U+200E/F).
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

// Normalize sanitises and validates a card in place, fills defaults (kind
// function, status active), sorts and de-duplicates scopes and tags, and
// rewrites the schemas into their canonical byte form. It returns a
// *FieldError (errors.Is(err, ErrInvalid)) for the first broken rule.
func Normalize(c *Card) error {
	for _, f := range []struct {
		name string
		v    *string
	}{{"tenant", &c.Tenant}, {"server", &c.Server}, {"name", &c.Name}} {
		*f.v = strings.TrimSpace(*f.v)
		if *f.v == "" {
			return Invalid(f.name, "is required")
		}
		if !nameRule.MatchString(*f.v) {
			return Invalid(f.name, "%q must match [A-Za-z0-9_.-]{1,%d}", Cut(*f.v, 140), MaxNameLen)
		}
	}
	if err := CheckName(c.Name); err != nil {
		return err
	}
	if err := CheckServer("server", c.Server); err != nil {
		return err
	}
	switch c.Kind {
	case "":
		c.Kind = KindFunction
	case KindMCPTool, KindRESTOperation, KindSQLView, KindFunction:
	default:
		return Invalid("kind", "%q is not one of mcp_tool, rest_operation, sql_view, function", Cut(string(c.Kind), 40))
	}
	switch c.Status {
	case "":
		c.Status = StatusActive
	case StatusActive, StatusPending, StatusRevoked:
	default:
		return Invalid("status", "%q is not one of active, pending, revoked", Cut(string(c.Status), 40))
	}

	c.Summary = Sanitize(c.Summary)
	if c.Summary == "" {
		return Invalid("summary", "is required (one sentence in the words users use)")
	}
	if err := maxLen("summary", c.Summary, MaxSummaryLen); err != nil {
		return err
	}
	c.Description = Sanitize(c.Description)
	if err := maxLen("description", c.Description, MaxDescriptionLen); err != nil {
		return err
	}
	c.WhenNotToUse = Sanitize(c.WhenNotToUse)
	if err := maxLen("when_not_to_use", c.WhenNotToUse, MaxWhenNotToUseLen); err != nil {
		return err
	}

	var err error
	if c.Aliases, err = textList("aliases", c.Aliases, MaxAliases, MaxAliasLen, false); err != nil {
		return err
	}
	if c.Tags, err = textList("tags", c.Tags, MaxTags, MaxTagLen, true); err != nil {
		return err
	}
	slices.Sort(c.Tags) // tags are a set: their order is not content
	if len(c.RequiredScopes) > MaxScopes {
		return Invalid("required_scopes", "has %d entries; the limit is %d", len(c.RequiredScopes), MaxScopes)
	}
	scopes := make([]string, 0, len(c.RequiredScopes))
	for i, s := range c.RequiredScopes {
		s = strings.TrimSpace(s)
		// Checked before the character rule, which excludes '*' too and
		// would otherwise hide this more precise message.
		if strings.Contains(s, "*") {
			return Invalid(fmt.Sprintf("required_scopes[%d]", i), "%q: wildcards belong to callers, not to cards", Cut(s, 140))
		}
		if !scopeRule.MatchString(s) {
			return Invalid(fmt.Sprintf("required_scopes[%d]", i), "%q must match [A-Za-z0-9_.:/-]{1,%d}", Cut(s, 140), MaxScopeLen)
		}
		scopes = append(scopes, s)
	}
	slices.Sort(scopes)
	c.RequiredScopes = nilIfEmpty(slices.Compact(scopes))

	if c.InputSchema, err = normalizeSchema("input_schema", c.InputSchema); err != nil {
		return err
	}
	if c.OutputSchema, err = normalizeSchema("output_schema", c.OutputSchema); err != nil {
		return err
	}
	// Last: the examples' card hash is of the normalised card.
	if err := normalizeExamples(c); err != nil {
		return err
	}
	if c.Version < 0 {
		return Invalid("version", "must be 0 (no check) or the expected current version, got %d", c.Version)
	}
	return nil
}

func maxLen(field, s string, limit int) error {
	if n := utf8.RuneCountInString(s); n > limit {
		return Invalid(field, "is %d characters; the limit is %d", n, limit)
	}
	return nil
}

// textList sanitises a list of short texts, drops empties and duplicates
// (keeping first occurrence order) and enforces the count and length limits.
func textList(field string, in []string, maxN, maxLen int, lower bool) ([]string, error) {
	out := make([]string, 0, len(in))
	seen := make(map[string]bool, len(in))
	for i, s := range in {
		s = Sanitize(s)
		if lower {
			s = strings.ToLower(s)
		}
		if s == "" {
			continue
		}
		if n := utf8.RuneCountInString(s); n > maxLen {
			return nil, Invalid(fmt.Sprintf("%s[%d]", field, i), "is %d characters; the limit is %d", n, maxLen)
		}
		if k := strings.ToLower(s); !seen[k] {
			seen[k] = true
			out = append(out, s)
		}
	}
	if len(out) > maxN {
		return nil, Invalid(field, "has %d entries; the limit is %d", len(out), maxN)
	}
	return nilIfEmpty(out), nil
}

func nilIfEmpty(s []string) []string {
	if len(s) == 0 {
		return nil
	}
	return s
}

// normalizeSchema checks that raw is a JSON object or boolean that compiles as
// JSON Schema and rewrites it canonically: compact, object keys sorted,
// numbers kept as written, no HTML escaping. Empty or "null" means no schema.
func normalizeSchema(field string, raw json.RawMessage) (json.RawMessage, error) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 || string(trimmed) == "null" {
		return nil, nil
	}
	if len(trimmed) > 4*MaxSchemaBytes {
		return nil, Invalid(field, "is %d bytes; the limit is %d", len(trimmed), MaxSchemaBytes)
	}
	// Duplicate keys and the nesting limit before anything else: the
	// canonical form would silently keep the last of two keys.
	if _, err := ScanJSON(trimmed, MaxSchemaDepth); err != nil {
		var dup *DuplicateKeyError
		var lim *LimitError
		if errors.As(err, &dup) || errors.As(err, &lim) {
			return nil, Invalid(field, "%v", err)
		}
		return nil, Invalid(field, "is not valid JSON: %v", err)
	}
	canon, err := CanonicalJSON(trimmed)
	if err != nil {
		return nil, Invalid(field, "is not valid JSON: %v", err)
	}
	if len(canon) > MaxSchemaBytes {
		return nil, Invalid(field, "is %d bytes; the limit is %d", len(canon), MaxSchemaBytes)
	}
	if canon[0] != '{' && string(canon) != "true" && string(canon) != "false" {
		return nil, Invalid(field, "must be a JSON object (or boolean) schema")
	}
	if _, err := CompileSchema(canon); err != nil {
		if lim := (*LimitError)(nil); errors.As(err, &lim) {
			return nil, Invalid(field, "%v", err)
		}
		return nil, Invalid(field, "does not compile as JSON Schema: %v", err)
	}
	return canon, nil
}

// CanonicalJSON re-encodes a JSON document compactly with object keys sorted
// and numbers preserved exactly. It rejects trailing data.
func CanonicalJSON(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	// dec.More() would miss a stray '}' or ']': it reports false for them.
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("unexpected data after the JSON value")
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// Cut shortens s to at most n code points (n ≥ 1): a longer s becomes its
// first n-1 and "…". It is the cut of text for people and models (error
// messages, tables, listed descriptions); CutAtWord, of imported text.
func Cut(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	return string([]rune(s)[:n-1]) + "…"
}

// CutAtWord shortens s to at most n code points like Cut, but at the last
// space when one is in the last quarter, ending with "…": the importers' cut
// of a summary, a title or a description.
func CutAtWord(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	rs := []rune(s)[:n-1]
	if i := strings.LastIndexFunc(string(rs), unicode.IsSpace); i > 0 && utf8.RuneCountInString(string(rs)[:i]) > n*3/4 {
		rs = []rune(string(rs)[:i])
	}
	return strings.TrimRightFunc(string(rs), unicode.IsSpace) + "…"
}
