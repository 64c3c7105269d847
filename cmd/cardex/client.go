package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/seed0cff8200/cardex/cards"
	"github.com/seed0cff8200/cardex/internal/codec/apiconv"
	"github.com/seed0cff8200/cardex/internal/ops/ratewait"
	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// clientFlags are shared by every command that talks to a running server.
type clientFlags struct {
	addr    string
	output  string
	timeout time.Duration
	token   string
	tls     tlsClientFlags
	// yaml: the command prints YAML too (-o yaml).
	yaml bool
}

func (f *clientFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.addr, "addr", envOr("CARDEX_ADDR", "127.0.0.1:50051"), "server address (env CARDEX_ADDR)")
	formats := "table or json"
	if f.yaml {
		formats = "table, json or yaml"
	}
	cmd.Flags().StringVarP(&f.output, "output", "o", "table", "output format: "+formats)
	cmd.Flags().DurationVar(&f.timeout, "timeout", 30*time.Second, "request timeout")
	cmd.Flags().StringVar(&f.token, "catalog-token", os.Getenv("CARDEX_CATALOG_TOKEN"), "catalog token, if the server requires one (env CARDEX_CATALOG_TOKEN)")
	cmd.Flags().StringVar(&f.token, "token", envOr("CARDEX_TOKEN", os.Getenv("CARDEX_CATALOG_TOKEN")), "service token (role discover, catalog or admin) or JWT sent as authorization: Bearer (env CARDEX_TOKEN)")
	f.tls.register(cmd)
	addCheck(cmd, f.check)
}

// check refuses a bad --output before anything is done.
func (f *clientFlags) check() error {
	if !f.yaml {
		return checkOutput(f.output)
	}
	if f.output != "table" && f.output != "json" && f.output != "yaml" {
		return usageError("--output %q: use table, json or yaml", f.output)
	}
	return nil
}

func checkOutput(o string) error {
	if o != "table" && o != "json" {
		return usageError("--output %q: use table or json", o)
	}
	return nil
}

// catalog connects to the server: a CatalogService client, the context of
// its calls and done, which ends both.
func (f *clientFlags) catalog(cmd *cobra.Command) (pb.CatalogServiceClient, context.Context, func(), error) {
	conn, ctx, done, err := f.connect(cmd)
	if err != nil {
		return nil, nil, nil, err
	}
	return pb.NewCatalogServiceClient(conn), ctx, done, nil
}

// discovery connects to the server: a DiscoveryService client, the context
// of its calls and done, which ends both.
func (f *clientFlags) discovery(cmd *cobra.Command) (pb.DiscoveryServiceClient, context.Context, func(), error) {
	conn, ctx, done, err := f.connect(cmd)
	if err != nil {
		return nil, nil, nil, err
	}
	return pb.NewDiscoveryServiceClient(conn), ctx, done, nil
}

func (f *clientFlags) connect(cmd *cobra.Command) (*grpc.ClientConn, context.Context, func(), error) {
	if err := f.check(); err != nil {
		return nil, nil, nil, err
	}
	return session(cmd, f.addr, "--token (CARDEX_TOKEN) or --catalog-token (CARDEX_CATALOG_TOKEN)", f.token, f.timeout, &f.tls)
}

// session connects to addr (with the TLS flags t) and returns the
// connection, the context of its calls — the command's, ending after
// timeout, carrying token as the bearer credential — and done, which ends
// both. tokenHint names the token's flag and variable in errors.
func session(cmd *cobra.Command, addr, tokenHint, token string, timeout time.Duration, t *tlsClientFlags) (*grpc.ClientConn, context.Context, func(), error) {
	creds, err := t.creds()
	if err != nil {
		return nil, nil, nil, err
	}
	conn, err := dial(addr, tokenHint, creds, true)
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
	if token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	}
	return conn, ctx, func() { cancel(); conn.Close() }, nil
}

// withToken adds the token, if any, to the calls made with ctx.
func (f *clientFlags) withToken(ctx context.Context) context.Context {
	if f.token == "" {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+f.token)
}

// dial connects to a cardex server. Every call's error is explained in the
// words of the CLI (see explain); tokenHint names the flag and variable of
// the token the server may ask for; creds nil is plaintext. With
// waitLimits, a call the server's rate limits refuse is made again after
// the delay the server asks for (within the call's timeout).
func dial(addr, tokenHint string, creds credentials.TransportCredentials, waitLimits bool) (*grpc.ClientConn, error) {
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	chain := []grpc.UnaryClientInterceptor{explainer(addr, tokenHint, creds.Info().SecurityProtocol == "tls")}
	if waitLimits {
		chain = append(chain, ratewait.Interceptor(nil))
	}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)),
		grpc.WithChainUnaryInterceptor(chain...))
	if err != nil {
		return nil, fmt.Errorf("--addr %q: %v", addr, err)
	}
	return conn, nil
}

// withTenantHeader names the request's tenant in the routing header
// (apiconv.TenantHeader), so that a proxy in front of tenant-resident
// replicas can route the call by it (docs/SCALING.md).
func withTenantHeader(ctx context.Context, req any) context.Context {
	if ts := apiconv.RequestTenants(req); len(ts) == 1 && ts[0] != "" {
		return metadata.AppendToOutgoingContext(ctx, apiconv.TenantHeader, ts[0])
	}
	return ctx
}

// explainer is the interceptor that explains every call's error (explain;
// tlsOn says the client connects with TLS), and names the request's tenant
// in the routing header.
func explainer(addr, tokenHint string, tlsOn bool) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		return explain(addr, tokenHint, tlsOn, invoker(withTenantHeader(ctx, req), method, req, reply, cc, opts...))
	}
}

// explain rewrites the messages of errors that gRPC raises on the client's
// side (no connection, no such host, TLS on one side only or not trusted:
// explainTLS) into what to do about them, keeping the code. The server's own
// messages pass as they are, with the token to give added to
// Unauthenticated.
func explain(addr, tokenHint string, tlsOn bool, err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	msg := st.Message()
	low := strings.ToLower(msg)
	if st.Code() == codes.Unavailable {
		if advice, ok := explainTLS(addr, tlsOn, low); ok {
			return status.Errorf(codes.Unavailable, "cannot talk to the cardex server at %s: %s", addr, advice)
		}
	}
	switch {
	case st.Code() == codes.Unavailable && (strings.Contains(low, "connection error") || strings.Contains(low, "error while dialing") ||
		strings.Contains(low, "name resolver error") || strings.Contains(low, "produced zero addresses") || strings.Contains(low, "connection closed before server preface")):
		reason := "no connection"
		switch {
		case strings.Contains(low, "connection refused"):
			reason = "connection refused"
		case strings.Contains(low, "no such host"), strings.Contains(low, "produced zero addresses"):
			reason = "no such host"
		case strings.Contains(low, "preface"):
			reason = "the address answers, but not as a gRPC server"
		}
		return status.Errorf(codes.Unavailable, "cannot reach a cardex server at %s (%s): start one with `cardex serve`, or point --addr (env CARDEX_ADDR) at a running one", addr, reason)
	case st.Code() == codes.DeadlineExceeded && !strings.Contains(low, "upstream"):
		return status.Errorf(codes.DeadlineExceeded, "%s (the server at %s did not answer within --timeout)", msg, addr)
	case st.Code() == codes.Unauthenticated && tokenHint != "":
		return status.Errorf(codes.Unauthenticated, "%s (give it with %s)", msg, tokenHint)
	}
	return err
}

// callerFlags identify the caller of discovery commands. With a token, the
// tenant may be left out (a bound token names it; the server says when the
// token does not), and the subject is the binding's unless given.
type callerFlags struct {
	tenant, subject, scopes string
	cmd                     *cobra.Command
}

func (f *callerFlags) register(cmd *cobra.Command) {
	f.cmd = cmd
	cmd.Flags().StringVar(&f.tenant, "tenant", os.Getenv("CARDEX_TENANT"), "caller tenant (env CARDEX_TENANT); with a token bound to a caller, the binding's when left out")
	cmd.Flags().StringVar(&f.scopes, "scopes", os.Getenv("CARDEX_SCOPES"), "caller scopes, comma-separated, e.g. support:read,billing:* (env CARDEX_SCOPES)")
	cmd.Flags().StringVar(&f.subject, "subject", envOr("CARDEX_SUBJECT", "cli"), "caller subject (hashed in the discovery log); with a token and no --subject, the binding's or none")
	addCheck(cmd, func() error {
		if f.tenant == "" && f.withToken() {
			return nil
		}
		return requireTenant(f.tenant)
	})
}

// withToken says whether the command sends a token.
func (f *callerFlags) withToken() bool {
	fl := f.cmd.Flags().Lookup("token")
	return fl != nil && fl.Value.String() != ""
}

func (f *callerFlags) caller() *pb.Caller {
	subject := f.subject
	if f.withToken() && os.Getenv("CARDEX_SUBJECT") == "" && !f.cmd.Flags().Changed("subject") {
		subject = "" // the default "cli" would contradict a bound subject
	}
	return &pb.Caller{Tenant: f.tenant, Subject: subject, Scopes: splitList(f.scopes)}
}

// requireTenant is the check of every command that needs --tenant.
func requireTenant(tenant string) error {
	if tenant == "" {
		return usageError("--tenant is required (or set CARDEX_TENANT)")
	}
	if !cards.ValidName(tenant) {
		return usageError("--tenant %q must match [A-Za-z0-9_.-]{1,128}", tenant)
	}
	return nil
}

func printPlainJSON(v any) error {
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes aligned rows to stdout.
func table(header []string, rows [][]string) error {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, strings.Join(header, "\t"))
	for _, r := range rows {
		fmt.Fprintln(w, strings.Join(r, "\t"))
	}
	return w.Flush()
}
