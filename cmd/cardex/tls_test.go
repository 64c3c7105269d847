package main

import (
	"crypto/tls"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed0cff8200/cardex/internal/testkit/testpki"
)

// TestTLSMismatchExplained: a client whose TLS does not fit the server's
// gets an error that names the flag to use, on gRPC (the CLI) and on the
// HTTP listener.
func TestTLSMismatchExplained(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildBinary(t)
	p := testpki.New(t)
	tlsAddr, tlsHTTP, _ := startServerHTTP(t, bin, filepath.Join(t.TempDir(), "tls"), "--tls-cert", p.ServerCert, "--tls-key", p.ServerKey)
	plainAddr, plainHTTP, _ := startServerHTTP(t, bin, filepath.Join(t.TempDir(), "plain"))
	mtlsAddr, _, _ := startServerHTTP(t, bin, filepath.Join(t.TempDir(), "mtls"), "--tls-cert", p.ServerCert, "--tls-key", p.ServerKey, "--tls-client-ca", p.CA)
	port := func(a string) string { return a[strings.LastIndex(a, ":"):] }

	for _, tc := range []struct {
		name, addr string
		args       []string
		want       string
	}{
		{"plaintext client, TLS server", tlsAddr, nil, "it speaks TLS and this client did not: connect with --tls (env CARDEX_TLS=true), and --tls-ca FILE"},
		{"TLS client, plaintext server", plainAddr, []string{"--tls-ca", p.CA}, "it does not speak TLS (cardex serve without --tls-cert) and this client did: connect without --tls, --tls-ca"},
		{"untrusted certificate", tlsAddr, []string{"--tls"}, "its certificate is not signed by a CA this machine trusts: give the CA certificate (PEM) that signed it with --tls-ca FILE"},
		{"another name", "localhost" + port(tlsAddr), []string{"--tls-ca", p.CA, "--tls-server-name", "cardex.example"}, "not cardex.example: write a name it holds in --addr, or give it with --tls-server-name NAME"},
		// Under TLS 1.3 the server's alert may or may not be read before it
		// hangs up: either answer names both flags.
		{"no client certificate", mtlsAddr, []string{"--tls-ca", p.CA}, "(cardex serve --tls-client-ca)"},
		{"a client certificate of another CA", mtlsAddr, []string{"--tls-ca", p.CA, "--tls-cert", p.OtherClientCert, "--tls-key", p.OtherClientKey}, "--tls-client-ca"},
	} {
		_, stderr, code := runErr(t, bin, tc.addr, append([]string{"discover", "where is my package", "--tenant", "acme", "--timeout", "5s"}, tc.args...)...)
		if code != 1 || !strings.Contains(stderr, tc.want) || !strings.Contains(stderr, "--tls") {
			t.Errorf("%s: exit %d\n%s\nwant %q", tc.name, code, stderr, tc.want)
		}
	}
	// The fitting flags work.
	if out, code := run(t, bin, tlsAddr, "health", "--tls-ca", p.CA); code != 0 || out != "SERVING\n" {
		t.Errorf("health over TLS: exit %d %q", code, out)
	}
	if out, code := run(t, bin, mtlsAddr, "health", "--tls-ca", p.CA, "--tls-cert", p.ClientCert, "--tls-key", p.ClientKey); code != 0 || out != "SERVING\n" {
		t.Errorf("health over mutual TLS: exit %d %q", code, out)
	}

	// HTTP: plain HTTP to the TLS listener is told to use https://; TLS
	// to the plaintext listener gets a plain-HTTP answer.
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + tlsHTTP + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(body), "use https://"+tlsHTTP+"/") {
		t.Errorf("http to the TLS listener: %d %q", resp.StatusCode, body)
	}
	tc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the server's certificate is not the point
	if _, err := tc.Get("https://" + plainHTTP + "/healthz"); err == nil || !strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		t.Errorf("https to the plaintext listener: %v", err)
	}
}
