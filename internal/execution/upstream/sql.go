package upstream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"time"
)

// Limits of an SQL upstream: defaults, and the most an entry may ask for.
const (
	DefaultStatementTimeout = 10 * time.Second
	MaxStatementTimeout     = 10 * time.Minute
	DefaultMaxRows          = 1000
	MaxMaxRows              = 100_000
	DefaultMaxBytes         = 1 << 20
	// MaxMaxBytes keeps a result (sent twice in an MCP result: as text and
	// as structured content) inside the gRPC result limit.
	MaxMaxBytes     = 8 << 20
	DefaultMaxConns = 4
	MaxReserved     = 32
)

// ParamName is the rule for a named query parameter (:name) and so for a
// reserved one: an unquoted SQL identifier of at most 63 bytes.
var ParamName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// SQL is an upstream that is a PostgreSQL database: the server's `query`
// card runs one read-only SELECT on it. The URL names a role that cardex
// holds (a read-only one: the READ ONLY transaction is a guard, the role's
// grants are the boundary); ${VAR} in it is expanded when cardex connects.
type SQL struct {
	DatabaseURL string `json:"database_url"`
	// StatementTimeout bounds the whole query (default 10s).
	StatementTimeout Duration `json:"statement_timeout,omitempty"`
	// MaxRows and MaxBytes bound a result; a query that has more stops
	// there and its result says so (incomplete_reason row_limit, byte_limit).
	MaxRows  int   `json:"max_rows,omitempty"`
	MaxBytes int64 `json:"max_bytes,omitempty"`
	// Reserved are parameters the connection binds: a query may use
	// :name for them, and a call that gives one of them is refused.
	Reserved map[string]ParamValue `json:"reserved_params,omitempty"`
	// MaxConns bounds the connection pool (default 4).
	MaxConns int32 `json:"max_conns,omitempty"`
}

// ParamValue is a reserved parameter's value: a string, number or boolean
// in the file, kept as the text PostgreSQL is given (${VAR} in a string is
// expanded when cardex connects).
type ParamValue string

// UnmarshalJSON takes a JSON string, number or boolean.
func (p *ParamValue) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) > 0 && b[0] == '"':
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*p = ParamValue(s)
	case string(b) == "true" || string(b) == "false":
		*p = ParamValue(b)
	case json.Valid(b) && (b[0] == '-' || (b[0] >= '0' && b[0] <= '9')):
		*p = ParamValue(b)
	default:
		return fmt.Errorf("a reserved parameter's value is a string, number or boolean")
	}
	return nil
}

// Validate checks the entry of server.
func (s *SQL) Validate(server string) error {
	if s.DatabaseURL == "" {
		return fmt.Errorf("server %q: sql.database_url is required", server)
	}
	if s.StatementTimeout < 0 || time.Duration(s.StatementTimeout) > MaxStatementTimeout {
		return fmt.Errorf("server %q: sql.statement_timeout must be between 0 (default %s) and %s", server, DefaultStatementTimeout, MaxStatementTimeout)
	}
	if s.MaxRows < 0 || s.MaxRows > MaxMaxRows {
		return fmt.Errorf("server %q: sql.max_rows must be between 0 (default %d) and %d", server, DefaultMaxRows, MaxMaxRows)
	}
	if s.MaxBytes < 0 || s.MaxBytes > MaxMaxBytes {
		return fmt.Errorf("server %q: sql.max_bytes must be between 0 (default %d) and %d", server, DefaultMaxBytes, MaxMaxBytes)
	}
	if s.MaxConns < 0 || s.MaxConns > 64 {
		return fmt.Errorf("server %q: sql.max_conns must be between 0 (default %d) and 64", server, DefaultMaxConns)
	}
	if len(s.Reserved) > MaxReserved {
		return fmt.Errorf("server %q: sql.reserved_params has %d entries; the limit is %d", server, len(s.Reserved), MaxReserved)
	}
	for _, k := range slices.Sorted(maps.Keys(s.Reserved)) {
		if !ParamName.MatchString(k) {
			return fmt.Errorf("server %q: sql.reserved_params: %q is not a parameter name ([A-Za-z_][A-Za-z0-9_]{0,62})", server, k)
		}
	}
	return nil
}

// Timeout is the bound of one query.
func (s *SQL) Timeout() time.Duration {
	if s.StatementTimeout <= 0 {
		return DefaultStatementTimeout
	}
	return time.Duration(s.StatementTimeout)
}

// RowLimit is the most rows a result holds.
func (s *SQL) RowLimit() int {
	if s.MaxRows <= 0 {
		return DefaultMaxRows
	}
	return s.MaxRows
}

// ByteLimit is the most bytes of JSON rows a result holds.
func (s *SQL) ByteLimit() int64 {
	if s.MaxBytes <= 0 {
		return DefaultMaxBytes
	}
	return s.MaxBytes
}

// PoolSize is the most connections cardex opens to the database.
func (s *SQL) PoolSize() int32 {
	if s.MaxConns <= 0 {
		return DefaultMaxConns
	}
	return s.MaxConns
}

// ConnString is the database URL with ${VAR} expanded (an unset variable
// is an error).
func (s *SQL) ConnString() (string, error) {
	u, err := expand(s.DatabaseURL)
	if err != nil {
		return "", fmt.Errorf("sql.database_url: %w", err)
	}
	return u, nil
}

// ReservedValues are the reserved parameters with ${VAR} expanded.
func (s *SQL) ReservedValues() (map[string]string, error) {
	out := make(map[string]string, len(s.Reserved))
	for k, v := range s.Reserved {
		ev, err := expand(string(v))
		if err != nil {
			return nil, fmt.Errorf("sql.reserved_params.%s: %w", k, err)
		}
		out[k] = ev
	}
	return out, nil
}
