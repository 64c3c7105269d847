package main

import (
	"crypto/tls"
	"errors"
	"net"
	"os"
	"strings"
	"time"

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

// explainTLS turns a connection error (low: its message, lower-case) caused
// by TLS into what to do, naming the flag: a plaintext client before a TLS
// server (probed: the message alone cannot tell it from any other server
// that hangs up), a TLS client before a plaintext server, a server
// certificate this machine does not trust or that names another host, a
// client certificate missing or refused. ok is false for other errors.
func explainTLS(addr string, tlsOn bool, low string) (advice string, ok bool) {
	if !tlsOn {
		if strings.Contains(low, "preface") && speaksTLS(addr) {
			return "it speaks TLS and this client did not: connect with --tls (env CARDEX_TLS=true), and --tls-ca FILE (env CARDEX_TLS_CA) when a private CA signed its certificate", true
		}
		return "", false
	}
	switch {
	case strings.Contains(low, "first record does not look like a tls handshake"):
		return "it does not speak TLS (cardex serve without --tls-cert) and this client did: connect without --tls, --tls-ca, --tls-cert and --tls-key (and unset CARDEX_TLS, CARDEX_TLS_CA, CARDEX_TLS_CERT)", true
	case strings.Contains(low, "certificate signed by unknown authority"):
		return "its certificate is not signed by a CA this machine trusts: give the CA certificate (PEM) that signed it with --tls-ca FILE (env CARDEX_TLS_CA)", true
	case strings.Contains(low, "certificate is valid for"):
		detail := low[strings.Index(low, "certificate is valid for"):]
		detail = strings.TrimRight(detail, `"`)
		return "its " + detail + ": write a name it holds in --addr, or give it with --tls-server-name NAME", true
	case strings.Contains(low, "certificate required"):
		return "it asks for a client certificate (cardex serve --tls-client-ca): give --tls-cert FILE and --tls-key FILE (env CARDEX_TLS_CERT, CARDEX_TLS_KEY)", true
	case strings.Contains(low, "bad certificate"), strings.Contains(low, "unknown certificate authority"):
		return "it refused the client certificate of --tls-cert: give one signed by the CA the server trusts (its --tls-client-ca)", true
	case strings.Contains(low, "broken pipe"), strings.Contains(low, "connection reset by peer"):
		// TLS 1.3: a server that refuses the client's certificate may hang
		// up before its alert is read.
		return "it hung up on the TLS connection; a server that takes client certificates (cardex serve --tls-client-ca) does so when --tls-cert is missing or not signed by the CA it trusts", true
	}
	return "", false
}

// speaksTLS says whether addr answers a TLS handshake. Its certificate is
// not checked: the answer only chooses the advice, and nothing is sent
// over the connection.
func speaksTLS(addr string) bool {
	d := &net.Dialer{Timeout: 2 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // a probe: nothing is sent or trusted
	if err == nil {
		conn.Close()
		return true
	}
	var alert tls.AlertError
	return errors.As(err, &alert) // a TLS server that refused the handshake (it wants a client certificate)
}
