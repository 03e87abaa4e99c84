package backend

import (
	"sync"
	"time"
)

// State is a backend's health.
type State int

// Health states. Only Unhealthy removes a backend from the catalog.
const (
	Unknown State = iota
	Healthy
	Degraded
	Unhealthy
)

func (s State) String() string {
	return [...]string{"unknown", "healthy", "degraded", "unhealthy"}[s]
}

// HealthPolicy turns probe outcomes into states.
type HealthPolicy struct {
	// DegradedAfter: a success slower than this is Degraded.
	DegradedAfter time.Duration
	// UnhealthyAfter consecutive failures make a backend Unhealthy.
	UnhealthyAfter int
}

// Status is a point-in-time view of a backend's health.
type Status struct {
	State State
	// ProtocolVersion negotiated on the last connection.
	ProtocolVersion string
	// LastError is the last failure, secrets removed; empty after a success.
	// It may name URLs, hosts and ports: for operators only.
	LastError string
	// Failure is the kind of the last failure (FailureNone after a
	// success): what everyone else is told.
	Failure   Failure
	LastCheck time.Time
	// Latency is how long the last success took; 0 before the first.
	Latency time.Duration
	// Counts of the last successful listing.
	Tools, Resources, ResourceTemplates, Prompts int
}

type healthTracker struct {
	mu       sync.Mutex
	policy   HealthPolicy
	status   Status
	failures int
	// onChange is called, outside the lock, when State changes; listed
	// says the change came from a successful listing.
	onChange func(prev, now State, listed bool)
}

func newHealthTracker() healthTracker {
	return healthTracker{policy: HealthPolicy{DegradedAfter: 2 * time.Second, UnhealthyAfter: 3}}
}

func (h *healthTracker) setProtocol(v string) {
	h.mu.Lock()
	h.status.ProtocolVersion = v
	h.mu.Unlock()
}

func (h *healthTracker) success(latency time.Duration, lists *Lists) {
	h.mu.Lock()
	prev := h.status.State
	h.failures = 0
	h.status.State = Healthy
	if h.policy.DegradedAfter > 0 && latency > h.policy.DegradedAfter {
		h.status.State = Degraded
	}
	h.status.LastError = ""
	h.status.Failure = FailureNone
	h.status.LastCheck = time.Now()
	h.status.Latency = latency
	if lists != nil {
		h.status.Tools, h.status.Resources = len(lists.Tools), len(lists.Resources)
		h.status.ResourceTemplates, h.status.Prompts = len(lists.ResourceTemplates), len(lists.Prompts)
		h.status.ProtocolVersion = lists.ProtocolVersion
	}
	h.notify(prev, lists != nil)
}

func (h *healthTracker) failure(msg string, kind Failure) {
	h.mu.Lock()
	prev := h.status.State
	h.failures++
	h.status.LastError = msg
	h.status.Failure = kind
	h.status.LastCheck = time.Now()
	if h.failures >= max(h.policy.UnhealthyAfter, 1) {
		h.status.State = Unhealthy
	}
	h.notify(prev, false)
}

// notify releases the lock and reports a state change.
func (h *healthTracker) notify(prev State, listed bool) {
	now, cb := h.status.State, h.onChange
	h.mu.Unlock()
	if now != prev && cb != nil {
		cb(prev, now, listed)
	}
}

// SetHealthPolicy sets how probe outcomes become states, and a callback for
// state changes. Call it before the first probe.
func (c *Client) SetHealthPolicy(p HealthPolicy, onChange func(prev, now State, listed bool)) {
	c.health.mu.Lock()
	c.health.policy = p
	c.health.onChange = onChange
	c.health.mu.Unlock()
}

// Status reports the backend's health.
func (c *Client) Status() Status {
	c.health.mu.Lock()
	defer c.health.mu.Unlock()
	return c.health.status
}
