package tlsguard_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed0cff8200/cardex/internal/access/auth"
	"github.com/seed0cff8200/cardex/internal/faces/tlsguard"
	"github.com/seed0cff8200/cardex/internal/testkit/testpki"
)

// serve runs a real http.Server on a guarded listener (TLS with cfg) and
// returns its address and its log.
func serve(t *testing.T, cfg *tls.Config) (string, *syncBuffer) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	logs := &syncBuffer{}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello")
	})}
	go srv.Serve(tlsguard.Listener(lis, cfg, slog.New(slog.NewTextHandler(logs, nil))))
	t.Cleanup(func() { srv.Close() })
	return lis.Addr().String(), logs
}

// syncBuffer is a log written by the server and read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (w *syncBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func get(t *testing.T, c *http.Client, url string) (int, string, error) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

func TestWrongProtocol(t *testing.T) {
	p := testpki.New(t)
	cfg, err := auth.ServerTLS(p.ServerCert, p.ServerKey, "")
	if err != nil {
		t.Fatal(err)
	}
	pem, err := os.ReadFile(p.CA)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	tlsClient := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	plain := &http.Client{Timeout: 5 * time.Second}

	// A TLS listener: HTTPS is served; plain HTTP is told to use https://.
	addr, _ := serve(t, cfg)
	if code, body, err := get(t, tlsClient, "https://"+addr+"/"); err != nil || code != 200 || body != "hello" {
		t.Errorf("https: %d %q %v", code, body, err)
	}
	code, body, err := get(t, plain, "http://"+addr+"/")
	if err != nil || code != 400 || !strings.Contains(body, "use https://"+addr+"/") || !strings.Contains(body, "--tls-cert") {
		t.Errorf("http to a TLS listener: %d %q %v", code, body, err)
	}

	// A plaintext listener: HTTP is served; a TLS client gets a plain-HTTP
	// answer its library reports, and the server log names the flags.
	addr, logs := serve(t, nil)
	if code, body, err := get(t, plain, "http://"+addr+"/"); err != nil || code != 200 || body != "hello" {
		t.Errorf("http: %d %q %v", code, body, err)
	}
	if _, _, err := get(t, tlsClient, "https://"+addr+"/"); err == nil || !strings.Contains(err.Error(), "server gave HTTP response to HTTPS client") {
		t.Errorf("https to a plaintext listener: %v", err)
	}
	deadline := time.Now().Add(2 * time.Second)
	for !strings.Contains(logs.String(), "--tls-cert and --tls-key") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "a TLS client connected to the plaintext HTTP listener") {
		t.Errorf("log: %s", logs.String())
	}
}
