package lifecycle

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
)

// Reloader is what a service reloads its configuration with: the same
// validation it starts with, and the function that puts a new
// configuration in force (see config.WatchOptions).
type Reloader struct {
	Validate func(*config.Config) error
	Apply    func(*config.Config) error
	// Related names the files besides the configuration file that Apply
	// reads (config.WatchOptions.Related); nil for none.
	Related func(*config.Config) []string
	// Audit records every reload attempt (a config_reload event: ok or
	// rejected, with the reason); nil: none.
	Audit *audit.Writer
}

// ReloadMetrics count a service's configuration reloads:
//
//	switchboard_config_reloads_total{result="ok"|"rejected"}
//	switchboard_config_last_reload_success_timestamp_seconds
//
// The timestamp is that of the start's load until a reload succeeds.
type ReloadMetrics struct {
	reloads     *prometheus.CounterVec
	lastSuccess prometheus.Gauge
}

// NewReloadMetrics registers the reload metrics with reg (nil: not
// exported).
func NewReloadMetrics(reg prometheus.Registerer) *ReloadMetrics {
	m := &ReloadMetrics{
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_config_reloads_total",
			Help: "Configuration reloads, by result: ok (in force) or rejected (the configuration in force was kept).",
		}, []string{"result"}),
		lastSuccess: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "switchboard_config_last_reload_success_timestamp_seconds",
			Help: "When the configuration in force was loaded (at start, or by the last successful reload), in Unix seconds.",
		}),
	}
	// Both results exist from the start, so a rate or an alert on
	// rejections needs no first rejection to be defined.
	m.reloads.WithLabelValues("ok")
	m.reloads.WithLabelValues("rejected")
	m.lastSuccess.SetToCurrentTime()
	if reg != nil {
		reg.MustRegister(m.reloads, m.lastSuccess)
	}
	return m
}

// Observe records one reload attempt.
func (m *ReloadMetrics) Observe(ok bool, at time.Time) {
	if ok {
		m.reloads.WithLabelValues("ok").Inc()
		m.lastSuccess.Set(float64(at.UnixNano()) / 1e9)
		return
	}
	m.reloads.WithLabelValues("rejected").Inc()
}

// WatchConfig reloads the service's configuration until ctx ends: when the
// content of the configuration file (or of a file r.Related names)
// changes, checked every reload.interval, and at once on SIGHUP. It
// registers the reload metrics with reg. An Env made in code has no file,
// and WatchConfig returns at once.
func (env Env) WatchConfig(ctx context.Context, reg prometheus.Registerer, r Reloader) {
	if env.ConfigPath == "" {
		return
	}
	metrics := NewReloadMetrics(reg)
	config.Watch(ctx, config.WatchOptions{
		Path:     env.ConfigPath,
		Current:  env.Config,
		Loaded:   env.configRaw,
		Validate: r.Validate,
		Apply:    r.Apply,
		Related:  r.Related,
		Trigger:  env.hangup,
		Result:   metrics.Observe,
		Outcome:  func(err error, forced bool) { RecordReload(r.Audit, env.ConfigPath, err, forced) },
		Log:      env.Log,
	})
}

// maxReloadDetail bounds the reason a config_reload event carries.
const maxReloadDetail = 1024

// RecordReload records one reload attempt of the file at path in w: ok,
// or rejected with err's text (which names keys, never values).
func RecordReload(w *audit.Writer, path string, err error, forced bool) {
	if w == nil {
		return
	}
	e := audit.Event{Kind: audit.KindConfigReload, Outcome: audit.OutcomeOK, Resource: path}
	if forced {
		e.Detail = "SIGHUP"
	}
	if err != nil {
		e.Outcome = audit.OutcomeRejected
		e.Detail = strings.ReplaceAll(err.Error(), "\n", "; ")
		if len(e.Detail) > maxReloadDetail {
			e.Detail = e.Detail[:maxReloadDetail]
		}
	}
	w.Record(e)
}

// StartAudit starts the service's audit trail as the configuration's
// audit section says, with its metrics in reg and sinks added to the
// configured one; nil when nothing is recorded. Close it when the service
// stops.
func (env Env) StartAudit(reg prometheus.Registerer, sinks ...audit.Sink) (*audit.Writer, error) {
	// Events name the service as gateway, aggregator or indexer, not as
	// its binary.
	service := strings.TrimPrefix(env.Service, "switchboard-")
	w, err := audit.New(audit.Options{Service: service, Config: env.Config.Audit, Sinks: sinks, Log: env.Log, Metrics: audit.NewMetrics(reg)})
	if err != nil {
		return nil, err
	}
	if w != nil {
		env.Log.Info("audit trail", "sink", env.Config.Audit.EffectiveSink(), "database", env.Config.Audit.Database.Enabled, "arguments", env.Config.Audit.EffectiveArguments())
	}
	return w, nil
}
