package upstream

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/url"
	"syscall"
)

// Reason says why a connection to an upstream failed without the
// addresses, host names, URLs or commands the transport's error names: an
// agent (and the audit log it may be shown from) learns what went wrong,
// not the network behind cardex. Log the error itself for the operator.
func Reason(err error) string {
	var dns *net.DNSError
	var unknownCA x509.UnknownAuthorityError
	var hostname x509.HostnameError
	var invalid x509.CertificateInvalidError
	var verify *tls.CertificateVerificationError
	var record tls.RecordHeaderError
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return "the connection was reset"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "no route to the upstream"
	case errors.As(err, &dns):
		return "its host name does not resolve"
	case errors.As(err, &unknownCA), errors.As(err, &hostname), errors.As(err, &invalid), errors.As(err, &verify):
		return "its TLS certificate was not accepted"
	case errors.As(err, &record):
		return "it does not speak TLS"
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "the connection closed before the answer"
	case errors.As(err, &ne) && ne.Timeout():
		return "no answer in time"
	}
	return "could not connect, or the connection broke"
}

// transportFailure reports whether err is a failure of the connection (a
// network error, an HTTP client's, a connection closed early) rather than
// an answer of the upstream.
func transportFailure(err error) bool {
	var ue *url.Error
	var ne net.Error
	var op *net.OpError
	return errors.As(err, &ue) || errors.As(err, &op) || errors.As(err, &ne) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET)
}

// unreachable is a KindUnreachable error whose message names no address,
// logged whole for the operator.
func (r *Registry) unreachable(server string, err error) *CallError {
	r.log.Warn("upstream unreachable", "server", server, "err", err)
	return &CallError{Kind: KindUnreachable, Server: server, Err: errors.New(Reason(err))}
}
