package toolname

import (
	"crypto/sha256"
	"encoding/hex"
	"regexp"
)

// Provider names are the names a tool goes by in a model provider's tool
// list. Anthropic's Messages API and OpenAI's Responses API both take tool
// names matching ^[a-zA-Z0-9_-]{1,64}$: the MCP rule without "." and with
// half the length.
//
// Provider(server, name) is the qualified name SERVER__NAME (Qualify) when
// that is provider-safe — every tool of a catalogue whose names use no "."
// and stay short, as all three evaluation catalogues do. Otherwise it is a
// stand-in the model can still read, made unique by a hash: SERVER__NAME with
// every character outside [A-Za-z0-9_-] turned into "_", cut to
// MaxProviderLen-HashedSuffixLen characters, then "_h" and 8 hex digits of
// SHA-256 of "SERVER/NAME" ("files__v2_read_h1a2b3c4d" for files/v2.read).
//
// Going back: a provider name that Split reads as a pair is that pair when
// Provider gives the name back (Direct); a hashed one is looked up among the
// caller's tools (Hashed says whether to): the tools whose Provider is the
// name. So the name is all an orchestrator needs to hand back to
// AuthorizeCall, DescribeTool or call_tool.
const (
	MaxProviderLen = 64
	// HashedSuffixLen is the length of "_h" and the hash's hex digits.
	HashedSuffixLen = 2 + hashHex
	hashHex         = 8
)

var (
	providerRule = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)
	hashedRule   = regexp.MustCompile(`_h[0-9a-f]{8}$`)
	unsafeChars  = regexp.MustCompile(`[^a-zA-Z0-9_-]`)
)

// ProviderSafe reports whether s is a valid tool name for both providers.
func ProviderSafe(s string) bool { return providerRule.MatchString(s) }

// Provider returns the provider name of the pair (see the constants'
// documentation). It is provider-safe for every pair of valid names.
func Provider(server, name string) string {
	if q, ok := Qualify(server, name); ok && ProviderSafe(q) && !hashedRule.MatchString(q) {
		return q
	}
	readable := unsafeChars.ReplaceAllString(server+Sep+name, "_")
	if n := MaxProviderLen - HashedSuffixLen; len(readable) > n {
		readable = readable[:n]
	}
	sum := sha256.Sum256([]byte(server + "/" + name))
	return readable + "_h" + hex.EncodeToString(sum[:])[:hashHex]
}

// Direct returns the pair a provider name stands for without a lookup, or
// false when it stands for none that way (then see Hashed).
func Direct(p string) (server, name string, ok bool) {
	server, name, ok = Split(p)
	if !ok || Provider(server, name) != p {
		return "", "", false
	}
	return server, name, true
}

// Hashed reports whether p has the shape of a hashed provider name, which
// only a lookup among the caller's tools can resolve: the tools (s, n) with
// Provider(s, n) == p.
func Hashed(p string) bool {
	return len(p) <= MaxProviderLen && hashedRule.MatchString(p) && ProviderSafe(p)
}

// Ref is a (server, name) pair.
type Ref struct{ Server, Name string }

// Readings are the tools a requested (name, server) may stand for, in
// order: the pair a qualified or provider name SERVER__NAME stands for (when
// server is empty or the same), then the name as it is. A hashed provider
// name has no reading of its own: look it up (Hashed). Callers take the
// first reading the caller may use, skipping the others exactly like tools
// that do not exist, so the order reveals nothing.
func Readings(name, server string) []Ref {
	var out []Ref
	if s, n, ok := Split(name); ok && (server == "" || server == s) {
		out = append(out, Ref{Server: s, Name: n})
	}
	return append(out, Ref{Server: server, Name: name})
}
