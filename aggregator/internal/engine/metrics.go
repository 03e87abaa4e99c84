package engine

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
)

// Metrics are the aggregator's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	catalogVersion prometheus.Gauge
	catalogItems   *prometheus.GaugeVec
	buildSeconds   prometheus.Histogram
	backendHealth  *prometheus.GaugeVec
	backendCalls   *prometheus.HistogramVec
	refused        *prometheus.CounterVec
	conflicts      *prometheus.CounterVec
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		catalogVersion: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_aggregator_catalog_version", Help: "Version of the published catalog snapshot (content-derived, equal on every replica with the same catalog), modulo 2^53 so that it is exact as a float.",
		}),
		catalogItems: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchboard_aggregator_catalog_items", Help: "Items in the published catalog snapshot, by kind.",
		}, []string{"kind"}),
		buildSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "switchboard_aggregator_catalog_build_seconds", Help: "Time to build a snapshot that changed, from the latest lists.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2, 12),
		}),
		backendHealth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchboard_aggregator_backend_health", Help: "1 for the backend's current health state, 0 for the others.",
		}, []string{"backend", "state"}),
		backendCalls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "switchboard_aggregator_backend_request_seconds", Help: "Routed backend requests by backend, method and outcome (ok, error, cancelled: by its caller).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}, []string{"backend", "method", "outcome"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_aggregator_catalog_refused_definitions_total",
			Help: "Listed definitions left out of the catalog because they cannot be read one way (reason duplicate_member: an object in them names a member twice; conflicting_ui: a tool's two UI members differ; invalid_name; too_deep; malformed), by backend, kind and reason; once per refused definition.",
		}, []string{"backend", "kind", "reason"}),
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_aggregator_catalog_conflicts_total",
			Help: "Names, URIs and URI templates that several backends claim, by kind and outcome (resolved: the conflict strategy gave it to one backend; unresolved: to none, so it is not listed, or a read of a URI that both match is refused); counted once per published catalog that holds the conflict, and once per catalog in which a read first meets two backends' overlapping resources or templates.",
		}, []string{"kind", "outcome"}),
	}
	reg.MustRegister(m.catalogVersion, m.catalogItems, m.buildSeconds, m.backendHealth, m.backendCalls, m.refused, m.conflicts)
	return m
}

func (m *Metrics) catalogBuilt(s *catalog.Snapshot, took time.Duration) {
	if m == nil {
		return
	}
	m.catalogVersion.Set(float64(s.Version & (1<<53 - 1)))
	for _, k := range catalog.Kinds {
		m.catalogItems.WithLabelValues(k.String()).Set(float64(s.Len(k)))
	}
	m.buildSeconds.Observe(took.Seconds())
}

// definitionRefused counts a listed definition the catalog screen refused
// (catalog.Screen).
func (m *Metrics) definitionRefused(backend string, k catalog.Kind, reason string) {
	if m == nil {
		return
	}
	m.refused.WithLabelValues(backend, k.String(), reason).Inc()
}

// conflict counts a conflict between backends (catalog.Conflict).
func (m *Metrics) conflict(c catalog.Conflict) {
	if m == nil {
		return
	}
	outcome := "resolved"
	if c.Winner == "" {
		outcome = "unresolved"
	}
	m.conflicts.WithLabelValues(c.Kind.String(), outcome).Inc()
}

// backendRemoved drops the series of a backend a reload removed: its
// health would otherwise stay as it last was (an unhealthy backend paging
// until the aggregator restarts), and its request series with it.
func (m *Metrics) backendRemoved(name string) {
	if m == nil {
		return
	}
	m.backendHealth.DeletePartialMatch(prometheus.Labels{"backend": name})
	m.backendCalls.DeletePartialMatch(prometheus.Labels{"backend": name})
}

func (m *Metrics) backendState(name string, s backend.State) {
	if m == nil {
		return
	}
	for _, st := range []backend.State{backend.Unknown, backend.Healthy, backend.Degraded, backend.Unhealthy} {
		v := 0.0
		if st == s {
			v = 1
		}
		m.backendHealth.WithLabelValues(name, st.String()).Set(v)
	}
}

func (m *Metrics) BackendRequest(name, method string, err error, took time.Duration) {
	if m == nil {
		return
	}
	outcome := "ok"
	switch {
	case errors.Is(err, context.Canceled):
		// Its caller gave up on it: no failure of the backend.
		outcome = "cancelled"
	case err != nil:
		outcome = "error"
	}
	m.backendCalls.WithLabelValues(name, method, outcome).Observe(took.Seconds())
}
