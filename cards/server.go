package cards

import "time"

// ServerInfo describes one namespace of cards — an MCP server, a REST API or
// a database — as a catalogue entry of its own: what it is, in the words of
// its authors (MCP initialize's serverInfo and instructions, OpenAPI's info,
// a card file's server entry). Discovery uses it as evidence for the
// server's tools: a query that names the server ("12306 tickets") lifts its
// tools. It grants nothing: authorization is per card.
//
// The key is (Tenant, Name); Name is the Server field of the cards it
// describes. A server entry may exist before or after its cards.
type ServerInfo struct {
	Tenant string `json:"tenant"`
	Name   string `json:"name"`
	// Title is a display name ("Filesystem MCP Server"); at most
	// MaxSummaryLen code points.
	Title string `json:"title,omitempty"`
	// Description says what the server offers; at most MaxDescriptionLen
	// code points, sanitised like card text.
	Description string    `json:"description,omitempty"`
	Version     int64     `json:"version"`
	UpdatedAt   time.Time `json:"updated_at"`
}

// ServerKey is the key of a server entry in the change sequence: a Key whose
// Name is empty. Card names are never empty, so it cannot collide.
func ServerKey(tenant, server string) Key { return Key{Tenant: tenant, Server: server} }

// IsServer reports whether a change-sequence key is a server entry's.
func (k Key) IsServer() bool { return k.Name == "" }
