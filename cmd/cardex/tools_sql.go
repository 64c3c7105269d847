package main

import (
	"encoding/json"
	"fmt"
	"os"

	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// queryReceipt is what `tools call SERVER/query --output FILE` prints: the
// receipt of any call, plus how many rows the file holds and whether that
// is all of them.
type queryReceipt struct {
	Execution ReceiptExecution   `json:"execution"`
	Result    queryReceiptResult `json:"result"`
}

type queryReceiptResult struct {
	ReceiptResult
	RowCount         int64  `json:"row_count"`
	IncompleteReason string `json:"incomplete_reason,omitempty"`
}

var incompleteWhy = map[string]string{
	"row_limit":  "the connection's row limit was reached",
	"byte_limit": "the connection's byte limit was reached",
	"timeout":    "the statement timeout ended the query",
}

// finishQuery writes a query's rows ({"rows": [...]}, to stdout or through
// a temporary file and a rename to output) and turns the outcome into the
// exit status: 0 complete, 2 partial (the receipt names the file as
// partial), 1 when the database answered with an error (its message) or the
// file could not be written.
func finishQuery(resp *pb.CallToolResponse, output string) error {
	q := resp.Query
	rec := queryReceipt{Execution: ReceiptExecution{ID: resp.ExecutionId, Tool: resp.Tool.GetServer() + "/" + resp.Tool.GetName(), Status: "ok"},
		Result: queryReceiptResult{ReceiptResult: ReceiptResult{Path: output}, RowCount: q.RowCount, IncompleteReason: q.IncompleteReason}}
	if q.Error != "" {
		rec.Execution.Status, rec.Execution.Error = "sql_error", q.Error
		rec.Result.RowCount = 0
		if output != "" {
			if err := printPlainJSON(rec); err != nil {
				return err
			}
		}
		return exitError{code: 1, msg: fmt.Sprintf("query failed: %s", q.Error)}
	}
	var res struct {
		StructuredContent struct {
			Rows json.RawMessage `json:"rows"`
		} `json:"structuredContent"`
	}
	if err := json.Unmarshal([]byte(resp.ResultJson), &res); err != nil || len(res.StructuredContent.Rows) == 0 {
		return exitError{code: 1, msg: fmt.Sprintf("the result of %s holds no rows: %v", rec.Execution.Tool, err)}
	}
	body := append(append([]byte(`{"rows":`), res.StructuredContent.Rows...), "}\n"...)
	partial := ""
	if !q.Complete {
		rec.Execution.Status = "partial"
		partial = fmt.Sprintf("%d rows: %s", q.RowCount, incompleteWhy[q.IncompleteReason])
	}
	if output == "" {
		if _, err := os.Stdout.Write(body); err != nil {
			return err
		}
		if partial != "" {
			return exitError{code: 2, msg: "the result is partial (" + partial + ")"}
		}
		return nil
	}
	n, err := writeFileAtomic(output, body)
	rec.Result.Bytes, rec.Result.Complete = n, err == nil && q.Complete
	if err != nil {
		rec.Execution.Status, rec.Execution.Error = "failed", "writing the result: "+err.Error()
	}
	if perr := printPlainJSON(rec); perr != nil {
		return perr
	}
	switch {
	case err != nil:
		return exitError{code: 1, msg: fmt.Sprintf("the result of %s was not written: %v", rec.Execution.Tool, err)}
	case partial != "":
		return exitError{code: 2, msg: fmt.Sprintf("%s holds a partial result (%s)", output, partial)}
	}
	return nil
}
