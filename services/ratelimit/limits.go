// Package ratelimit applies the configured rate limits (config rateLimits)
// to requests: which limits a request matches, the key of each one's
// bucket, and the replica's local leases of the cluster's tokens.
//
// The buckets themselves live in the indexer's PostgreSQL (one row per
// key, refilled on read), so every replica of every service draws from the
// same ones. A replica does not ask for every request: it takes a lease of
// a few tokens (a tenth of the burst, at least one) and spends it locally
// for up to LeaseTTL. Tokens are taken centrally before they are spent, so
// the cluster never admits more than the buckets allow; a lease left
// unspent lapses, which under-admits by at most one lease per replica and
// key per LeaseTTL.
package ratelimit

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// Request is what a limit may count of one request.
type Request struct {
	// Method is one of config.RateLimitMethods.
	Method string
	// Subject and Groups are the principal's.
	Subject string
	Groups  []string
	// Server is the virtual server ("" for the default route), Tool the
	// advertised tool name (tools/call only), Backend the owning backend
	// (not for find_tool).
	Server, Tool, Backend string
	// Refused marks a request refused before its item was known: missing,
	// denied or malformed. Only limits per principal count it (a bucket
	// per tool or server name the client chose would let it make
	// buckets without end), and Backend is empty, so a limit that matches
	// backends does not apply and a denied item costs what a missing one
	// does.
	Refused bool
}

// limit is one compiled config.RateLimit.
type limit struct {
	name    string
	per     string
	rate    float64 // tokens per second
	burst   int
	lease   int // tokens asked per lease
	methods []string
	match   config.RateLimitMatch
}

// Set is a compiled rateLimits section.
type Set struct {
	limits   []limit
	failOpen bool
}

// Compile checks and compiles cfg.
func Compile(cfg config.RateLimits) (*Set, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Set{failOpen: cfg.EffectiveOnUnavailable() == config.RateFailOpen}
	for _, l := range cfg.Limits {
		rate, _ := config.ParseRate(l.Rate)
		burst := l.EffectiveBurst(rate)
		s.limits = append(s.limits, limit{
			name: l.Name, per: l.Per, rate: rate, burst: burst, lease: LeaseSize(burst),
			methods: l.EffectiveMethods(), match: l.Match,
		})
	}
	return s, nil
}

// LeaseSize is how many tokens a replica asks for at once: a tenth of the
// burst, at least one. Small against the burst, so that the leases
// replicas hold unspent cost little; large enough that a busy key needs
// an RPC for one request in ten at most while its bucket has tokens.
func LeaseSize(burst int) int { return max(1, burst/10) }

// Empty reports whether the set has no limits.
func (s *Set) Empty() bool { return s == nil || len(s.limits) == 0 }

// Methods reports whether any limit applies to any of methods.
func (s *Set) Methods(methods ...string) bool {
	if s == nil {
		return false
	}
	for _, l := range s.limits {
		for _, m := range methods {
			if slices.Contains(l.methods, m) {
				return true
			}
		}
	}
	return false
}

// matched is one limit a request matches, with its bucket's key.
type matched struct {
	l   *limit
	key string
}

// match returns the limits r matches, each with its key.
func (s *Set) match(r Request) []matched {
	var out []matched
	for i := range s.limits {
		l := &s.limits[i]
		if !slices.Contains(l.methods, r.Method) || !l.matches(r) {
			continue
		}
		var value string
		switch l.per {
		case config.RatePerPrincipal:
			value = r.Subject
		case config.RatePerTool:
			value = r.Tool
		case config.RatePerBackend:
			value = r.Backend
		case config.RatePerServer:
			value = r.Server
		}
		if r.Refused && l.per != config.RatePerPrincipal {
			continue
		}
		if (l.per == config.RatePerTool && r.Tool == "") || (l.per == config.RatePerBackend && r.Backend == "") {
			// Nothing to count by (find_tool has no backend).
			continue
		}
		out = append(out, matched{l: l, key: Key(l.name, l.per, value)})
	}
	return out
}

// maxKeyValueBytes bounds the value part of a key; longer values (a long
// subject) are hashed, so that a key stays within the RPC's 512 bytes.
const maxKeyValueBytes = 256

// hashedValue starts the value part of a key whose value is hashed.
const hashedValue = "sha256:"

// Key is the bucket key of a limit and the value it counts:
// "<limit>|<per>|<value>". A limit's name is unique and holds no "|".
// The value is what a client, an identity provider or a backend chose (a
// subject, a tool name), so no value can make a key the buckets refuse:
// one that is long, holds anything but printable ASCII or "|", or could
// be taken for a hashed one is hashed. Distinct values give distinct
// keys.
func Key(name, per, value string) string {
	if !plainKeyValue(value) {
		sum := sha256.Sum256([]byte(value))
		value = hashedValue + hex.EncodeToString(sum[:])
	}
	return name + "|" + per + "|" + value
}

// plainKeyValue reports whether value may stand in a key as it is.
func plainKeyValue(value string) bool {
	if len(value) > maxKeyValueBytes || strings.HasPrefix(value, hashedValue) {
		return false
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < 0x20 || c > 0x7e || c == '|' {
			return false
		}
	}
	return true
}

func (l *limit) matches(r Request) bool {
	m := l.match
	if !anyMatch(m.Servers, r.Server) || !anyMatch(m.Tools, r.Tool) || !anyMatch(m.Backends, r.Backend) || !anyMatch(m.Principals, r.Subject) {
		return false
	}
	if len(m.Groups) == 0 {
		return true
	}
	for _, g := range r.Groups {
		if anyMatch(m.Groups, g) {
			return true
		}
	}
	return false
}

// anyMatch: an empty list matches anything; otherwise a non-empty value
// must match one of the patterns.
func anyMatch(patterns []string, value string) bool {
	if len(patterns) == 0 {
		return true
	}
	if value == "" {
		return false
	}
	for _, p := range patterns {
		if config.GlobMatch(p, value) {
			return true
		}
	}
	return false
}

// Configured reports the rate (tokens per second) and burst of the limit
// named name, and whether the set has such a limit (for listing buckets
// against the configuration: a bucket's row does not store them).
func (s *Set) Configured(name string) (rate float64, burst int, ok bool) {
	if s == nil {
		return 0, 0, false
	}
	for _, l := range s.limits {
		if l.name == name {
			return l.rate, l.burst, true
		}
	}
	return 0, 0, false
}
