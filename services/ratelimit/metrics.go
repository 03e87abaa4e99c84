package ratelimit

import "github.com/prometheus/client_golang/prometheus"

// Metrics counts a limiter's decisions. A nil *Metrics counts nothing.
type Metrics struct {
	decisions   *prometheus.CounterVec
	leases      *prometheus.CounterVec
	unreachable *prometheus.CounterVec
}

// NewMetrics registers the metrics of a service's limiter on reg, named
// switchboard_<service>_ratelimit_*.
func NewMetrics(reg prometheus.Registerer, service string) *Metrics {
	prefix := "switchboard_" + service + "_ratelimit_"
	m := &Metrics{
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "requests_total", Help: "Requests a rate limit counted, by limit and outcome (allowed, refused).",
		}, []string{"limit", "outcome"}),
		leases: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "lease_acquisitions_total", Help: "Acquisitions of tokens from the shared buckets (one call, any number of keys), by outcome (ok, error).",
		}, []string{"outcome"}),
		unreachable: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: prefix + "unavailable_total", Help: "Requests decided without the shared buckets, which could not be reached, by decision (open: admitted, closed: refused).",
		}, []string{"decision"}),
	}
	if reg != nil {
		reg.MustRegister(m.decisions, m.leases, m.unreachable)
	}
	return m
}

func (m *Metrics) allowed(limit string) {
	if m != nil {
		m.decisions.WithLabelValues(limit, "allowed").Inc()
	}
}

func (m *Metrics) refused(limit string) {
	if m != nil {
		m.decisions.WithLabelValues(limit, "refused").Inc()
	}
}

func (m *Metrics) leased(ok bool) {
	if m != nil {
		m.leases.WithLabelValues(map[bool]string{true: "ok", false: "error"}[ok]).Inc()
	}
}

func (m *Metrics) unavailable(open bool) {
	if m != nil {
		m.unreachable.WithLabelValues(map[bool]string{true: "open", false: "closed"}[open]).Inc()
	}
}
