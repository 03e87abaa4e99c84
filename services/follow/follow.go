// Package follow keeps a long-lived stream followed: a gRPC watch (the
// gateway's revocations and session events, the aggregator's tool
// approvals) or a PostgreSQL LISTEN (the indexer's hubs). Each attempt ends
// when its stream breaks; the next waits with capped, jittered exponential
// backoff, which starts over once an attempt got the stream up.
package follow

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff bounds the waits between attempts: the first is about Min, each
// next one twice as long, up to Max.
type Backoff struct{ Min, Max time.Duration }

// Streams is the backoff of the services' streams to each other and to
// PostgreSQL: 100 ms, doubling up to 10 s.
var Streams = Backoff{Min: 100 * time.Millisecond, Max: 10 * time.Second}

// Run runs once until ctx ends, again after each time it returns. once
// calls connected when its stream is up (a snapshot received, a LISTEN
// issued), which resets the backoff; down is told of each break, with
// first set when it is the first since the stream was last up (so an
// outage is logged loudly once) and the wait before the next attempt.
// Waits are jittered (half to all of the backoff), so the replicas that
// lost one server do not all come back to it at once.
func Run(ctx context.Context, b Backoff, once func(ctx context.Context, connected func()) error, down func(err error, first bool, wait time.Duration)) {
	backoff := b.Min
	// warned is whether the current outage was told as a first break.
	warned := false
	for ctx.Err() == nil {
		err := once(ctx, func() { backoff, warned = b.Min, false })
		if ctx.Err() != nil {
			return
		}
		wait := backoff/2 + rand.N(backoff/2+1)
		down(err, !warned, wait)
		warned = true
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		backoff = min(backoff*2, b.Max)
	}
}
