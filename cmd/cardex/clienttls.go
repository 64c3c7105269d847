package main

import (
	"os"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/seed0cff8200/cardex/internal/access/auth"
)

// tlsClientFlags are the client commands' TLS flags: --tls, --tls-ca,
// --tls-cert, --tls-key, --tls-server-name.
type tlsClientFlags struct {
	on                        bool
	ca, cert, key, serverName string
}

func (f *tlsClientFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.BoolVar(&f.on, "tls", os.Getenv("CARDEX_TLS") == "true", "connect with TLS, verifying the server with the system's roots or --tls-ca (env CARDEX_TLS=true)")
	fl.StringVar(&f.ca, "tls-ca", os.Getenv("CARDEX_TLS_CA"), "CA certificate (PEM) that signed the server's certificate; implies --tls (env CARDEX_TLS_CA)")
	fl.StringVar(&f.cert, "tls-cert", os.Getenv("CARDEX_TLS_CERT"), "client certificate (PEM) for mutual TLS; implies --tls (env CARDEX_TLS_CERT)")
	fl.StringVar(&f.key, "tls-key", os.Getenv("CARDEX_TLS_KEY"), "private key (PEM) of --tls-cert (env CARDEX_TLS_KEY)")
	fl.StringVar(&f.serverName, "tls-server-name", "", "name to verify in the server's certificate (default: the host of --addr)")
}

// creds are the transport credentials: plaintext unless a TLS flag is set.
func (f *tlsClientFlags) creds() (credentials.TransportCredentials, error) {
	if !f.on && f.ca == "" && f.cert == "" && f.key == "" {
		return insecure.NewCredentials(), nil
	}
	cfg, err := auth.ClientTLS(f.ca, f.cert, f.key, f.serverName)
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(cfg), nil
}
