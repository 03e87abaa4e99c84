package server

import (
	"sync"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
)

// maxQueuedNotes and maxQueuedNoteBytes bound the notifications of a
// streamed call waiting for its caller to read them, in number and in
// bytes, those being sent included: a backend's message may be 32 MiB.
// One is queued whatever its size when nothing else waits.
const (
	maxQueuedNotes     = 256
	maxQueuedNoteBytes = 8 << 20
)

// noteQueue puts a streamed call's notifications on its gRPC stream from
// a goroutine of its own, so that a caller that stops reading never
// blocks the backend's session (go-sdk hands the notifications over
// inside its handler): the call still ends at its timeout, and the
// backend is told. Past the bounds unread, notifications are dropped,
// as progress and log messages may be; the result is sent after every
// queued one.
type noteQueue struct {
	send func(*aggregatorv1.Notification) error

	mu    sync.Mutex
	notes []*aggregatorv1.Notification
	// pending and bytes are the number and size of the notifications
	// queued or being sent.
	pending, bytes int
	err            error // the stream's failure, once it failed
	wake           chan struct{}
	closed         bool
	done           chan struct{}
}

func newNoteQueue(send func(*aggregatorv1.Notification) error) *noteQueue {
	q := &noteQueue{send: send, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go q.run()
	return q
}

// put queues n; it fails only once the stream has failed.
func (q *noteQueue) put(n *aggregatorv1.Notification) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.err != nil {
		return q.err
	}
	size := noteSize(n)
	if q.pending < maxQueuedNotes && (q.bytes == 0 || q.bytes+size <= maxQueuedNoteBytes) {
		q.notes = append(q.notes, n)
		q.pending++
		q.bytes += size
	}
	select {
	case q.wake <- struct{}{}:
	default:
	}
	return nil
}

func (q *noteQueue) run() {
	defer close(q.done)
	for {
		q.mu.Lock()
		notes := q.notes
		q.notes = nil
		closed := q.closed
		q.mu.Unlock()
		for _, n := range notes {
			err := q.send(n)
			q.mu.Lock()
			q.pending--
			q.bytes -= noteSize(n)
			if err != nil {
				q.err = err
			}
			q.mu.Unlock()
			if err != nil {
				return
			}
		}
		if closed && len(notes) == 0 {
			return
		}
		if len(notes) == 0 {
			<-q.wake
		}
	}
}

// close waits until every queued notification is sent (or the stream
// failed); nothing is queued after it.
func (q *noteQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
	<-q.done
}

// noteSize is what a notification holds, for maxQueuedNoteBytes.
func noteSize(n *aggregatorv1.Notification) int {
	return len(n.GetMethod()) + len(n.GetParamsJson())
}
