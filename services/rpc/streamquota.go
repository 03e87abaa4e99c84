package rpc

import (
	"errors"
	"sync"
)

// DefaultStreamsPerCaller is a StreamQuota's bound when it sets none.
const DefaultStreamsPerCaller = 256

// ErrTooManyStreams: the caller has as many streams of the RPC open as it
// may. Services answer it RESOURCE_EXHAUSTED.
var ErrTooManyStreams = errors.New("too many open streams of this kind for this caller")

// StreamQuota bounds the streams of one long-lived RPC (a watch) that each
// caller, a service credential, holds open on this server, so that a
// credential that is misused cannot hold the server's memory with them.
// Handlers acquire a place when a stream starts and release it when it
// ends; operators' credentials are exempt where the handler says so. The
// zero value is ready, with DefaultStreamsPerCaller places per caller.
type StreamQuota struct {
	// Max is the bound per caller; 0 is DefaultStreamsPerCaller.
	Max int

	mu       sync.Mutex
	byCaller map[string]int
}

// Acquire takes a place for one stream of caller, or fails with
// ErrTooManyStreams; release gives it back (once).
func (q *StreamQuota) Acquire(caller string) (release func(), err error) {
	limit := q.Max
	if limit <= 0 {
		limit = DefaultStreamsPerCaller
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.byCaller == nil {
		q.byCaller = map[string]int{}
	}
	if q.byCaller[caller] >= limit {
		return nil, ErrTooManyStreams
	}
	q.byCaller[caller]++
	var once sync.Once
	return func() {
		once.Do(func() {
			q.mu.Lock()
			defer q.mu.Unlock()
			if q.byCaller[caller]--; q.byCaller[caller] == 0 {
				delete(q.byCaller, caller)
			}
		})
	}, nil
}
