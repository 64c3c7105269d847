package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

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
)

// QueryReceipt says how complete a query's rows are.
type QueryReceipt struct {
	RowCount         int
	Complete         bool
	IncompleteReason string // row_limit, byte_limit, timeout
	// Error is the database's message when the query failed.
	Error string
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
	for _, scopes := range g.Retriever.ServerScopes(c.Tenant, key.Server, cards.KindSQLView) {
		if !retriever.HoldsAll(c.Scopes, scopes) {
			// Unknown: the audit keeps what was asked for, as for any unknown tool.
			entry.Server, entry.Tool = server, name
			return CallResult{}, unknown(name)
		}
	}
	res, err := g.SQL.Query(ctx, c.Tenant, key.Server, args)
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
