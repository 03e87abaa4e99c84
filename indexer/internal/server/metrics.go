package server

import (
	"context"
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
	databaseUp    prometheus.Gauge
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
		databaseUp: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_indexer_database_up", Help: "1 while PostgreSQL answers the indexer's ping (every 10 s), 0 while it does not.",
		}),
		auditRefused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_indexer_audit_events_refused_total",
			Help: "Audit events RecordAuditEvents refused, every event of a batch holding one its credential may not write, by credential and the first such event's reason (credential, service, kind, subject).",
		}, []string{"credential", "reason"}),
	}
	reg.MustRegister(m.searchSeconds, m.scopeBuilds, m.ready, m.auditRefused, m.databaseUp)
	return m
}

// Pinger is the store's connection check.
type Pinger interface {
	Ping(ctx context.Context) error
}

// Ping timing: how often the database is checked, and how long an answer
// may take.
const (
	DatabasePingEvery   = 10 * time.Second
	databasePingTimeout = 2 * time.Second
)

// WatchDatabase pings db every so often until ctx ends, keeping
// switchboard_indexer_database_up: readiness says the schema was migrated
// once, this says whether PostgreSQL answers now (an alert's input).
func (m *Metrics) WatchDatabase(ctx context.Context, db Pinger, every time.Duration) {
	if m == nil {
		return
	}
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, databasePingTimeout)
		err := db.Ping(pctx)
		cancel()
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			m.databaseUp.Set(0)
		} else {
			m.databaseUp.Set(1)
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
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
