package server

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"time"

	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// A caller that is not an operator relays at most cancellationRate
// cancellations a second through one replica, in bursts of
// cancellationBurst. Each is one NOTIFY heard by every indexer replica and
// one message to every gateway replica, so this bounds what a misused
// gateway credential can make the cluster do; a gateway bounds each
// principal far below it.
const (
	cancellationRate  = 200
	cancellationBurst = 400
)

// maxCancellationCallers bounds the callers whose rates are tracked; past
// it, the ones whose buckets are full (they may relay a whole burst again)
// are forgotten, and a new caller waits while none is.
const maxCancellationCallers = 1024

// errTooManyCancellations: the caller relays cancellations faster than it
// may.
var errTooManyCancellations = errors.New("too many relayed cancellations for this caller")

// RelayCancellation announces a Legacy client's cancellation to every
// gateway replica through the database.
func (s *Server) RelayCancellation(ctx context.Context, req *indexerv1.RelayCancellationRequest) (*indexerv1.RelayCancellationResponse, error) {
	c := req.GetCancellation()
	err := s.checkReady()
	if err == nil {
		err = validDigest(c.GetSessionDigest())
	}
	if err == nil && !validRequestID(c.GetRequestIdJson()) {
		err = invalidArgument("request_id_json must be a JSON string or number of at most 256 bytes")
	}
	if caller, _ := svcauth.CallerFrom(ctx); err == nil && !caller.Operator && !s.cancellations.allow(caller.Name, s.now()) {
		err = errTooManyCancellations
	}
	if err == nil {
		err = s.Store.RelayCancellation(ctx, store.Cancellation{SessionDigest: c.GetSessionDigest(), RequestID: c.GetRequestIdJson()})
	}
	if err != nil {
		return nil, s.toStatus(ctx, "RelayCancellation", err)
	}
	return &indexerv1.RelayCancellationResponse{}, nil
}

// validRequestID reports whether id is a JSON-RPC request id, a string or
// a number, in at most maxRequestIDBytes.
func validRequestID(id string) bool {
	if id == "" || len(id) > maxRequestIDBytes || !json.Valid([]byte(id)) {
		return false
	}
	switch id[0] {
	case '"', '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return true
	}
	return false
}

// rateQuota is a token bucket per caller.
type rateQuota struct {
	rate, burst float64
	callers     int

	mu       sync.Mutex
	byCaller map[string]*bucket
}

type bucket struct {
	tokens float64
	at     time.Time
}

func newRateQuota(rate, burst float64, callers int) *rateQuota {
	return &rateQuota{rate: rate, burst: burst, callers: callers, byCaller: map[string]*bucket{}}
}

// allow takes one token of caller's bucket, if it has one.
func (q *rateQuota) allow(caller string, now time.Time) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	b := q.byCaller[caller]
	if b == nil {
		if len(q.byCaller) >= q.callers {
			for name, other := range q.byCaller {
				if q.refill(other, now) >= q.burst {
					delete(q.byCaller, name)
				}
			}
			if len(q.byCaller) >= q.callers {
				return false
			}
		}
		b = &bucket{tokens: q.burst, at: now}
		q.byCaller[caller] = b
	}
	if q.refill(b, now) < 1 {
		return false
	}
	b.tokens--
	return true
}

// refill adds the tokens earned since b was last seen and returns them.
func (q *rateQuota) refill(b *bucket, now time.Time) float64 {
	if elapsed := now.Sub(b.at).Seconds(); elapsed > 0 {
		b.tokens = min(q.burst, b.tokens+elapsed*q.rate)
		b.at = now
	}
	return b.tokens
}
