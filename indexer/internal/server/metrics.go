package server

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the indexer's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	searchSeconds *prometheus.HistogramVec
	scopeBuilds   prometheus.Counter
	ready         prometheus.Gauge
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		searchSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "switchboard_indexer_search_seconds", Help: "Search RPCs by outcome (ok or the gRPC code).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
		}, []string{"outcome"}),
		scopeBuilds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "switchboard_indexer_scope_builds_total", Help: "Scopes this replica built.",
		}),
		ready: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_indexer_ready", Help: "1 once the schema is migrated and searches are served.",
		}),
	}
	reg.MustRegister(m.searchSeconds, m.scopeBuilds, m.ready)
	return m
}

func (m *Metrics) searched(outcome string, took time.Duration) {
	if m != nil {
		m.searchSeconds.WithLabelValues(outcome).Observe(took.Seconds())
	}
}

func (m *Metrics) scopeBuilt() {
	if m != nil {
		m.scopeBuilds.Inc()
	}
}

func (m *Metrics) setReady() {
	if m != nil {
		m.ready.Set(1)
	}
}
