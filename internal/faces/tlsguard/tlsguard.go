// Package tlsguard answers an HTTP client that speaks the other protocol on
// a listener, instead of a bare error or a hang-up: plain HTTP on a TLS
// listener is told to use https://, and a TLS handshake on a plaintext
// listener gets a plain-HTTP answer (Go's client then reports "server gave
// HTTP response to HTTPS client", curl "wrong version number") while the
// server's log says which flags serve HTTPS. Each connection's first byte
// decides (a TLS record starts with 0x16); it is read by the connection's own
// goroutine, under its deadlines, never in Accept.
package tlsguard

import (
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// handshake is the first byte of a TLS handshake record.
const handshake = 0x16

// refusalTimeout bounds the write of the answer to a wrong-protocol client.
const refusalTimeout = 5 * time.Second

// Listener wraps l: with cfg, connections are served with TLS (as
// tls.NewListener does) and plain HTTP is answered with a 400 that says to
// use https://; without cfg, connections are served as they are and a TLS
// handshake is answered with a plain-HTTP 400 and logged.
func Listener(l net.Listener, cfg *tls.Config, log *slog.Logger) net.Listener {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &listener{Listener: l, cfg: cfg, log: log}
}

type listener struct {
	net.Listener
	cfg *tls.Config
	log *slog.Logger
}

func (l *listener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	s := &sniffed{Conn: c, wantTLS: l.cfg != nil, log: l.log}
	if l.cfg != nil {
		return tls.Server(s, l.cfg), nil
	}
	return s, nil
}

// sniffed is a connection whose first byte is checked before anything else
// reads it.
type sniffed struct {
	net.Conn
	wantTLS bool
	log     *slog.Logger

	mu      sync.Mutex
	checked bool
	pending []byte // the first byte, once checked, until read
}

func (s *sniffed) Read(p []byte) (int, error) {
	s.mu.Lock()
	if !s.checked {
		first := make([]byte, 1)
		if _, err := io.ReadFull(s.Conn, first); err != nil {
			s.mu.Unlock()
			return 0, err
		}
		s.checked = true
		if isTLS := first[0] == handshake; isTLS != s.wantTLS {
			s.mu.Unlock()
			s.refuse(isTLS)
			return 0, io.EOF
		}
		s.pending = first
	}
	if len(s.pending) > 0 && len(p) > 0 {
		n := copy(p, s.pending)
		s.pending = s.pending[n:]
		s.mu.Unlock()
		return n, nil
	}
	s.mu.Unlock()
	return s.Conn.Read(p)
}

// refuse answers a client of the other protocol in plain HTTP and hangs up.
func (s *sniffed) refuse(isTLS bool) {
	addr := s.LocalAddr().String()
	var msg string
	if isTLS {
		msg = fmt.Sprintf("This cardex server speaks plain HTTP on %s, not HTTPS: use http://%s/, or start it with --tls-cert and --tls-key to serve HTTPS.\n", addr, addr)
		s.log.Info("a TLS client connected to the plaintext HTTP listener: use http://, or start cardex serve with --tls-cert and --tls-key",
			"peer", s.RemoteAddr().String())
	} else {
		msg = fmt.Sprintf("This cardex server speaks HTTPS on %s (cardex serve --tls-cert): use https://%s/ (curl: --cacert CA.pem when a private CA signed its certificate).\n", addr, addr)
	}
	_ = s.SetWriteDeadline(time.Now().Add(refusalTimeout))
	fmt.Fprintf(s.Conn, "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(msg), msg)
	s.Conn.Close()
}
