package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/lifecycle"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// startAudit starts the indexer's audit trail; with audit.database.enabled
// it writes its own events straight into the table, which it returns for
// RecordAuditEvents and QueryAuditEvents (nil when off).
func startAudit(env lifecycle.Env, reg prometheus.Registerer, st store.AuditEvents) (*audit.Writer, store.AuditEvents, error) {
	if !env.Config.Audit.Database.Enabled {
		w, err := env.StartAudit(reg)
		return w, nil, err
	}
	w, err := env.StartAudit(reg, tableSink{st})
	return w, st, err
}

// tableSink writes the indexer's own events into the table.
type tableSink struct{ st store.AuditEvents }

func (tableSink) Name() string { return "database" }
func (t tableSink) Write(ctx context.Context, batch []audit.Event) error {
	return t.st.RecordAuditEvents(ctx, batch, store.AuditWriterLocal)
}
func (tableSink) Close() error { return nil }

// auditRetentionEvery is how often events older than audit.retention are
// deleted (by every replica: a second delete finds nothing).
const auditRetentionEvery = time.Hour

// deleteOldAuditEvents deletes the events older than retention now and
// every auditRetentionEvery until ctx ends.
func deleteOldAuditEvents(ctx context.Context, st store.AuditEvents, retention time.Duration, log *slog.Logger) {
	tick := time.NewTicker(auditRetentionEvery)
	defer tick.Stop()
	for {
		n, err := st.DeleteAuditEventsBefore(ctx, time.Now().Add(-retention))
		switch {
		case err != nil && ctx.Err() == nil:
			log.Warn("deleting audit events past audit.retention failed; retried within the hour", "err", err)
		case n > 0:
			log.Info("audit events past audit.retention deleted", "deleted", n, "retention", retention.String())
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
