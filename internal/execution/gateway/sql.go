package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/execution/sqlquery"
	"github.com/seed0cff8200/cardex/internal/execution/upstream"
	"github.com/seed0cff8200/cardex/retriever"
)

// Audit outcomes of queries.
const (
	// OutcomeSQLError: the query ran and the database answered with an
	// error (the audit keeps its SQLSTATE, not its message).
	OutcomeSQLError = "sql_error"
	// OutcomeDeniedStatement: not one SELECT/WITH statement, or a write.
	OutcomeDeniedStatement = "denied_statement"
	// OutcomeDeniedReserved: a parameter the connection binds.
	OutcomeDeniedReserved = "denied_reserved_parameter"
	// OutcomeDeniedClosedView: a view whose card is revoked or pending is
	// still readable by the query role, so no query runs.
	OutcomeDeniedClosedView = "denied_closed_view"
)

// QueryReceipt says how complete a query's rows are.
type QueryReceipt struct {
	RowCount         int
	Complete         bool
	IncompleteReason string // row_limit, byte_limit, timeout
	// Error is the database's message when the query failed.
	Error string
}

// relation is the SQL name of a view card's relation: the one its import
// recorded (x-cardex-sql.relation in the output schema), else its name as
// schema.name.
func relation(c *cards.Card) string {
	var s struct {
		SQL struct {
			Relation string `json:"relation"`
		} `json:"x-cardex-sql"`
	}
	if json.Unmarshal(c.OutputSchema, &s) == nil && s.SQL.Relation != "" {
		return s.SQL.Relation
	}
	schema, name, ok := strings.Cut(c.Name, ".")
	if !ok {
		return pgx.Identifier{c.Name}.Sanitize()
	}
	return pgx.Identifier{schema, name}.Sanitize()
}

// readsAllViews reports whether the caller holds the scopes of every
// active view card of the server: a query can read any of them.
func (g *Gateway) readsAllViews(c retriever.Caller, server string) bool {
	for _, scopes := range g.Retriever.ServerScopes(c.Tenant, server, cards.KindSQLView) {
		if !retriever.HoldsAll(c.Scopes, scopes) {
			return false
		}
	}
	return true
}

// callSQL runs the query card of an SQL upstream. The caller must hold the
// scopes of every view card of the server, since the query can read any of
// them; otherwise the query card is as unknown as one that does not exist.
func (g *Gateway) callSQL(ctx context.Context, c retriever.Caller, name, server string, card cards.Card, args json.RawMessage, entry *upstream.AuditEntry) (CallResult, error) {
	key := card.Key()
	if card.Name != sqlquery.QueryTool {
		return CallResult{}, &upstream.CallError{Kind: upstream.KindNotRegistered, Server: key.Server,
			Err: fmt.Errorf("%s/%s is a %s card: run SQL on it with %s/%s", key.Server, key.Name, card.Kind, key.Server, sqlquery.QueryTool)}
	}
	if !g.readsAllViews(c, key.Server) {
		// Unknown: the audit keeps what was asked for, as for any unknown tool.
		entry.Server, entry.Tool = server, name
		return CallResult{}, unknown(name)
	}
	// The views whose cards are revoked or pending must be unreadable: the
	// query runs only while the database says so.
	inactive, err := g.Retriever.InactiveCards(ctx, c.Tenant, key.Server, cards.KindSQLView)
	if err != nil {
		return CallResult{}, err
	}
	var closed []string
	for i := range inactive {
		closed = append(closed, relation(&inactive[i]))
	}
	res, err := g.SQL.Query(ctx, c.Tenant, key.Server, args, closed...)
	var ref *sqlquery.Refusal
	var se *sqlquery.SQLError
	switch {
	case errors.As(err, &ref):
		outcome := upstream.OutcomeDeniedArguments
		switch ref.Reason {
		case sqlquery.RefusedStatement:
			outcome = OutcomeDeniedStatement
		case sqlquery.RefusedReserved:
			outcome = OutcomeDeniedReserved
		case sqlquery.RefusedClosedView:
			// The agent is told the query card is unavailable; the operator,
			// in the log and the audit, which views to close.
			outcome = OutcomeDeniedClosedView
			entry.Detail = "readable views whose cards are not active: " + strings.Join(ref.Relations, ", ")
			if g.Log != nil {
				g.Log.Warn("sql upstream: a view whose card is not active is readable by the query role; no query runs until it is not",
					"tenant", c.Tenant, "server", key.Server, "relations", strings.Join(ref.Relations, ", "))
			}
		}
		return CallResult{}, &Denial{Outcome: outcome, Message: ref.Message}
	case errors.As(err, &se):
		entry.Detail = "the database answered with an error"
		if se.Code != "" {
			entry.Detail = "SQLSTATE " + se.Code // its message may quote values
		}
		msg := se.Error()
		return CallResult{Tool: key, Query: &QueryReceipt{Error: msg},
			Result: &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: msg}}}}, nil
	case err != nil:
		return CallResult{}, err
	}
	n, complete := res.RowCount, res.Complete
	entry.RowCount, entry.Complete, entry.IncompleteReason = &n, &complete, res.IncompleteReason
	out := res.JSON()
	return CallResult{Tool: key,
		Query:  &QueryReceipt{RowCount: res.RowCount, Complete: res.Complete, IncompleteReason: res.IncompleteReason},
		Result: &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(out)}}, StructuredContent: out}}, nil
}
