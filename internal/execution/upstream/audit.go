package upstream

import (
	"bufio"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"sync"
	"time"
)

// Audit outcomes besides the failure kinds of CallError.
const (
	OutcomeOK        = "ok"         // the upstream returned a result
	OutcomeToolError = "tool_error" // the upstream returned a result with isError
	// Denials: nothing was forwarded.
	OutcomeDeniedUnknown   = "denied_unknown_tool"
	OutcomeDeniedAmbiguous = "denied_ambiguous"
	OutcomeDeniedArguments = "denied_invalid_arguments"
)

// AuditEntry is one line of the audit log. It never holds the arguments or
// the result.
type AuditEntry struct {
	ID   string    `json:"execution_id"`
	Time time.Time `json:"time"`
	Via  string    `json:"via"` // mcp (call_tool), mcp_direct (tools/call by name) or grpc
	// Disclosure is the token's disclosure mode (progressive or full).
	Disclosure  string `json:"disclosure,omitempty"`
	Tenant      string `json:"tenant"`
	SubjectHash string `json:"subject_hash"`
	// Server and Tool name the real upstream tool (for unknown tools, the
	// name as requested, when it is a valid name).
	Server    string  `json:"server,omitempty"`
	Tool      string  `json:"tool,omitempty"`
	Outcome   string  `json:"outcome"`
	LatencyMS float64 `json:"latency_ms"`
	// Detail is the error message of a failed call (never argument values).
	Detail string `json:"detail,omitempty"`
	// RowCount, Complete and IncompleteReason describe a query's result
	// (never its rows).
	RowCount         *int   `json:"row_count,omitempty"`
	Complete         *bool  `json:"complete,omitempty"`
	IncompleteReason string `json:"incomplete_reason,omitempty"`
}

// Audit is an append-only JSON Lines file. Safe for concurrent use.
type Audit struct {
	mu  sync.Mutex
	f   *os.File
	w   *bufio.Writer
	key []byte
}

// OpenAudit opens (or creates) path for appending; key keys the subject
// pseudonym (HMAC-SHA-256), the same key the discovery log uses.
func OpenAudit(path string, key []byte) (*Audit, error) {
	if len(key) == 0 {
		return nil, errors.New("audit log: empty hashing key")
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	return &Audit{f: f, w: bufio.NewWriter(f), key: key}, nil
}

// Append records one call; subject is given in clear and stored hashed.
func (a *Audit) Append(e AuditEntry, subject string) error {
	if a == nil {
		return nil
	}
	if subject != "" {
		m := hmac.New(sha256.New, a.key)
		m.Write([]byte(subject))
		e.SubjectHash = hex.EncodeToString(m.Sum(nil)[:12])
	}
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, err := a.w.Write(append(b, '\n')); err != nil {
		return err
	}
	return a.w.Flush()
}

// Close flushes, syncs and closes the file.
func (a *Audit) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	errs := []error{a.w.Flush(), a.f.Sync()}
	return errors.Join(append(errs, a.f.Close())...)
}
