package pinning

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the guard's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	quarantinedTools *prometheus.GaugeVec
	quarantines      *prometheus.CounterVec
	warnings         *prometheus.CounterVec
}

// NewMetrics registers the metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		quarantinedTools: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "switchboard_aggregator_pinning_quarantined_tools",
			Help: "Tools of the backend held back in pin mode: their definition is not the approved one, or was not verified yet.",
		}, []string{"backend"}),
		quarantines: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_aggregator_pinning_quarantines_total",
			Help: "Tool definitions found changed since approved and quarantined (pin mode), by backend.",
		}, []string{"backend"}),
		warnings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_aggregator_pinning_warnings_total",
			Help: "Tool definitions found changed since approved and still listed (warn mode), by backend.",
		}, []string{"backend"}),
	}
	reg.MustRegister(m.quarantinedTools, m.quarantines, m.warnings)
	return m
}

func (m *Metrics) quarantined(backend string, n int) {
	if m != nil {
		m.quarantinedTools.WithLabelValues(backend).Set(float64(n))
	}
}

func (m *Metrics) quarantine(backend string) {
	if m != nil {
		m.quarantines.WithLabelValues(backend).Inc()
	}
}

func (m *Metrics) warning(backend string) {
	if m != nil {
		m.warnings.WithLabelValues(backend).Inc()
	}
}

// forget drops the series of a backend a reload removed.
func (m *Metrics) forget(backend string) {
	if m != nil {
		m.quarantinedTools.DeleteLabelValues(backend)
		m.quarantines.DeleteLabelValues(backend)
		m.warnings.DeleteLabelValues(backend)
	}
}
