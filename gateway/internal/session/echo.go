package session

import (
	"context"
	"sync"
	"time"
)

// A change of a Legacy session's state made through this replica is
// answered only once the indexer's stream has brought it back here, and a
// margin after (see wait), or after echoWait: the indexer pushes a change
// to every gateway replica's stream at once, so by then the others have
// it too, and a client that sets its log level, or subscribes, and sends
// its next request through another replica finds the change there.
// Without the wait, that request could arrive before the push and see the
// previous state.

// echoWait bounds how long a change waits for its echo; past it the change
// is answered anyway (it is recorded, and reaches the others when their
// streams carry it).
const echoWait = time.Second

// maxEchoes bounds the versions remembered for waiters.
const maxEchoes = 4096

// echoes remembers the latest version the stream carried per session, for
// the changes that wait for it.
type echoes struct {
	mu      sync.Mutex
	seen    map[string]uint64
	changed chan struct{} // closed and replaced whenever seen grows
}

func newEchoes() *echoes {
	return &echoes{seen: map[string]uint64{}, changed: make(chan struct{})}
}

// carried records that the stream carried version of session's state.
func (e *echoes) carried(session string, version uint64) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.seen) >= maxEchoes {
		// A waiter whose entry goes here waits echoWait at most.
		clear(e.seen)
	}
	if version > e.seen[session] {
		e.seen[session] = version
	}
	close(e.changed)
	e.changed = make(chan struct{})
}

// wait returns once the stream carried version (or a later one) of
// session's state and the margin below has passed, after echoWait from
// started, or when ctx ends. started is when this replica began the
// change (its UpdateSessionState call).
//
// The margin is for the other replicas: they get the push at the same
// time as this one, not after it, and one fed by another indexer replica,
// or shorter of CPU, applies it later; the echo can even arrive here
// before the update's own answer. How much later grows with what slows
// the whole change (a loaded machine slows both), so the margin is as
// long as the change has taken so far: on a quiet cluster a millisecond
// or two, on a loaded one as much as the load costs.
func (e *echoes) wait(ctx context.Context, session string, version uint64, started time.Time) {
	timer := time.NewTimer(echoWait - time.Since(started))
	defer timer.Stop()
	for {
		e.mu.Lock()
		done, changed := e.seen[session] >= version, e.changed
		e.mu.Unlock()
		if done {
			margin := time.NewTimer(time.Since(started))
			defer margin.Stop()
			select {
			case <-margin.C:
			case <-timer.C:
			case <-ctx.Done():
			}
			return
		}
		select {
		case <-changed:
		case <-timer.C:
			return
		case <-ctx.Done():
			return
		}
	}
}
