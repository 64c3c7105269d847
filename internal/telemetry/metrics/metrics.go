// Package metrics holds the Prometheus series of a cardex server in a
// registry of its own: discovery latency per leg, candidate-set and
// shortlist sizes, the false-negative signals per tenant (low confidence,
// abstentions, reported and implicit misses), degraded answers, catalogue
// sizes and replica lag, and gRPC requests by method and code. A *Metrics is
// passed explicitly to what records into it; every method of a nil *Metrics
// does nothing.
package metrics

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/seed0cff8200/cardex/retriever"
)

// DefaultMaxTenants is how many tenants get series of their own by default;
// MaxTenantsLimit is the most that Options.MaxTenants may ask for (each
// labelled tenant adds six series).
const (
	DefaultMaxTenants = 100
	MaxTenantsLimit   = 10_000
)

// OtherTenant is the tenant label of every tenant past the first
// MaxTenants. It cannot be a tenant's name (names never hold parentheses).
const OtherTenant = "(other)"

// Options configure New.
type Options struct {
	// MaxTenants bounds the tenant label: the first MaxTenants tenants
	// that get a discovery with a non-empty candidate set have series of
	// their own, in that order; every other tenant is counted under
	// OtherTenant. A tenant name a caller merely sends (one without cards
	// it may use) never takes a label. 0 means DefaultMaxTenants; a
	// negative value puts every tenant under OtherTenant; more than
	// MaxTenantsLimit is MaxTenantsLimit.
	MaxTenants int
}

// Metrics is safe for concurrent use.
type Metrics struct {
	reg        *prometheus.Registry
	maxTenants int

	mu      sync.Mutex
	tenants map[string]bool // tenants with a label of their own

	discoveries    *prometheus.CounterVec
	lowConfidence  *prometheus.CounterVec
	abstained      *prometheus.CounterVec
	outcomes       *prometheus.CounterVec
	implicitMisses *prometheus.CounterVec
	degraded       prometheus.Counter
	duration       prometheus.Histogram
	legs           *prometheus.HistogramVec
	candidates     prometheus.Histogram
	shortlist      prometheus.Histogram
	requests       *prometheus.CounterVec
	requestTime    *prometheus.HistogramVec

	cards, servers         prometheus.Gauge
	viewSeq, storeSeq, lag prometheus.Gauge
	storeSeqErrors, syncs  prometheus.Counter
}

// latencyBuckets span 100 µs to 10 s.
var latencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

// Legs are the leg label values of cardex_discovery_leg_duration_seconds,
// the fields of retriever.Timings.
var Legs = []string{"embed", "authorize", "lexical", "semantic", "fuse", "hydrate"}

// New returns metrics registered in a new registry, with the Go runtime and
// process collectors beside them.
func New(opts Options) *Metrics {
	max := opts.MaxTenants
	switch {
	case max == 0:
		max = DefaultMaxTenants
	case max < 0:
		max = 0
	case max > MaxTenantsLimit:
		max = MaxTenantsLimit
	}
	m := &Metrics{reg: prometheus.NewRegistry(), maxTenants: max, tenants: map[string]bool{}}
	f := func(c prometheus.Collector) { m.reg.MustRegister(c) }
	tenant := []string{"tenant"}

	m.discoveries = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cardex_discoveries_total",
		Help: "DiscoverTools answers, per tenant."}, tenant)
	m.lowConfidence = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cardex_discovery_low_confidence_total",
		Help: "DiscoverTools answers whose best match was weak (logged as a suspected miss), per tenant."}, tenant)
	m.abstained = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cardex_discovery_abstained_total",
		Help: "DiscoverTools answers that held no ranked tool because none reached the minimum confidence, per tenant."}, tenant)
	m.outcomes = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cardex_outcomes_total",
		Help: "Outcomes reported with ReportOutcome, per tenant: outcome is hit (the tool used was in the shortlist), miss (it was not) or none_fit."},
		[]string{"tenant", "outcome"})
	m.implicitMisses = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cardex_implicit_misses_total",
		Help: "Tools described or authorized that no recent shortlist of the session held, per tenant."}, tenant)
	m.degraded = prometheus.NewCounter(prometheus.CounterOpts{Name: "cardex_discovery_degraded_total",
		Help: "DiscoverTools answers given without the semantic leg (embedder or vector store unavailable)."})
	m.duration = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cardex_discovery_duration_seconds",
		Help: "Time to answer a DiscoverTools call, in the handler.", Buckets: latencyBuckets})
	m.legs = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "cardex_discovery_leg_duration_seconds",
		Help: "Time a DiscoverTools answer spent in each leg of the pipeline (summed over its ranked lists).", Buckets: latencyBuckets},
		[]string{"leg"})
	m.candidates = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cardex_discovery_candidates",
		Help: "Size of the caller's candidate set (authorized active cards) per DiscoverTools answer.", Buckets: prometheus.ExponentialBuckets(1, 4, 11)})
	m.shortlist = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cardex_discovery_shortlist_tools",
		Help: "Tools returned per DiscoverTools answer, pins included.", Buckets: []float64{0, 1, 2, 3, 5, 8, 10, 15, 20, 30, 50}})
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "cardex_grpc_requests_total",
		Help: "Unary gRPC requests by full method and status code."}, []string{"method", "code"})
	m.requestTime = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "cardex_grpc_request_duration_seconds",
		Help: "Time to answer a unary gRPC request, by full method.", Buckets: latencyBuckets}, []string{"method"})

	m.cards = prometheus.NewGauge(prometheus.GaugeOpts{Name: "cardex_catalog_active_cards",
		Help: "Active cards in this replica's view (what the lexical and vector indexes hold)."})
	m.servers = prometheus.NewGauge(prometheus.GaugeOpts{Name: "cardex_catalog_server_entries",
		Help: "Server entries in the store (followed through its change sequence)."})
	m.viewSeq = prometheus.NewGauge(prometheus.GaugeOpts{Name: "cardex_view_sequence",
		Help: "The store change sequence this replica's view reflects."})
	m.storeSeq = prometheus.NewGauge(prometheus.GaugeOpts{Name: "cardex_store_sequence",
		Help: "The store's change sequence, as last read."})
	m.lag = prometheus.NewGauge(prometheus.GaugeOpts{Name: "cardex_replica_lag_changes",
		Help: "Changes in the store that this replica's view does not reflect yet (store sequence - view sequence)."})
	m.storeSeqErrors = prometheus.NewCounter(prometheus.CounterOpts{Name: "cardex_store_sequence_errors_total",
		Help: "Failed reads of the store's change sequence (the lag gauge keeps its last value)."})
	m.syncs = prometheus.NewCounter(prometheus.CounterOpts{Name: "cardex_catalog_gauge_updates_total",
		Help: "Updates of the catalogue gauges (at every change of the view and every poll)."})

	for _, c := range []prometheus.Collector{m.discoveries, m.lowConfidence, m.abstained, m.outcomes, m.implicitMisses,
		m.degraded, m.duration, m.legs, m.candidates, m.shortlist, m.requests, m.requestTime,
		m.cards, m.servers, m.viewSeq, m.storeSeq, m.lag, m.storeSeqErrors, m.syncs} {
		f(c)
	}
	f(collectors.NewGoCollector())
	f(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	if m == nil {
		return http.NotFoundHandler()
	}
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// tenantLabel is the tenant's label value. admit lets a tenant not labelled
// yet take one of the free labels.
func (m *Metrics) tenantLabel(tenant string, admit bool) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.tenants[tenant] {
		return tenant
	}
	if admit && len(m.tenants) < m.maxTenants {
		m.tenants[tenant] = true
		return tenant
	}
	return OtherTenant
}

// Discovery records one DiscoverTools answer of tenant that took took.
func (m *Metrics) Discovery(tenant string, res *retriever.Result, took time.Duration) {
	if m == nil {
		return
	}
	t := m.tenantLabel(tenant, res.CandidateCount > 0)
	m.discoveries.WithLabelValues(t).Inc()
	if res.LowConfidence {
		m.lowConfidence.WithLabelValues(t).Inc()
	}
	if res.Abstained {
		m.abstained.WithLabelValues(t).Inc()
	}
	if res.Degraded {
		m.degraded.Inc()
	}
	m.duration.Observe(took.Seconds())
	tm := res.Timings
	for i, d := range []time.Duration{tm.Embed, tm.Authorize, tm.Lexical, tm.Semantic, tm.Fuse, tm.Hydrate} {
		m.legs.WithLabelValues(Legs[i]).Observe(d.Seconds())
	}
	m.candidates.Observe(float64(res.CandidateCount))
	m.shortlist.Observe(float64(len(res.Tools)))
}

// Outcome records a reported outcome: miss says the tool used was not in
// the shortlist, noneFit that no tool fit (also a miss).
func (m *Metrics) Outcome(tenant string, miss, noneFit bool) {
	if m == nil {
		return
	}
	o := "hit"
	switch {
	case noneFit:
		o = "none_fit"
	case miss:
		o = "miss"
	}
	m.outcomes.WithLabelValues(m.tenantLabel(tenant, false), o).Inc()
}

// ImplicitMiss records a tool described or authorized that no recent
// shortlist of the session held.
func (m *Metrics) ImplicitMiss(tenant string) {
	if m == nil {
		return
	}
	m.implicitMisses.WithLabelValues(m.tenantLabel(tenant, false)).Inc()
}

// UnaryInterceptor counts every unary request by method and code and times
// it. Put it first in the chain, so that refusals by later interceptors are
// counted too.
func (m *Metrics) UnaryInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
		if m == nil {
			return next(ctx, req)
		}
		start := time.Now()
		resp, err := next(ctx, req)
		m.requests.WithLabelValues(info.FullMethod, status.Code(err).String()).Inc()
		m.requestTime.WithLabelValues(info.FullMethod).Observe(time.Since(start).Seconds())
		return resp, err
	}
}

// DiscoveryLogDropped exposes the discovery log's dropped entries
// (discoverylog.Log.Dropped) as cardex_discovery_log_dropped_total. Call
// once; a nil Metrics ignores it.
func (m *Metrics) DiscoveryLogDropped(dropped func() uint64) {
	if m == nil {
		return
	}
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cardex_discovery_log_dropped_total",
		Help: "Discovery log entries dropped because the log's writer queue was full."},
		func() float64 { return float64(dropped()) }))
}
