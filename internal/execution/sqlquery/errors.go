package sqlquery

import (
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"
)

// Why a query was refused (nothing reached the database, or the database
// refused a write).
const (
	// RefusedStatement: not one SELECT or WITH statement, or a write the
	// READ ONLY transaction refused.
	RefusedStatement = "statement"
	// RefusedReserved: a parameter that the connection binds.
	RefusedReserved = "reserved_parameter"
	// RefusedArguments: malformed arguments or parameters.
	RefusedArguments = "arguments"
	// RefusedClosedView: a view whose card is not active (revoked or
	// pending) is still readable by the query role.
	RefusedClosedView = "closed_view"
)

// Refusal is a query that was not run.
type Refusal struct {
	Reason  string // Refused*
	Message string
	// Relations are, for RefusedClosedView, the readable relations whose
	// cards are not active: for the operator (logs, audit), not the agent.
	Relations []string
}

func (r *Refusal) Error() string { return r.Message }

func refuse(reason, format string, args ...any) *Refusal {
	return &Refusal{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// SQLError is the database's error for a query that ran and failed.
type SQLError struct {
	Code    string // SQLSTATE; empty for errors cardex raises about the result
	Message string
	Detail  string
	Hint    string
}

func (e *SQLError) Error() string {
	var b strings.Builder
	b.WriteString("ERROR: " + e.Message)
	if e.Code != "" {
		b.WriteString(" (SQLSTATE " + e.Code + ")")
	}
	if e.Detail != "" {
		b.WriteString("\nDETAIL: " + e.Detail)
	}
	if e.Hint != "" {
		b.WriteString("\nHINT: " + e.Hint)
	}
	return b.String()
}

// SQLSTATEs the executor treats specially.
const (
	stateReadOnly      = "25006" // read_only_sql_transaction: a write in READ ONLY
	stateCanceled      = "57014" // query_canceled: statement_timeout
	stateNotSupported  = "0A000" // feature_not_supported (a data-modifying WITH in a cursor)
	stateMultipleStmts = "42601" // syntax_error (also: more than one command in a prepared statement)
)

// classify turns a database error raised while the statement was declared
// into a refusal (a write, a second statement) or an *SQLError.
func classify(err error) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return err
	}
	switch {
	case pe.Code == stateReadOnly:
		return refuse(RefusedStatement, "the query tried to write, and this connection is read-only: %s", pe.Message)
	case pe.Code == stateNotSupported && strings.Contains(pe.Message, "data-modifying"):
		return refuse(RefusedStatement, "the query tried to write (a data-modifying WITH), and this connection is read-only")
	case pe.Code == stateMultipleStmts && strings.Contains(pe.Message, "multiple commands"):
		return refuse(RefusedStatement, "sql holds more than one statement: send one SELECT or WITH query per call")
	}
	return &SQLError{Code: pe.Code, Message: pe.Message, Detail: pe.Detail, Hint: pe.Hint}
}
