package config

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Rate limits (docs/configuration.md, "rateLimits"): token buckets the
// aggregators (every request they send to a backend for a caller) and the
// indexers (find_tool) apply, shared by every replica through the indexer's
// PostgreSQL.

// What a rate limit counts (RateLimit.Per): one bucket per distinct value.
const (
	RatePerPrincipal = "principal"
	RatePerTool      = "tool"
	RatePerBackend   = "backend"
	RatePerServer    = "server"
)

// The methods a rate limit applies to (RateLimit.Methods).
const (
	RateMethodToolsCall    = "tools/call"
	RateMethodResourceRead = "resources/read"
	RateMethodPromptsGet   = "prompts/get"
	RateMethodCompletion   = "completion/complete"
	// RateMethodResourceSubscribe counts each resource a subscription
	// names (resources/subscribe, and a Modern listen's resource
	// subscriptions).
	RateMethodResourceSubscribe = "resources/subscribe"
	RateMethodFindTool          = "find_tool"
	// The requests about a task (aggregator.tasks) a client makes after
	// the tools/call that created it: each names the task's tool and
	// backend, but tasks/list.
	RateMethodTasksGet    = "tasks/get"
	RateMethodTasksUpdate = "tasks/update"
	RateMethodTasksCancel = "tasks/cancel"
	RateMethodTasksList   = "tasks/list"
)

// RateLimitMethods are every method a limit can apply to, its default.
var RateLimitMethods = []string{RateMethodToolsCall, RateMethodResourceRead, RateMethodPromptsGet,
	RateMethodCompletion, RateMethodResourceSubscribe, RateMethodFindTool,
	RateMethodTasksGet, RateMethodTasksUpdate, RateMethodTasksCancel, RateMethodTasksList}

// toolMethods are the methods that name a tool: a tools/call, and the
// requests about the task one created.
var toolMethods = []string{RateMethodToolsCall, RateMethodTasksGet, RateMethodTasksUpdate, RateMethodTasksCancel}

// backendMethods are the methods that reach a backend, the default of a
// limit per backend: every one but find_tool and tasks/list. The
// requests about a task count too, as they name the task's backend: they
// are sent there (a task the backend runs, a round an answer starts), and
// a read of one Switchboard runs polls what that backend's call did.
var backendMethods = []string{RateMethodToolsCall, RateMethodResourceRead, RateMethodPromptsGet,
	RateMethodCompletion, RateMethodResourceSubscribe, RateMethodTasksGet, RateMethodTasksUpdate, RateMethodTasksCancel}

// Bounds of the rateLimits section.
const (
	MaxRateLimits        = 64
	MaxRateLimitPatterns = 64
	MaxRateLimitRate     = 1_000_000 // per second
	// MinRateLimitRate is the slowest rate, one token an hour: a bucket
	// is then full again within MaxRateLimitBurst hours of its last
	// use, when the indexer's collection may delete it.
	MinRateLimitRate  = 1.0 / 3600
	MaxRateLimitBurst = 1_000_000
)

// What happens to a request when the shared buckets cannot be reached
// (RateLimits.OnUnavailable).
const (
	// RateFailOpen admits it, counted and logged: a limit protects
	// backends from floods and must not take the whole service down with
	// the indexer.
	RateFailOpen = "open"
	// RateFailClosed refuses it as rate limited (retry after a second).
	RateFailClosed = "closed"
)

// RateLimits is the top-level rateLimits section.
type RateLimits struct {
	// OnUnavailable is open (the default) or closed.
	OnUnavailable string `yaml:"onUnavailable"`
	// Limits are the buckets; a request takes one token from every
	// limit that matches it, and is refused when any of them is empty.
	Limits []RateLimit `yaml:"limits"`
}

// RateLimit is one limit: a token bucket per distinct value of Per, among
// the requests Match and Methods select.
type RateLimit struct {
	// Name identifies the limit in metrics, logs and the refusal; unique.
	Name string `yaml:"name"`
	// Per is principal, tool, backend or server. A limit per tool applies
	// to tools/call only, per backend to everything but find_tool.
	Per string `yaml:"per"`
	// Match narrows the requests counted; empty lists match everything.
	Match RateLimitMatch `yaml:"match"`
	// Rate is "<n>/s", "<n>/m" or "<n>/h": tokens added per period.
	Rate string `yaml:"rate"`
	// Burst is the most tokens a bucket holds (default: one second's
	// worth, at least 1).
	Burst int `yaml:"burst"`
	// Methods are those of RateLimitMethods the limit applies to
	// (default: all its Per applies to, tools/call alone per tool;
	// EffectiveMethods).
	Methods []string `yaml:"methods"`
}

// RateLimitMatch selects requests by names or globs (GlobMatch, as the
// servers' filters: * any run of characters, ? one). A request matches when it matches every non-empty list; a list
// matches when any of its patterns does.
type RateLimitMatch struct {
	Servers  []string `yaml:"servers"`
	Tools    []string `yaml:"tools"`
	Backends []string `yaml:"backends"`
	// Principals are subjects; Groups match a principal in any of them.
	Principals []string `yaml:"principals"`
	Groups     []string `yaml:"groups"`
}

// EffectiveOnUnavailable is OnUnavailable with its default.
func (r RateLimits) EffectiveOnUnavailable() string {
	if r.OnUnavailable == "" {
		return RateFailOpen
	}
	return r.OnUnavailable
}

// ParseRate reads "<n>/s", "<n>/m" or "<n>/h" as tokens per second. Its
// errors say what is wanted, without s (it may be an expanded secret).
func ParseRate(s string) (float64, error) {
	num, unit, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return 0, errors.New("want <n>/s, <n>/m or <n>/h")
	}
	// Written as "not above zero" so that NaN, which compares false with
	// everything, is refused too; Inf is past the maximum below.
	n, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	if err != nil || !(n > 0) {
		return 0, errors.New("want a positive number per period")
	}
	var per float64
	switch strings.TrimSpace(unit) {
	case "s":
		per = 1
	case "m":
		per = 60
	case "h":
		per = 3600
	default:
		return 0, errors.New("the period is s, m or h")
	}
	r := n / per
	if !(r <= MaxRateLimitRate) {
		return 0, fmt.Errorf("at most %d per second", MaxRateLimitRate)
	}
	if r < MinRateLimitRate {
		return 0, errors.New("at least 1 per hour")
	}
	return r, nil
}

// EffectiveBurst is Burst, or one second's worth of rate (at least 1).
func (l RateLimit) EffectiveBurst(rate float64) int {
	if l.Burst > 0 {
		return l.Burst
	}
	return max(1, int(rate))
}

// EffectiveMethods is Methods, or every method the limit's Per applies to.
func (l RateLimit) EffectiveMethods() []string {
	if len(l.Methods) > 0 {
		return l.Methods
	}
	switch l.Per {
	case RatePerTool:
		return []string{RateMethodToolsCall}
	case RatePerBackend:
		return backendMethods
	}
	return RateLimitMethods
}

// Validate checks the section: every limit, its bounds and its patterns.
func (r RateLimits) Validate() error {
	var errs []error
	switch r.EffectiveOnUnavailable() {
	case RateFailOpen, RateFailClosed:
	default:
		errs = append(errs, keyErr("rateLimits.onUnavailable", "want open or closed"))
	}
	if len(r.Limits) > MaxRateLimits {
		errs = append(errs, fmt.Errorf("rateLimits.limits: %d limits, at most %d", len(r.Limits), MaxRateLimits))
	}
	names := map[string]bool{}
	for i, l := range r.Limits {
		at := fmt.Sprintf("rateLimits.limits[%d]", i)
		if l.Name == "" || len(l.Name) > 64 || strings.ContainsAny(l.Name, "\x00|") {
			errs = append(errs, keyErr(at+".name", "required, at most 64 bytes, without | or NUL"))
		} else if names[l.Name] {
			errs = append(errs, keyErr(at+".name", "used twice"))
		}
		names[l.Name] = true
		errs = append(errs, l.validate(at))
	}
	return errors.Join(errs...)
}

// validate checks the limit at key at (rateLimits.limits[i]).
func (l RateLimit) validate(at string) error {
	var errs []error
	switch l.Per {
	case RatePerPrincipal, RatePerTool, RatePerBackend, RatePerServer:
	default:
		errs = append(errs, keyErr(at+".per", "want principal, tool, backend or server"))
	}
	rate, err := ParseRate(l.Rate)
	if err != nil {
		errs = append(errs, &KeyError{Key: at + ".rate", Err: err})
	}
	if l.Burst < 0 || l.Burst > MaxRateLimitBurst {
		errs = append(errs, keyErr(at+".burst", "want 1 to %d (or unset: one second's worth)", MaxRateLimitBurst))
	} else if err == nil && l.EffectiveBurst(rate) > MaxRateLimitBurst {
		errs = append(errs, keyErr(at+".burst", "one second of rate is over %d; set burst", MaxRateLimitBurst))
	}
	for i, m := range l.Methods {
		method := fmt.Sprintf("%s.methods[%d]", at, i)
		if !slices.Contains(RateLimitMethods, m) {
			errs = append(errs, keyErr(method, "not one of %s", strings.Join(RateLimitMethods, ", ")))
			continue
		}
		// A find_tool names no tool and no backend, a tasks/list no
		// tool and no backend either; only a tools/call and the requests
		// about its task name a tool (m is one of RateLimitMethods here).
		if (l.Per == RatePerTool || len(l.Match.Tools) > 0) && !slices.Contains(toolMethods, m) {
			errs = append(errs, keyErr(method, "%s names no tool, so a limit per tool or matching tools cannot apply to it", m))
		}
		if (l.Per == RatePerBackend || len(l.Match.Backends) > 0) && (m == RateMethodFindTool || m == RateMethodTasksList) {
			errs = append(errs, keyErr(method, "%s names no backend, so a limit per backend or matching backends cannot apply to it", m))
		}
	}
	for field, patterns := range map[string][]string{
		"servers": l.Match.Servers, "tools": l.Match.Tools, "backends": l.Match.Backends,
		"principals": l.Match.Principals, "groups": l.Match.Groups,
	} {
		if len(patterns) > MaxRateLimitPatterns {
			errs = append(errs, keyErr(at+".match."+field, "at most %d patterns", MaxRateLimitPatterns))
		}
		for i, p := range patterns {
			if p == "" || len(p) > 256 {
				errs = append(errs, keyErr(fmt.Sprintf("%s.match.%s[%d]", at, field, i), "not a name or glob"))
			}
		}
	}
	return errors.Join(errs...)
}
