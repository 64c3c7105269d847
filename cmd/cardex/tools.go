package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/faces/agents"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

func toolsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tools",
		Short: "List, search, describe and call tools as an agent (ExecutionService; caller = the agent token)",
		Long: `The MCP front for agents that have a shell, over gRPC: its tools/list (list), and its three
meta-tools search_tools, describe_tool and call_tool. The caller is the identity the server's agent
token file gives --token (env CARDEX_AGENT_TOKEN); no tenant or scopes are taken from flags.`,
	}
	cmd.AddCommand(toolsListCmd(), toolsSearchCmd(), toolsDescribeCmd(), toolsCallCmd())
	return cmd
}

// agentFlags are the connection flags of the tools commands.
type agentFlags struct {
	addr    string
	token   string
	timeout time.Duration
	tls     tlsClientFlags
}

func (f *agentFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.addr, "addr", envOr("CARDEX_ADDR", "127.0.0.1:50051"), "server address (env CARDEX_ADDR)")
	cmd.Flags().StringVar(&f.token, "token", os.Getenv("CARDEX_AGENT_TOKEN"), "agent token (env CARDEX_AGENT_TOKEN)")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 60*time.Second, "request timeout")
	f.tls.register(cmd)
}

func (f *agentFlags) connect(cmd *cobra.Command) (pb.ExecutionServiceClient, context.Context, func(), error) {
	conn, ctx, done, err := session(cmd, f.addr, "--token or CARDEX_AGENT_TOKEN", f.token, f.timeout, &f.tls)
	if err != nil {
		return nil, nil, nil, err
	}
	return pb.NewExecutionServiceClient(conn), ctx, done, nil
}

func toolsListCmd() *cobra.Command {
	var af agentFlags
	var output string
	cmd := &cobra.Command{
		Use:   "list",
		Short: "What the MCP front's tools/list shows your token: the meta-tools and your pinned tools, or in full mode every tool you may use",
		Long: `Prints the tools the token's disclosure mode lists, as the MCP front's tools/list does: progressive
(the default) lists search_tools, describe_tool and call_tool, then the token's pinned tools
(always_load) that it may use; full lists every tool the token may use. Names are qualified
(SERVER__NAME): tools describe and tools call take them as they are. Every page is fetched.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return fmt.Errorf("--output %q: use table or json", output)
			}
			client, ctx, done, err := af.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			all := &pb.ExecutionServiceListToolsResponse{}
			for cursor := ""; ; {
				resp, err := client.ListTools(ctx, &pb.ExecutionServiceListToolsRequest{Cursor: cursor})
				if err != nil {
					return err
				}
				all.Disclosure = resp.Disclosure
				all.Tools = append(all.Tools, resp.Tools...)
				if cursor = resp.NextCursor; cursor == "" {
					break
				}
			}
			if output == "json" {
				return printPlainJSON(listToolsOut(all))
			}
			rows := make([][]string, 0, len(all.Tools))
			for _, t := range all.Tools {
				tool := "(meta-tool)"
				if t.Tool != nil {
					tool = t.Tool.Server + "/" + t.Tool.Name
				}
				rows = append(rows, []string{t.Name, tool, cards.Cut(t.Description, 80)})
			}
			if err := table([]string{"NAME", "TOOL", "DESCRIPTION"}, rows); err != nil {
				return err
			}
			_, err = fmt.Fprintf(os.Stdout, "\n%d tools listed (%s disclosure)\n", len(all.Tools), all.Disclosure)
			return err
		},
	}
	af.register(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}

func toolsSearchCmd() *cobra.Command {
	var af agentFlags
	var limit int
	var output string
	var intents []string
	cmd := &cobra.Command{
		Use:   `search ["QUERY"] [--intent TEXT]... [--limit N]`,
		Short: "Names, servers and summaries of the tools you may use (query at most 200 characters; limit default 20, at most 50)",
		Long: `Names, servers and summaries of the tools you may use, best match first (search_tools).

The query and every --intent may use two operators: select:SERVER/NAME[,SERVER/NAME...] lists
exactly those tools, in that order (a tool you may not use is absent, like one that does not
exist), and +word keeps only the tools with the word in their server, name or description,
ranked by all the words ("+github open an issue").`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			client, ctx, done, err := af.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			q := ""
			if len(args) > 0 {
				q = args[0]
			}
			resp, err := client.SearchTools(ctx, &pb.ExecutionServiceSearchToolsRequest{Query: q, Limit: int32(limit), Intents: intents})
			if err != nil {
				return err
			}
			if output == "json" {
				return printPlainJSON(searchOut(resp.Tools, resp.Matches, "", resp.Abstained))
			}
			if resp.Abstained {
				fmt.Println("no tool matches; rephrase the request, or split it into --intent steps")
				return nil
			}
			if len(intents) > 0 {
				rows := make([][]string, 0, len(resp.Tools))
				for i, t := range resp.Tools {
					var m *pb.SearchMatch
					if i < len(resp.Matches) {
						m = resp.Matches[i]
					}
					var steps []string
					for _, s := range m.GetIntents() {
						steps = append(steps, strconv.Itoa(int(s)+1))
					}
					rows = append(rows, []string{t.Server, t.Name, strings.Join(steps, ","), fmt.Sprintf("%.2f", m.GetConfidence()), cards.Cut(t.Summary, 80)})
				}
				return table([]string{"SERVER", "NAME", "FOR", "CONF", "SUMMARY"}, rows)
			}
			rows := make([][]string, 0, len(resp.Tools))
			for _, t := range resp.Tools {
				rows = append(rows, []string{t.Server, t.Name, cards.Cut(t.Summary, 90)})
			}
			return table([]string{"SERVER", "NAME", "SUMMARY"}, rows)
		},
	}
	af.register(cmd)
	cmd.Flags().StringArrayVar(&intents, "intent", nil, "one step of a multi-step task (repeatable, at most 8): every step gets its tools")
	cmd.Flags().IntVar(&limit, "limit", 0, "how many results (default 20; more than 50 is capped)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}

func toolsDescribeCmd() *cobra.Command {
	var af agentFlags
	var server, output string
	cmd := &cobra.Command{
		Use:   "describe NAME [--server S]",
		Short: "One tool you may use, with its input and output schemas",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			client, ctx, done, err := af.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			server, name := splitRef(args[0], server)
			resp, err := client.DescribeTool(ctx, &pb.ExecutionServiceDescribeToolRequest{Name: name, Server: server})
			if err != nil {
				return err
			}
			if len(resp.AmbiguousServers) > 0 {
				msg := fmt.Sprintf("%q is ambiguous; name a server with --server: %s", name, strings.Join(resp.AmbiguousServers, ", "))
				if output == "json" {
					if err := printPlainJSON(ambiguousJSON{Ambiguous: true, Servers: resp.AmbiguousServers, Message: msg}); err != nil {
						return err
					}
				}
				return exitError{code: 2, msg: msg}
			}
			if output == "json" {
				return printPlainJSON(cardJSON(resp.Card))
			}
			return printCard(resp.Card)
		},
	}
	af.register(cmd)
	cmd.Flags().StringVar(&server, "server", "", "the tool's server (or write SERVER/NAME)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table or json")
	return cmd
}

// Receipt is what `tools call --output FILE` prints instead of the result.
type Receipt struct {
	Execution ReceiptExecution `json:"execution"`
	Result    ReceiptResult    `json:"result"`
}

// ReceiptExecution says what ran and how it ended.
type ReceiptExecution struct {
	ID     string `json:"id,omitempty"`
	Tool   string `json:"tool,omitempty"`
	Status string `json:"status"` // ok, tool_error, denied, uncertain, failed
	Error  string `json:"error,omitempty"`
}

// ReceiptResult says where the result is and whether the file holds all of it.
type ReceiptResult struct {
	Path     string `json:"path"`
	Bytes    int64  `json:"bytes"`
	Complete bool   `json:"complete"`
}

func toolsCallCmd() *cobra.Command {
	var af agentFlags
	var server, argsJSON, jsonFile, output, format string
	cmd := &cobra.Command{
		Use:   "call NAME [--server S] (--json-file ARGS.json | --args JSON) [--output RESULT.json] [-o json|table]",
		Short: "Run a tool you may use; with --output the result goes to the file and stdout gets a small JSON receipt",
		Long: `Authorizes the call like AuthorizeCall (scopes, status, arguments against the input schema), runs
it on the tool's upstream (an MCP server, or the REST API of a rest_operation card) and returns the
MCP result (content, structuredContent, isError).

With --output FILE the result is written to FILE (via a temporary file and a rename, so FILE is
either the whole result or untouched) and stdout holds only a receipt:
  {"execution": {"id", "tool", "status", "error"}, "result": {"path", "bytes", "complete"}}
"complete" is true only when FILE holds the whole result. status is ok, tool_error, denied,
uncertain (a POST or PATCH that timed out or lost its connection: it may or may not have taken
effect, and was not retried) or failed.

SERVER/query of a database (an sql upstream) takes {"sql": "SELECT ...", "params": {...}}; FILE gets
{"rows": [...]} and the receipt's result adds "row_count" and, when the rows stopped at a limit,
"incomplete_reason" (row_limit, byte_limit, timeout): then "complete" is false, the status "partial"
and the exit status 2. An SQL error exits 1 with the database's message (status "sql_error").

-o json (the default here) prints the result, or the receipt, as JSON; -o table prints the result's
text, or the receipt as one line. Exit status: 0 ok; 1 the tool reported an error, the call failed or
was uncertain, or the file could not be written; 2 the call was refused.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if argsJSON != "" && jsonFile != "" {
				return usageError("give --args or --json-file, not both")
			}
			if err := checkOutput(format); err != nil {
				return err
			}
			if jsonFile != "" {
				var b []byte
				var err error
				if jsonFile == "-" {
					b, err = io.ReadAll(io.LimitReader(os.Stdin, 1<<20+1))
				} else {
					b, err = os.ReadFile(jsonFile)
				}
				if err != nil {
					return fmt.Errorf("--json-file: %w", err)
				}
				argsJSON = string(b)
			}
			server, name := splitRef(args[0], server)
			client, ctx, done, err := af.connect(cmd)
			if err != nil {
				return err
			}
			defer done()
			resp, err := client.CallTool(ctx, &pb.CallToolRequest{Name: name, Server: server, ArgumentsJson: argsJSON})
			if err == nil && resp.Query != nil {
				return finishQuery(resp, output) // a database's query card (tools_sql.go)
			}
			return finishCall(resp, err, output, format)
		},
	}
	af.register(cmd)
	f := cmd.Flags()
	f.StringVar(&server, "server", "", "the tool's server (or write SERVER/NAME)")
	f.StringVar(&argsJSON, "args", "", "arguments as a JSON object")
	f.StringVar(&jsonFile, "json-file", "", "file holding the arguments as a JSON object (- for stdin)")
	f.StringVar(&output, "output", "", "write the result to this file and print only a receipt")
	f.StringVarP(&format, "format", "o", "json", "what stdout gets: json (the result, or the receipt) or table (the result's text, or the receipt in a line)")
	return cmd
}

// finishCall writes the result (to stdout, or to the output file with a
// receipt on stdout) and turns the outcome into the exit status.
func finishCall(resp *pb.CallToolResponse, callErr error, output, format string) error {
	rec := Receipt{Result: ReceiptResult{Path: output}}
	if callErr != nil {
		st := status.Convert(callErr)
		code := 1
		rec.Execution.Status = "failed"
		switch st.Code() {
		case codes.NotFound, codes.InvalidArgument, codes.FailedPrecondition, codes.Unauthenticated, codes.PermissionDenied:
			code, rec.Execution.Status = 2, "denied"
		}
		if uncertain(st) {
			rec.Execution.Status = "uncertain"
		}
		rec.Execution.Error = st.Message()
		if output != "" {
			if err := printReceipt(rec, format); err != nil {
				return err
			}
		}
		return exitError{code: code, msg: fmt.Sprintf("call %s: %s", rec.Execution.Status, st.Message())}
	}
	rec.Execution.ID = resp.ExecutionId
	rec.Execution.Tool = resp.Tool.GetServer() + "/" + resp.Tool.GetName()
	rec.Execution.Status = "ok"
	if resp.IsError {
		rec.Execution.Status = "tool_error"
	}
	if output == "" {
		if err := printResult(resp.ResultJson, format); err != nil {
			return err
		}
	} else {
		n, err := writeFileAtomic(output, []byte(resp.ResultJson))
		rec.Result.Bytes, rec.Result.Complete = n, err == nil
		if err != nil {
			rec.Execution.Error = "writing the result: " + err.Error()
		}
		if perr := printReceipt(rec, format); perr != nil {
			return perr
		}
		if err != nil {
			return exitError{code: 1, msg: fmt.Sprintf("the result of %s was not written completely: %v", rec.Execution.Tool, err)}
		}
	}
	if resp.IsError {
		return exitError{code: 1, msg: fmt.Sprintf("%s reported an error (see the result)", rec.Execution.Tool)}
	}
	return nil
}

func printReceipt(rec Receipt, format string) error {
	if format == "json" {
		return printPlainJSON(rec)
	}
	line := rec.Execution.Status
	if rec.Execution.Tool != "" {
		line += " " + rec.Execution.Tool
	}
	if rec.Result.Complete {
		line += fmt.Sprintf(" → %s (%d bytes, complete)", rec.Result.Path, rec.Result.Bytes)
	} else {
		line += " → nothing written to " + rec.Result.Path
	}
	if rec.Execution.ID != "" {
		line += " execution " + rec.Execution.ID
	}
	if rec.Execution.Error != "" {
		line += ": " + rec.Execution.Error
	}
	_, err := fmt.Println(line)
	return err
}

// printResult prints a tool result: the JSON as it is, or its text content.
func printResult(resultJSON, format string) error {
	if format == "json" {
		_, err := fmt.Fprintln(os.Stdout, resultJSON)
		return err
	}
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	if err := json.Unmarshal([]byte(resultJSON), &r); err != nil {
		return err
	}
	printed := false
	for _, c := range r.Content {
		if c.Type == "text" {
			fmt.Println(c.Text)
			printed = true
		} else {
			fmt.Printf("[%s content: see -o json]\n", c.Type)
		}
	}
	if !printed && len(r.StructuredContent) > 0 {
		fmt.Println(string(r.StructuredContent))
	}
	return nil
}

// uncertain: the server said the call may or may not have taken effect.
func uncertain(st *status.Status) bool {
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.Domain == agents.ErrorDomain && ei.Reason == agents.ReasonUncertain {
			return true
		}
	}
	return false
}

// writeFileAtomic writes data to a temporary file beside path, syncs it and
// renames it over path: path holds either all of data or what it held before.
// It returns the bytes in place at path (0 unless complete).
func writeFileAtomic(path string, data []byte) (int64, error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return 0, err
	}
	defer os.Remove(tmp.Name()) // a no-op after the rename
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return 0, err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return 0, err
	}
	if err := tmp.Close(); err != nil {
		return 0, err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return 0, err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return 0, err
	}
	return int64(len(data)), nil
}
