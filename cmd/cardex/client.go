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
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	pb "github.com/seed0cff8200/cardex/proto/cardex/v1"
)

// clientFlags are shared by every command that talks to a running server.
type clientFlags struct {
	addr    string
	output  string
	timeout time.Duration
	token   string
	tls     tlsClientFlags
}

func (f *clientFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.addr, "addr", envOr("CARDEX_ADDR", "127.0.0.1:50051"), "server address (env CARDEX_ADDR)")
	cmd.Flags().StringVarP(&f.output, "output", "o", "table", "output format: table or json")
	cmd.Flags().DurationVar(&f.timeout, "timeout", 30*time.Second, "request timeout")
	cmd.Flags().StringVar(&f.token, "catalog-token", os.Getenv("CARDEX_CATALOG_TOKEN"), "catalog token, if the server requires one (env CARDEX_CATALOG_TOKEN)")
	cmd.Flags().StringVar(&f.token, "token", envOr("CARDEX_TOKEN", os.Getenv("CARDEX_CATALOG_TOKEN")), "service token (role discover, catalog or admin) or JWT sent as authorization: Bearer (env CARDEX_TOKEN)")
	f.tls.register(cmd)
}

func (f *clientFlags) connect(cmd *cobra.Command) (*grpc.ClientConn, context.Context, context.CancelFunc, error) {
	if f.output != "table" && f.output != "json" {
		return nil, nil, nil, fmt.Errorf("--output %q: use table or json", f.output)
	}
	creds, err := f.tls.creds()
	if err != nil {
		return nil, nil, nil, err
	}
	conn, err := grpc.NewClient(f.addr, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20)))
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	if f.token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+f.token)
	}
	return conn, ctx, cancel, nil
}

// callerFlags identify the caller of discovery commands.
type callerFlags struct {
	tenant, subject, scopes string
}

func (f *callerFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.tenant, "tenant", os.Getenv("CARDEX_TENANT"), "caller tenant (env CARDEX_TENANT)")
	cmd.Flags().StringVar(&f.scopes, "scopes", os.Getenv("CARDEX_SCOPES"), "caller scopes, comma-separated, e.g. support:read,billing:* (env CARDEX_SCOPES)")
	cmd.Flags().StringVar(&f.subject, "subject", envOr("CARDEX_SUBJECT", "cli"), "caller subject (hashed in the discovery log)")
}

func (f *callerFlags) caller() *pb.Caller {
	return &pb.Caller{Tenant: f.tenant, Subject: f.subject, Scopes: splitList(f.scopes)}
}

func printJSON(m proto.Message) error {
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  ", EmitUnpopulated: false}.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(os.Stdout, string(b))
	return err
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

func cut(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
