package session

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// A Legacy client's notifications/cancelled names a request by the
// client's own JSON-RPC id, which says nothing of the replica running it.
// The replica that receives one and runs no such request of the session
// relays it through the indexer to every replica (RelayCancellation; the
// owner is unknown, so it is a broadcast), and the replica running it
// cancels it as a local cancellation does (Local.Cancel: its context ends,
// and with it the call to the aggregator and the backend). The session
// digest is the one this replica computed from the session id it
// verified, never one a client names, so a session cancels only its own
// requests, and so only its principal's.
//
// Every cancellation relayed is a message to every replica, so a client
// gets few: each principal relays at most cancelRate a second (bursts of
// cancelBurst) through one replica, and the replica at most
// maxCancelsInFlight at once; past either the notification is refused
// with HTTP 429. An id that is not a JSON-RPC id (a string or a number) of
// at most maxCancelIDBytes is never relayed: no request of this gateway
// has one worth a broadcast.

// Bounds of relayed cancellations.
const (
	cancelRate         = 10
	cancelBurst        = 20
	maxCancelsInFlight = 64
	maxCancelIDBytes   = 256
	// maxRatedPrincipals bounds the principals whose rates one
	// principalRates holds (relayed cancellations, state changes); past
	// it, those whose bucket is full again are forgotten.
	maxRatedPrincipals = 10_000
)

// ErrCancellationsLimited means a cancellation was not relayed: its
// principal, or this replica, relays as many as it may now.
var ErrCancellationsLimited = errors.New("too many cancellations relayed now; retry in a second")

// cancelRelay bounds and counts relayed cancellations.
type cancelRelay struct {
	principalRates
	inFlight chan struct{}
	outcomes *prometheus.CounterVec
	now      func() time.Time
}

// principalRates are token buckets by principal digest, of rate tokens a
// second and burst at most, for what a principal sends to every replica;
// the zero value limits nothing.
type principalRates struct {
	rate, burst float64
	mu          sync.Mutex
	rates       map[string]*tokenBucket
}

type tokenBucket struct {
	tokens float64
	at     time.Time
}

func newCancelRelay() *cancelRelay {
	return &cancelRelay{principalRates: principalRates{rate: cancelRate, burst: cancelBurst}, inFlight: make(chan struct{}, maxCancelsInFlight), now: time.Now,
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "switchboard_gateway_relayed_cancellations_total",
			Help: "Legacy cancellations of requests not running on the replica that received them: sent (to every replica, through the indexer), limited (refused with 429), failed (the indexer did not take it), applied (one relayed by any replica that cancelled a request running here).",
		}, []string{"outcome"})}
}

// allow takes cost of principal's tokens, if it has them.
func (r *principalRates) allow(principal string, cost float64, now time.Time) bool {
	if r.burst == 0 {
		return true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.rates[principal]
	if b == nil {
		if len(r.rates) >= maxRatedPrincipals {
			for p, other := range r.rates {
				if r.refill(other, now) >= r.burst {
					delete(r.rates, p)
				}
			}
			if len(r.rates) >= maxRatedPrincipals {
				return false
			}
		}
		if r.rates == nil {
			r.rates = map[string]*tokenBucket{}
		}
		b = &tokenBucket{tokens: r.burst, at: now}
		r.rates[principal] = b
	}
	if r.refill(b, now) < cost {
		return false
	}
	b.tokens -= cost
	return true
}

// refill adds the tokens earned since b was last seen and returns them.
func (r *principalRates) refill(b *tokenBucket, now time.Time) float64 {
	if elapsed := now.Sub(b.at).Seconds(); elapsed > 0 {
		b.tokens = min(r.burst, b.tokens+elapsed*r.rate)
		b.at = now
	}
	return b.tokens
}

// isRequestID reports whether id is a JSON-RPC request id (a string or a
// number) short enough to relay.
func isRequestID(id json.RawMessage) bool {
	if len(id) == 0 || len(id) > maxCancelIDBytes || !json.Valid(id) {
		return false
	}
	switch id[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// RelayCancellation passes the session's cancellation of request id,
// which does not run on this replica, to every replica, within the bounds
// above (past them: ErrCancellationsLimited). principal is the session's,
// as this replica verified it. An id that cannot name a request, an
// indexer that cannot take it now, or none at all, leave it undone: the
// request then runs to its end, as a cancellation that arrives too late
// would.
func (s *Shared) RelayCancellation(ctx context.Context, session, principal string, id json.RawMessage) error {
	if s.client == nil || !isRequestID(id) {
		return nil
	}
	if !s.cancels.allow(principal, 1, s.cancels.now()) {
		s.cancels.outcomes.WithLabelValues("limited").Inc()
		return ErrCancellationsLimited
	}
	select {
	case s.cancels.inFlight <- struct{}{}:
		defer func() { <-s.cancels.inFlight }()
	default:
		s.cancels.outcomes.WithLabelValues("limited").Inc()
		return ErrCancellationsLimited
	}
	ctx, cancel := context.WithTimeout(ctx, updateTimeout)
	defer cancel()
	_, err := s.client.RelayCancellation(ctx, &indexerv1.RelayCancellationRequest{
		Cancellation: &indexerv1.RelayedCancellation{SessionDigest: session, RequestIdJson: string(id)}})
	switch status.Code(err) {
	case codes.OK:
		s.cancels.outcomes.WithLabelValues("sent").Inc()
		return nil
	case codes.ResourceExhausted:
		s.cancels.outcomes.WithLabelValues("limited").Inc()
		return ErrCancellationsLimited
	case codes.Unimplemented, codes.PermissionDenied:
		s.cancels.outcomes.WithLabelValues("failed").Inc()
		if !s.warnedCancel.Swap(true) {
			s.log.WarnContext(ctx, "the indexer does not relay cancellations for this gateway (an older indexer, or a credential without RelayCancellation): a Legacy cancellation reaching another replica than its request's does nothing", "err", err)
		}
		return nil
	default:
		s.cancels.outcomes.WithLabelValues("failed").Inc()
		if s.cancelWarn.allow(time.Now()) {
			s.log.WarnContext(ctx, "a Legacy cancellation of a request running on another replica was not relayed; that request runs to its end (logged at most once a minute)", "err", err)
		}
		return nil
	}
}

// applyCancellation cancels the request a relayed cancellation names, if
// it runs here.
func (s *Shared) applyCancellation(c *indexerv1.RelayedCancellation) {
	if s.local.Cancel(c.GetSessionDigest(), json.RawMessage(c.GetRequestIdJson())) {
		s.cancels.outcomes.WithLabelValues("applied").Inc()
	}
}
