package config

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"
)

// One validation per service, of everything in the file that service reads,
// used both at start and on every reload: a file a service would refuse to
// start with is refused by its reload too, and the other way round. Each
// service adds the checks that need its own code (the aggregator parses
// its Cedar policy and naming rules, the gateway builds its authenticator)
// in its own Validate function, which calls the one here.
//
// A value the validation refuses is named by its key (a KeyError, with
// the variables the value was expanded from), never quoted: it may be a
// secret (keyerr.go).

// ValidateGateway checks what switchboard-gateway reads: its section,
// the grpc section (and that it leaves room for gateway.streams.maxOpen),
// the virtual servers (their audiences against
// gateway.auth too) and tool overrides, the rate limits (the gateway
// takes the tokens of the requests it refuses itself), and the reload
// interval.
func (c *Config) ValidateGateway() error {
	return c.Annotate(errors.Join(c.Gateway.WithDefaults().Validate(), c.GRPC.Validate(), c.GRPC.validateGatewayStreams(c.Gateway.WithDefaults().Streams.MaxOpen),
		c.ValidateServers(), c.ValidateServerAudiences(), c.RateLimits.Validate(), c.Reload.Validate(), c.Audit.Validate(), c.Ops.Validate(), c.Logging.Validate(), c.Gateway.Auth.OIDC.JWKSRefresh.Validate(),
		validateAuditIndexer(c.Audit, c.Gateway.Indexer, "gateway.indexer"), c.validateRunsFitRequests(), c.Telemetry.Validate(),
		c.validateGatewaySessionsFitRevocations(), c.validateClientToken("gateway.aggregator", c.Gateway.Aggregator),
		c.validateClientToken("gateway.indexer", c.Gateway.Indexer)))
}

// validateClientToken refuses an endpoint (key) with a token and no
// address, and one with an address and no token when the service
// presents no client certificate
// (serviceAuth.tls.certFile, which authenticates a call alone): the
// server would refuse every call as unauthenticated. A token written
// ${NAME:-} is empty in a pod that lacks the variable. A token the
// endpoint takes from a credential's role (local.go) is set by now.
func (c *Config) validateClientToken(key string, ep Endpoint) error {
	switch {
	case ep.Address == "" && ep.Token != "":
		// Written for a service this one would then never call (no
		// find_tool, deletions kept on one replica), without a word.
		return keyErr(key+".address", "is required: %s.token is set, and without an address the service is never called", key)
	case ep.Address == "" || ep.Token != "" || c.ServiceAuth.TLS.CertFile != "":
		return nil
	}
	return keyErr(key+".token", "is required: the service presents no client certificate (serviceAuth.tls.certFile) to authenticate by instead")
}

// validateGatewaySessionsFitRevocations is validateSessionsFitRevocations
// for a gateway that records its sessions' deletions in an indexer;
// without one they are its own, kept as long as the sessions live.
func (c *Config) validateGatewaySessionsFitRevocations() error {
	if c.Gateway.Indexer.Address == "" {
		return nil
	}
	return c.validateSessionsFitRevocations()
}

// validateSessionsFitRevocations refuses a Legacy session that outlives
// the indexer's record of its deletion: a revocation is kept at most
// indexer.maxRevocationTTL, so a DELETEd session would open again on the
// other replicas, and on any that restarts, for the rest of its life.
func (c *Config) validateSessionsFitRevocations() error {
	ttl, kept := time.Duration(c.Gateway.WithDefaults().Sessions.TTL), time.Duration(c.Indexer.WithDefaults().MaxRevocationTTL)
	if ttl > kept {
		return keyErr("gateway.sessions.ttl", "is %s, longer than indexer.maxRevocationTTL (%s), the longest a deleted session is remembered: a deleted session would open again; raise indexer.maxRevocationTTL", ttl, kept)
	}
	return nil
}

// validateRunsFitRequests refuses a code mode timeout that does not
// leave CodeRunMargin of the gateway's request timeout: a program runs
// within one call of the request to the aggregator, which the gateway
// ends at gateway.timeouts.request, so the run, and its error, would be
// cut there.
func (c *Config) validateRunsFitRequests() error {
	offered := c.Aggregator.CodeMode.Enabled
	for _, s := range c.Servers {
		offered = offered || s.CodeMode != nil && *s.CodeMode
	}
	run, request := time.Duration(c.Aggregator.CodeMode.WithDefaults().Timeout), time.Duration(c.Gateway.WithDefaults().Timeouts.Request)
	if offered && run+CodeRunMargin > request {
		return keyErr("aggregator.codeMode.timeout", "is %s, which gateway.timeouts.request (%s) must exceed by %s to let a run that reaches it report its error: raise gateway.timeouts.request to at least %s", run, request, CodeRunMargin, run+CodeRunMargin)
	}
	return nil
}

// ValidateAggregator checks what switchboard-aggregator reads: its section
// (backends, naming, peers, pinning; the aggregator parses the Cedar
// policy on top), the service credentials, the grpc section, the virtual
// servers and tool overrides, the rate limits (and the indexer they need)
// and the reload interval.
func (c *Config) ValidateAggregator() error {
	return c.Annotate(errors.Join(c.Aggregator.Validate(), c.ServiceAuth.Validate(), c.GRPC.Validate(),
		c.ValidateServers(), c.ValidateRateLimits(), c.validateNamesKnown(), c.Reload.Validate(), c.Audit.Validate(), c.Ops.Validate(), c.Logging.Validate(), c.Aggregator.Health.Validate(),
		validateAuditIndexer(c.Audit, c.AggregatorAuditIndexer(), "aggregator.indexer"), c.validateTasks(), c.Aggregator.CodeMode.WithDefaults().Validate(), c.Telemetry.Validate()))
}

// ValidateIndexer checks what switchboard-indexer reads: its section, the
// service credentials, the grpc section, the rate limits and the reload
// interval.
func (c *Config) ValidateIndexer() error {
	return c.Annotate(errors.Join(c.Indexer.WithDefaults().Validate(), c.Indexer.validateGCInterval(), c.ServiceAuth.Validate(), c.GRPC.Validate(), c.RateLimits.Validate(), c.Reload.Validate(), c.Audit.Validate(), c.Ops.Validate(), c.Logging.Validate(), c.Telemetry.Validate(),
		c.validateSessionsFitRevocations(), c.validateClientToken("indexer.aggregator", c.Indexer.Aggregator)))
}

// Validate checks the telemetry section: a sampling ratio is a fraction
// (NaN, which compares false with everything, is refused with the rest).
func (t Telemetry) Validate() error {
	if r := t.SampleRatio; r != nil && !(*r >= 0 && *r <= 1) {
		return keyErr("telemetry.sampleRatio", "want a number from 0 to 1")
	}
	return nil
}

// MinReloadInterval keeps the watch from reading the file in a tight loop.
const MinReloadInterval = Duration(100 * time.Millisecond)

// Validate checks the reload section.
func (r Reload) Validate() error {
	return validateInterval("reload.interval", r.Interval, MinReloadInterval, DefaultReloadInterval)
}

// validateNamesKnown refuses a backend or server named where the
// aggregator looks it up but declared nowhere: a misspelt name in
// conflictResolution would leave the backend it meant unlisted, so it
// loses every name conflict, and one in a rate limit's match would
// count nothing, both without a word. A glob (* or ?) may match none.
func (c *Config) validateNamesKnown() error {
	backends, servers := c.backendNames(), map[string]bool{}
	for _, s := range c.Servers {
		servers[s.Name] = true
	}
	var errs []error
	unknown := func(key, name string, known map[string]bool, where string) {
		if !known[name] && !strings.ContainsAny(name, "*?") {
			errs = append(errs, keyErr(key, "names nothing in %s", where))
		}
	}
	naming := c.Aggregator.ConflictResolution
	for i, b := range naming.PriorityOrder {
		unknown(fmt.Sprintf("aggregator.conflictResolution.priorityOrder[%d]", i), b, backends, "aggregator.backends")
	}
	for _, k := range slices.Sorted(maps.Keys(naming.Overrides)) {
		if b, _, ok := strings.Cut(k, "."); ok && !backends[b] {
			errs = append(errs, keyErr("aggregator.conflictResolution.overrides."+k, "names no backend in aggregator.backends"))
		}
	}
	for i, l := range c.RateLimits.Limits {
		for j, b := range l.Match.Backends {
			unknown(fmt.Sprintf("rateLimits.limits[%d].match.backends[%d]", i, j), b, backends, "aggregator.backends")
		}
		for j, s := range l.Match.Servers {
			unknown(fmt.Sprintf("rateLimits.limits[%d].match.servers[%d]", i, j), s, servers, "servers")
		}
	}
	return errors.Join(errs...)
}
