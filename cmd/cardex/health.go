package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func healthCmd() *cobra.Command {
	var addr, service string
	var timeout time.Duration
	var tf tlsClientFlags
	cmd := &cobra.Command{
		Use:   "health [--addr A] [--service S]",
		Short: "Check a server's gRPC health (exit 0 when SERVING, 1 otherwise): for container health checks",
		Long: `Asks grpc.health.v1.Health of the server at --addr for --service (empty: the server as a whole,
SERVING once the schema is current; cardex.v1.CatalogService is NOT_SERVING while the database is
unreachable) and prints the status. Exit status 0 when SERVING, 1 otherwise. A server started
with --tls-cert is checked with --tls (and --tls-ca for a private CA; --tls-cert/--tls-key when
it requires client certificates).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			creds, err := tf.creds()
			if err != nil {
				return err
			}
			conn, err := dial(addr, "", creds, false)
			if err != nil {
				return err
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			res, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
			if err != nil {
				return err
			}
			fmt.Println(res.GetStatus())
			if res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				return exitError{code: 1, msg: fmt.Sprintf("%s is %s", addr, res.GetStatus())}
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&addr, "addr", envOr("CARDEX_ADDR", "127.0.0.1:50051"), "server address (env CARDEX_ADDR)")
	cmd.Flags().StringVar(&service, "service", "", "service to check (default: the server as a whole)")
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "how long to wait for the answer")
	tf.register(cmd)
	return cmd
}
