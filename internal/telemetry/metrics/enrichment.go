package metrics

import "github.com/prometheus/client_golang/prometheus"

// EnrichmentStatus is what the service's enrichment worker reports: whether
// this replica leads (only the leader enriches), the cards waiting to be
// looked at, and the running totals.
type EnrichmentStatus struct {
	Leader                                 bool
	Backlog                                int
	Written, Unchanged, KeptPerson, Failed int64
	Calls, CacheHits                       int64
}

// WatchEnrichment exposes the enrichment worker's status at /metrics; status
// is read once per scrape. Call it once.
func (m *Metrics) WatchEnrichment(status func() EnrichmentStatus) {
	if m == nil {
		return
	}
	m.reg.MustRegister(&enrichmentCollector{status: status})
}

var (
	enrichLeader = prometheus.NewDesc("cardex_enrich_leader",
		"1 when this replica is the one that enriches cards (the others follow its writes), else 0.", nil, nil)
	enrichBacklog = prometheus.NewDesc("cardex_enrich_backlog_cards",
		"Changed cards the enrichment worker has yet to look at.", nil, nil)
	enrichCards = prometheus.NewDesc("cardex_enrich_cards_total",
		"Cards the enrichment worker finished, by outcome: written, unchanged, kept_person (a person's examples stayed) or failed.", []string{"outcome"}, nil)
	enrichCalls = prometheus.NewDesc("cardex_enrich_model_calls_total",
		"Answers of the chat model that writes search examples.", nil, nil)
	enrichHits = prometheus.NewDesc("cardex_enrich_cache_hits_total",
		"Search-example answers taken from the cache instead of the model.", nil, nil)
)

type enrichmentCollector struct{ status func() EnrichmentStatus }

func (c *enrichmentCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{enrichLeader, enrichBacklog, enrichCards, enrichCalls, enrichHits} {
		ch <- d
	}
}

func (c *enrichmentCollector) Collect(ch chan<- prometheus.Metric) {
	s := c.status()
	leader := 0.0
	if s.Leader {
		leader = 1
	}
	ch <- prometheus.MustNewConstMetric(enrichLeader, prometheus.GaugeValue, leader)
	ch <- prometheus.MustNewConstMetric(enrichBacklog, prometheus.GaugeValue, float64(s.Backlog))
	for outcome, n := range map[string]int64{"written": s.Written, "unchanged": s.Unchanged, "kept_person": s.KeptPerson, "failed": s.Failed} {
		ch <- prometheus.MustNewConstMetric(enrichCards, prometheus.CounterValue, float64(n), outcome)
	}
	ch <- prometheus.MustNewConstMetric(enrichCalls, prometheus.CounterValue, float64(s.Calls))
	ch <- prometheus.MustNewConstMetric(enrichHits, prometheus.CounterValue, float64(s.CacheHits))
}
