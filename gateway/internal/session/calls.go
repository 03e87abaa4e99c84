package session

import (
	"context"
	"encoding/json"
	"slices"
	"sync/atomic"
)

// The requests of Legacy sessions in flight on this replica, by session and
// JSON-RPC id: a client's notifications/cancelled names one of them, and an
// answer to an input request sent on a request's stream comes back under
// the id the gateway gave it. Both are bounded by the requests in flight:
// each holds its HTTP request open, or is one of the MaxDetachedCalls of
// its session that run on after their connection dropped.

// call is one request in flight.
type call struct {
	cancel context.CancelFunc
	// byClient is set when the client cancelled it.
	byClient atomic.Bool
}

// idKey names a request of a session by its id. A JSON string id is keyed
// by its decoded value, so that a notification naming it in another
// escaping still finds it; a number by its text.
func idKey(id json.RawMessage) string {
	var text string
	if len(id) > 0 && id[0] == '"' && json.Unmarshal(id, &text) == nil {
		b, _ := json.Marshal(text)
		id = b
	}
	return string(id)
}

// callKey names a request of a session across sessions.
func callKey(session string, id json.RawMessage) string { return session + "\x00" + idKey(id) }

// Track registers a request in flight under its id until done is called;
// cancel ends it when the client cancels it (Cancel), and cancelled then
// reports true, or when its session is deleted (EndSession).
func (l *Local) Track(session string, id json.RawMessage, cancel context.CancelFunc) (cancelled func() bool, done func()) {
	key := idKey(id)
	c := &call{cancel: cancel}
	l.mu.Lock()
	byID := l.calls[session]
	if byID == nil {
		byID = map[string][]*call{}
		l.calls[session] = byID
	}
	byID[key] = append(byID[key], c)
	l.mu.Unlock()
	return c.byClient.Load, func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		// The session's map holds c until now, so it is still the one
		// in l.calls.
		byID := l.calls[session]
		if calls := slices.DeleteFunc(byID[key], func(other *call) bool { return other == c }); len(calls) > 0 {
			byID[key] = calls
		} else if delete(byID, key); len(byID) == 0 {
			delete(l.calls, session)
		}
	}
}

// Cancel ends the session's request with id, if it is in flight on this
// replica; it reports whether it was. A session can name only its own
// requests.
func (l *Local) Cancel(session string, id json.RawMessage) bool {
	l.mu.Lock()
	calls := slices.Clone(l.calls[session][idKey(id)])
	l.mu.Unlock()
	for _, c := range calls {
		c.byClient.Store(true)
		c.cancel()
	}
	return len(calls) > 0
}

// EndSession ends what the session has running on this replica, as it was
// deleted (here, or on another replica: Revocations.OnRevoked): its
// requests in flight, those whose client went away included, are
// cancelled, and its open GET streams wake, find it deleted and end.
// Nothing held changes.
func (l *Local) EndSession(session string) {
	l.mu.Lock()
	var calls []*call
	for _, same := range l.calls[session] {
		calls = append(calls, same...)
	}
	if st, ok := l.sessions[session]; ok {
		close(st.changed)
		st.changed = make(chan struct{})
	}
	if w := l.streams[session]; w != nil {
		close(w.changed)
		w.changed = make(chan struct{})
	}
	l.mu.Unlock()
	for _, c := range calls {
		c.cancel()
	}
}

// AwaitReply registers a wait for the client's answer to the request id
// sent on one of the session's streams; forget ends the wait.
func (l *Local) AwaitReply(session string, id json.RawMessage) (reply <-chan json.RawMessage, forget func()) {
	key := callKey(session, id)
	ch := make(chan json.RawMessage, 1)
	l.mu.Lock()
	l.waiters[key] = ch
	l.mu.Unlock()
	return ch, func() {
		l.mu.Lock()
		delete(l.waiters, key)
		l.mu.Unlock()
	}
}

// DeliverReply hands a client's answer ({"result":…} or {"error":…}) to
// its waiter, if it still waits on this replica, and reports whether it
// did. Keys include the session, so one session cannot answer another's
// requests.
func (l *Local) DeliverReply(session string, id json.RawMessage, reply json.RawMessage) bool {
	key := callKey(session, id)
	l.mu.Lock()
	ch, ok := l.waiters[key]
	delete(l.waiters, key)
	l.mu.Unlock()
	if ok {
		ch <- reply
	}
	return ok
}

// MaxDetachedCalls bounds the requests of a session that run on after
// their client's connection dropped (in 2025-11-25 a disconnect is not a
// cancellation): past it, a dropped request ends as a cancelled one
// does, so that a client dropping requests as fast as it sends them
// cannot leave ever more running. MaxDetachedPerPrincipal bounds them
// across a principal's sessions, which cost nothing to open.
const (
	MaxDetachedCalls        = 8
	MaxDetachedPerPrincipal = 4 * MaxDetachedCalls
)

// Detach counts a request of session, which principal (its digest)
// holds, whose client's connection dropped as running on, until release;
// ok is false, and nothing counted, when the session or the principal
// has as many running so already as it may.
func (l *Local) Detach(session, principal string) (release func(), ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.detached[session] >= MaxDetachedCalls || l.detachedBy[principal] >= MaxDetachedPerPrincipal {
		return nil, false
	}
	l.detached[session]++
	l.detachedBy[principal]++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if l.detached[session]--; l.detached[session] <= 0 {
			delete(l.detached, session)
		}
		if l.detachedBy[principal]--; l.detachedBy[principal] <= 0 {
			delete(l.detachedBy, principal)
		}
	}, true
}
