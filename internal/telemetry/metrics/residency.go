package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed0cff8200/cardex/retriever"
)

// ResidencyView is a view that may hold a subset of the tenants
// (retriever.Retriever).
type ResidencyView interface {
	Residency() (retriever.ResidencyStats, bool)
}

// WatchResidency exports what a view with tenant residency holds: resident
// tenants, cards and estimated bytes, the budget, and the loads and
// evictions so far. A view that holds every tenant exports nothing.
func (m *Metrics) WatchResidency(view ResidencyView) {
	if m == nil {
		return
	}
	if _, ok := view.Residency(); !ok {
		return
	}
	stat := func(f func(retriever.ResidencyStats) float64) func() float64 {
		return func() float64 {
			s, _ := view.Residency()
			return f(s)
		}
	}
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cardex_resident_tenants", Help: "Tenants this replica holds in memory (assigned, and loaded on demand)."},
			stat(func(s retriever.ResidencyStats) float64 { return float64(s.Tenants) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cardex_resident_cards", Help: "Active cards of the tenants this replica holds."},
			stat(func(s retriever.ResidencyStats) float64 { return float64(s.Cards) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cardex_resident_bytes", Help: "Estimated memory of the tenants this replica holds."},
			stat(func(s retriever.ResidencyStats) float64 { return float64(s.Bytes) })),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "cardex_resident_budget_bytes", Help: "The memory budget of tenants loaded on demand (--memory-budget); 0: none."},
			stat(func(s retriever.ResidencyStats) float64 { return float64(s.Budget) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cardex_tenant_loads_total", Help: "Tenants loaded on demand, at their first request."},
			stat(func(s retriever.ResidencyStats) float64 { return float64(s.Loads) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "cardex_tenant_evictions_total", Help: "Tenants dropped from memory past the budget."},
			stat(func(s retriever.ResidencyStats) float64 { return float64(s.Evictions) })),
	)
}

// TenantLoads returns a histogram of how long first requests waited for
// their tenant to load, to pass as retriever.Residency.OnLoad.
func (m *Metrics) TenantLoads() func(tenant string, cards int, took time.Duration) {
	if m == nil {
		return nil
	}
	h := prometheus.NewHistogram(prometheus.HistogramOpts{Name: "cardex_tenant_load_seconds",
		Help: "How long loading a tenant on demand took (its first request waited as long).", Buckets: latencyBuckets})
	m.reg.MustRegister(h)
	return func(_ string, _ int, took time.Duration) { h.Observe(took.Seconds()) }
}
