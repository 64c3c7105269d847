// Package toolname is how the MCP front names a real tool in tools/list:
// one name per (server, name) pair, unique across servers and valid under the
// MCP tool-name rule ([A-Za-z0-9_.-]{1,128}).
//
// The qualified name is SERVER__NAME: the server, two underscores, the
// tool's name. It is split at the first "__", so it stands for exactly one
// pair when the server itself holds no "__" and does not end in "_" (else the
// split would fall inside the server). A pair whose server breaks that rule,
// whose server is "cardex" (SERVER__NAME would start with the reserved
// prefix cardex__), or whose qualified name would be longer than 128
// characters has no qualified name: it is not listed, and stays reachable by
// its server and name through search_tools, describe_tool and call_tool.
package toolname

import (
	"strings"

	"github.com/seed0cff8200/cardex/cards"
)

// Sep separates the server from the name.
const Sep = "__"

// Qualify returns SERVER__NAME, or false when the pair has none (see the
// package documentation).
func Qualify(server, name string) (string, bool) {
	if !cards.ValidName(server) || !cards.ValidName(name) ||
		strings.Contains(server, Sep) || strings.HasSuffix(server, "_") {
		return "", false
	}
	q := server + Sep + name
	if !cards.ValidName(q) || strings.HasPrefix(strings.ToLower(q), cards.ReservedPrefix) {
		return "", false
	}
	return q, true
}

// Split returns the pair a qualified name stands for, or false when q is not
// one: Split(Qualify(s, n)) is (s, n), and Qualify(Split(q)) is q.
func Split(q string) (server, name string, ok bool) {
	server, name, found := strings.Cut(q, Sep)
	if !found {
		return "", "", false
	}
	if back, ok := Qualify(server, name); !ok || back != q {
		return "", "", false
	}
	return server, name, true
}
