package config

import (
	"errors"
	"fmt"
	"path"
	"time"
)

// Audit sinks (audit.sink).
const (
	// AuditOff writes no JSON lines (the default); the PostgreSQL table
	// (audit.database) is independent of it.
	AuditOff = "off"
	// AuditStdout writes one JSON line per event on the process's
	// standard output (its logs go to standard error).
	AuditStdout = "stdout"
	// AuditFile appends one JSON line per event to audit.file.
	AuditFile = "file"
)

// Argument recording (audit.arguments).
const (
	// AuditDigest records the SHA-256 of the arguments' canonical JSON
	// only (the default).
	AuditDigest = "digest"
	// AuditValues records the arguments too, with every member whose name
	// matches audit.redactKeys replaced by "[redacted]".
	AuditValues = "values"
)

// Defaults of the audit section.
const (
	DefaultAuditQueueSize = 8192
	DefaultAuditRetention = Duration(30 * 24 * time.Hour)
	// MaxAuditQueueSize bounds the memory a queue can hold.
	MaxAuditQueueSize = 1 << 20
)

// DefaultAuditRedactKeys are the argument names whose values are never
// recorded, even with audit.arguments: values. Names are also matched
// without their "-", "_", "." and spaces (audit.Redactor), so *apikey*
// covers api_key, api-key and X-Api-Key. A guess at what names carry
// secrets, never a guarantee: "auth" and names ending in it are, author
// is not.
var DefaultAuditRedactKeys = []string{"*password*", "*passwd*", "*passphrase*", "pwd", "*pwd", "*secret*", "*token*",
	"*apikey*", "*accesskey*", "auth", "*auth", "*authorization*", "*credential*", "*cookie*", "*private*"}

// Audit configures the audit trail (docs/operations.md, "Audit trail"),
// read by every service: each writes the events it knows of.
type Audit struct {
	// Sink is where the JSON lines go: off (the default), stdout or file.
	Sink string `yaml:"sink"`
	// File is the file the file sink appends to.
	File string `yaml:"file"`
	// Arguments is digest (the default) or values.
	Arguments string `yaml:"arguments"`
	// RedactKeys are shell patterns (path.Match, matched against the
	// lower-cased member name, at any depth) of argument members whose
	// values are replaced by "[redacted]"; unset: DefaultAuditRedactKeys.
	// The patterns configured are used in addition to the defaults.
	RedactKeys []string `yaml:"redactKeys"`
	// QueueSize bounds the events waiting to be written, per process; a
	// full queue drops the event and counts it
	// (switchboard_audit_events_dropped_total).
	QueueSize int `yaml:"queueSize"`
	// Database ships the events to the indexer, which keeps them in
	// PostgreSQL for QueryAuditEvents.
	Database AuditDatabase `yaml:"database"`
	// Retention is how long the indexer keeps events in PostgreSQL
	// (default 30 days).
	Retention Duration `yaml:"retention"`
}

// AuditDatabase configures the PostgreSQL table of the trail.
type AuditDatabase struct {
	// Enabled: the gateway and the aggregator send their events to the
	// indexer (RecordAuditEvents, over gateway.indexer and
	// aggregator.pinning.indexer), which stores them with its own.
	Enabled bool `yaml:"enabled"`
}

// EffectiveSink is the sink with the default applied.
func (a Audit) EffectiveSink() string {
	if a.Sink == "" {
		return AuditOff
	}
	return a.Sink
}

// EffectiveArguments is the argument mode with the default applied.
func (a Audit) EffectiveArguments() string {
	if a.Arguments == "" {
		return AuditDigest
	}
	return a.Arguments
}

// EffectiveQueueSize is the queue size with the default applied.
func (a Audit) EffectiveQueueSize() int {
	if a.QueueSize <= 0 {
		return DefaultAuditQueueSize
	}
	return a.QueueSize
}

// EffectiveRetention is the retention with the default applied.
func (a Audit) EffectiveRetention() time.Duration {
	return a.Retention.Or(time.Duration(DefaultAuditRetention))
}

// AllRedactKeys are the default patterns and the configured ones.
func (a Audit) AllRedactKeys() []string {
	return append(append([]string(nil), DefaultAuditRedactKeys...), a.RedactKeys...)
}

// Enabled reports whether any sink records events.
func (a Audit) Enabled() bool { return a.EffectiveSink() != AuditOff || a.Database.Enabled }

// Validate checks the audit section.
func (a Audit) Validate() error {
	var errs []error
	switch a.EffectiveSink() {
	case AuditOff, AuditStdout:
		if a.File != "" {
			errs = append(errs, fmt.Errorf("audit.file is set but audit.sink is %s: set audit.sink: file", a.EffectiveSink()))
		}
	case AuditFile:
		if a.File == "" {
			errs = append(errs, errors.New("audit.file is required with audit.sink: file"))
		}
	default:
		errs = append(errs, keyErr("audit.sink", "want off, stdout or file"))
	}
	switch a.EffectiveArguments() {
	case AuditDigest, AuditValues:
	default:
		errs = append(errs, keyErr("audit.arguments", "want digest or values"))
	}
	for i, p := range a.RedactKeys {
		if _, err := path.Match(p, ""); err != nil || p == "" {
			errs = append(errs, keyErr(fmt.Sprintf("audit.redactKeys[%d]", i), "not a valid pattern"))
		}
	}
	if a.QueueSize < 0 || a.QueueSize > MaxAuditQueueSize {
		errs = append(errs, keyErr("audit.queueSize", "want 1..%d (or unset: %d)", MaxAuditQueueSize, DefaultAuditQueueSize))
	}
	if a.Retention < 0 || (a.Retention > 0 && a.Retention < Duration(time.Hour)) {
		errs = append(errs, keyErr("audit.retention", "want at least 1h (or unset: %v)", time.Duration(DefaultAuditRetention)))
	}
	return errors.Join(errs...)
}

// AggregatorAuditIndexer is the indexer the aggregator ships its audit
// events to with audit.database.enabled: aggregator.pinning.indexer,
// the aggregator's one indexer endpoint.
func (c *Config) AggregatorAuditIndexer() Endpoint { return c.Aggregator.IndexerEndpoint() }

// validateAuditIndexer checks that a service shipping its events to the
// indexer has one to ship to (key names the endpoint's key).
func validateAuditIndexer(a Audit, e Endpoint, key string) error {
	if !a.Database.Enabled {
		return nil
	}
	if e.Address == "" || e.Token == "" {
		return fmt.Errorf("%s (address and token) is required with audit.database.enabled: the events are stored by the indexer", key)
	}
	return nil
}
