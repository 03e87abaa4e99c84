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
	auditRefused  *prometheus.CounterVec
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
		auditRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_indexer_audit_events_refused_total",
			Help: "Audit events RecordAuditEvents refused, every event of a batch holding one its credential may not write, by credential and the first such event's reason (credential, service, kind, subject).",
		}, []string{"credential", "reason"}),
	}
	reg.MustRegister(m.searchSeconds, m.scopeBuilds, m.ready, m.auditRefused)
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

func (m *Metrics) auditEventsRefused(credential, reason string, n int) {
	if m != nil {
		m.auditRefused.WithLabelValues(credential, reason).Add(float64(n))
	}
}
