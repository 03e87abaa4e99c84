package config

import "time"

// The least intervals of periodic work. Set below them, the work runs
// back to back: a backend probed, the database collected, the issuer's
// keys fetched in a loop. reload.interval (MinReloadInterval) and
// grpc.keepaliveTime (MinKeepaliveTime) have theirs too.
const (
	// MinHealthInterval bounds aggregator.health.interval: each probe
	// is a request to every backend.
	MinHealthInterval = Duration(100 * time.Millisecond)
	// MinGCInterval bounds indexer.gcInterval: each collection scans
	// the database's scopes, documents and revocations.
	MinGCInterval = Duration(time.Second)
	// MinJWKSMinInterval bounds gateway.auth.oidc.jwksRefresh
	// .minInterval, the one bound on fetches that tokens naming unknown
	// key ids can ask for.
	MinJWKSMinInterval = Duration(100 * time.Millisecond)
)

// validateInterval refuses an interval (key) set below its floor; unset
// (0) takes def.
func validateInterval(key string, v, floor Duration, def time.Duration) error {
	if v < 0 || (v > 0 && v < floor) {
		return keyErr(key, "want at least %v (or unset: %v)", time.Duration(floor), def)
	}
	return nil
}

// Validate checks the probes' interval.
func (h HealthCheck) Validate() error {
	return validateInterval("aggregator.health.interval", h.Interval, MinHealthInterval, DefaultHealthInterval)
}

// Validate checks the least time between two fetches of the issuer's
// keys.
func (r JWKSRefresh) Validate() error {
	return validateInterval("gateway.auth.oidc.jwksRefresh.minInterval", r.MinInterval, MinJWKSMinInterval, DefaultJWKSMinInterval)
}

// validateGCInterval checks how often the indexer collects.
func (c Indexer) validateGCInterval() error {
	return validateInterval("indexer.gcInterval", c.GCInterval, MinGCInterval, DefaultIndexerGCInterval)
}
