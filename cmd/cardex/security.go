package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/seed0cff8200/cardex/internal/access/auth"
	"github.com/seed0cff8200/cardex/internal/access/ratelimit"
)

// securityFlags are serve's authentication, TLS and abuse-limit flags.
type securityFlags struct {
	serviceTokens                string
	serviceTokensDB              bool
	insecure                     bool
	tlsCert, tlsKey, tlsClientCA string
	jwks, jwtIssuer, jwtAudience string
	jwtTenantClaim               string
	rate, tenantRate, credRate   float64
	inFlight, maxStreams         int
	rpcTimeout                   time.Duration
}

func (s *securityFlags) register(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&s.serviceTokens, "service-tokens", os.Getenv("CARDEX_SERVICE_TOKENS"),
		"service token file: hashed tokens with a role (discover, catalog, admin) and optionally a bound caller (env CARDEX_SERVICE_TOKENS)")
	f.BoolVar(&s.serviceTokensDB, "service-tokens-db", false,
		"postgres: also accept the service tokens of the database's service_tokens table (cardex token new --database-url adds to it), re-read every 30 s; every service then needs a credential")
	f.BoolVar(&s.insecure, "insecure", false,
		"listen on a non-loopback address although a service accepts calls without a credential (warns at start and in health checks)")
	f.StringVar(&s.tlsCert, "tls-cert", os.Getenv("CARDEX_TLS_CERT"), "server certificate (PEM) for the gRPC and HTTP listeners (env CARDEX_TLS_CERT)")
	f.StringVar(&s.tlsKey, "tls-key", os.Getenv("CARDEX_TLS_KEY"), "private key (PEM) of --tls-cert (env CARDEX_TLS_KEY)")
	f.StringVar(&s.tlsClientCA, "tls-client-ca", os.Getenv("CARDEX_TLS_CLIENT_CA"),
		"mutual TLS: CA certificate(s) (PEM) that clients' certificates must chain to (env CARDEX_TLS_CLIENT_CA)")
	f.StringVar(&s.jwks, "jwt-jwks", os.Getenv("CARDEX_JWT_JWKS"),
		"take DiscoveryService callers from JWTs verified with this JWKS (file, or https URL) (env CARDEX_JWT_JWKS)")
	f.StringVar(&s.jwtIssuer, "jwt-issuer", os.Getenv("CARDEX_JWT_ISSUER"), "the iss a JWT must carry (env CARDEX_JWT_ISSUER)")
	f.StringVar(&s.jwtAudience, "jwt-audience", os.Getenv("CARDEX_JWT_AUDIENCE"), "the aud a JWT must carry (env CARDEX_JWT_AUDIENCE)")
	f.StringVar(&s.jwtTenantClaim, "jwt-tenant-claim", "tenant", "the JWT claim that holds the caller's tenant")
	f.Float64Var(&s.rate, "rate-limit", 50, "calls per second per caller (AuthorizeCall, CallTool, ReportOutcome, catalog calls); discovery and describe get twice as many; 0: no limit")
	f.Float64Var(&s.tenantRate, "tenant-rate-limit", 500, "calls per second per tenant, all its callers together (discovery twice as many); 0: no limit")
	f.Float64Var(&s.credRate, "credential-rate-limit", 500, "calls per second per unbound service token, whatever callers it names (discovery twice as many); 0: no limit")
	f.IntVar(&s.inFlight, "max-in-flight", 32, "calls one caller may have in progress at once; 0: no limit")
	f.IntVar(&s.maxStreams, "max-streams", 100, "concurrent gRPC streams per client connection")
	f.DurationVar(&s.rpcTimeout, "rpc-timeout", 30*time.Second, "server-side deadline of every gRPC call but CallTool (bounded by its upstream's timeout); 0: none")
}

// security is what the flags build.
type security struct {
	auth    *auth.Authenticator
	tls     *tls.Config // nil: plaintext
	mtls    bool
	limiter *ratelimit.Limiter
	opts    []grpc.ServerOption
}

// build loads the token file, the JWKS and the TLS files. catalogToken is
// the legacy --catalog-token-file / CARDEX_CATALOG_TOKEN token.
func (s *securityFlags) build(ctx context.Context, log *slog.Logger, catalogToken string) (*security, error) {
	sec := &security{auth: &auth.Authenticator{Tokens: &auth.Tokens{}}}
	if s.serviceTokens != "" {
		t, err := auth.LoadTokens(s.serviceTokens)
		if err != nil {
			return nil, fmt.Errorf("--service-tokens: %w", err)
		}
		sec.auth.Tokens = t
		if u := t.Unbound(); len(u) > 0 {
			log.Info("discover tokens without a bound caller take tenant, subject and scopes from the request", "tokens", strings.Join(u, ","))
		}
	}
	if catalogToken != "" {
		sec.auth.Tokens.AddToken("catalog-token", auth.RoleCatalog, catalogToken)
	}
	if s.jwks != "" {
		v, err := auth.NewJWTVerifier(ctx, auth.JWTConfig{JWKS: s.jwks, Issuer: s.jwtIssuer, Audience: s.jwtAudience,
			TenantClaim: s.jwtTenantClaim, Logger: log})
		if err != nil {
			return nil, err
		}
		sec.auth.JWT = v
	} else if s.jwtIssuer != "" || s.jwtAudience != "" {
		return nil, fmt.Errorf("--jwt-issuer and --jwt-audience need --jwt-jwks")
	}
	if s.tlsCert != "" || s.tlsKey != "" || s.tlsClientCA != "" {
		cfg, err := auth.ServerTLS(s.tlsCert, s.tlsKey, s.tlsClientCA)
		if err != nil {
			return nil, err
		}
		sec.tls, sec.mtls = cfg, s.tlsClientCA != ""
		sec.opts = append(sec.opts, grpc.Creds(credentials.NewTLS(cfg)))
	}
	if s.maxStreams > 0 {
		sec.opts = append(sec.opts, grpc.MaxConcurrentStreams(uint32(s.maxStreams)))
	}
	sec.limiter = ratelimit.New(ratelimit.Config{CallRate: s.rate, TenantRate: s.tenantRate, CredentialRate: s.credRate, InFlight: s.inFlight})
	return sec, nil
}

// check decides whether the listeners may be where they are: a service
// that takes calls without a credential (no token of its role, no JWT, no
// client certificates) may listen on loopback only, unless --insecure. It
// returns the warnings to log and to put into health checks. The web
// console on the HTTP listener (webConsole) opens what the services open.
func (s *security) check(grpcAddr net.Addr, httpAddr string, anonymousAgents, webConsole, httpJSON, insecure bool, log *slog.Logger) ([]string, error) {
	var open []string
	if !s.mtls {
		if s.auth.Open(auth.RoleDiscover) {
			open = append(open, "DiscoveryService")
		}
		if s.auth.Open(auth.RoleCatalog) {
			open = append(open, "CatalogService")
		}
		if anonymousAgents {
			open = append(open, "ExecutionService and /mcp (anonymous agent access)")
		}
	}
	var warnings []string
	exposed := func(what, addr string, openHere []string) error {
		if loopback(addr) {
			return nil
		}
		if s.tls == nil {
			warnings = append(warnings, fmt.Sprintf("%s listens on %s without TLS: credentials and answers cross the network in clear (--tls-cert, --tls-key)", what, addr))
		}
		if len(openHere) == 0 {
			return nil
		}
		msg := fmt.Sprintf("%s accept calls without a credential on %s: anyone who can reach it may claim any tenant and scopes, or rewrite the catalogue", strings.Join(openHere, ", "), addr)
		if !insecure {
			return fmt.Errorf("refusing to listen: %s. Give --service-tokens FILE (`cardex token new` makes tokens), --jwt-jwks, or --tls-client-ca; or listen on a loopback address (127.0.0.1); --insecure starts anyway", msg)
		}
		warnings = append(warnings, "insecure (--insecure): "+msg)
		return nil
	}
	if err := exposed("gRPC", grpcAddr.String(), open); err != nil {
		return nil, err
	}
	if httpAddr != "" {
		var openHTTP []string
		if anonymousAgents && !s.mtls {
			openHTTP = []string{"/mcp (anonymous agent access)"}
			if httpJSON {
				openHTTP = append(openHTTP, "ExecutionService over HTTP/JSON (anonymous agent access)")
			}
		}
		if httpJSON {
			// Every open service is open on the HTTP listener too.
			for _, svc := range open {
				if strings.HasSuffix(svc, "Service") { // ExecutionService is listed with /mcp
					openHTTP = append(openHTTP, svc+" over HTTP/JSON")
				}
			}
		}
		if webConsole && !s.mtls {
			for _, svc := range open {
				if strings.HasSuffix(svc, "Service") {
					openHTTP = append(openHTTP, "/console/ (as "+svc+")")
				}
			}
		}
		if err := exposed("HTTP", httpAddr, openHTTP); err != nil {
			return nil, err
		}
	}
	if len(open) > 0 && loopback(grpcAddr.String()) {
		log.Info("listening on loopback only: these accept calls without a credential", "services", strings.Join(open, ", "))
	}
	for _, w := range warnings {
		log.Warn(w)
	}
	return warnings, nil
}

// loopback reports whether a listener's address is a loopback one.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// openDB adds the database's service tokens (--service-tokens-db) once the
// store is open, and keeps them current.
func (s *securityFlags) openDB(ctx context.Context, sec *security, sf *storeFlags, log *slog.Logger) error {
	if !s.serviceTokensDB {
		return nil
	}
	if sf.pg == nil {
		return fmt.Errorf("--service-tokens-db needs --store postgres")
	}
	db, err := auth.NewDBTokens(ctx, sf.pg.Pool(), sf.pg.Schema())
	if err != nil {
		return fmt.Errorf("--service-tokens-db: %w", err)
	}
	sec.auth.DB = db
	log.Info("service tokens from the database", "tokens", db.Tokens().Len(), "refresh", auth.DBRefresh)
	go db.Follow(ctx, log)
	return nil
}
