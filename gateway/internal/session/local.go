package session

import (
	"encoding/json"
	"slices"
	"sync"
	"time"
)

// A sealed session id is minted at initialize and cannot carry state the
// session acquires later. What a Legacy session sets afterwards (its log
// level, its resource subscriptions) and the answers to input requests in
// flight therefore live on the replica that received them, in Local:
// deployments with several gateway replicas need session affinity for
// these three features only; everything else works on any replica.

// MaxSubscriptions bounds the resource URIs one session or listen stream
// subscribes to (the aggregator applies the same bound).
const MaxSubscriptions = 256

// Local is one replica's state of its Legacy sessions.
type Local struct {
	mu        sync.Mutex
	logLevels map[string]logLevel      // session digest -> level
	resources map[string]*subscription // session digest -> subscribed URIs
	waiters   map[string]chan json.RawMessage
}

type logLevel struct {
	level   string
	expires time.Time
}

type subscription struct {
	uris    []string
	expires time.Time
	// changed is closed, and replaced, whenever uris changes.
	changed chan struct{}
}

// NewLocal returns empty session state.
func NewLocal() *Local {
	return &Local{logLevels: map[string]logLevel{}, resources: map[string]*subscription{}, waiters: map[string]chan json.RawMessage{}}
}

// SetLogLevel records level for the session until it expires, and forgets
// the levels of sessions that have expired.
func (l *Local) SetLogLevel(session, level string, expires time.Time) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, v := range l.logLevels {
		if now.After(v.expires) {
			delete(l.logLevels, k)
		}
	}
	l.logLevels[session] = logLevel{level: level, expires: expires}
}

// LogLevel is the level the session set on this replica, or "".
func (l *Local) LogLevel(session string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	v, ok := l.logLevels[session]
	if !ok || time.Now().After(v.expires) {
		return ""
	}
	return v.level
}

// entry returns the session's subscriptions, creating them, and forgets
// those of sessions that have expired. Call with l.mu held.
func (l *Local) entry(session string, expires time.Time) *subscription {
	now := time.Now()
	for k, v := range l.resources {
		if now.After(v.expires) {
			delete(l.resources, k)
		}
	}
	e := l.resources[session]
	if e == nil {
		e = &subscription{expires: expires, changed: make(chan struct{})}
		l.resources[session] = e
	}
	return e
}

// Subscribe adds uri to the session's set; it reports false when the set
// is full.
func (l *Local) Subscribe(session, uri string, expires time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entry(session, expires)
	if slices.Contains(e.uris, uri) {
		return true
	}
	if len(e.uris) == MaxSubscriptions {
		return false
	}
	e.uris = append(e.uris, uri)
	close(e.changed)
	e.changed = make(chan struct{})
	return true
}

// Unsubscribe removes uri from the session's set.
func (l *Local) Unsubscribe(session, uri string, expires time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entry(session, expires)
	i := slices.Index(e.uris, uri)
	if i < 0 {
		return
	}
	e.uris = slices.Delete(e.uris, i, i+1)
	close(e.changed)
	e.changed = make(chan struct{})
}

// Subscriptions returns the session's URIs and a channel closed when they
// change.
func (l *Local) Subscriptions(session string, expires time.Time) ([]string, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.entry(session, expires)
	return slices.Clone(e.uris), e.changed
}

func replyKey(session string, id json.RawMessage) string { return session + "\x00" + string(id) }

// AwaitReply registers a wait for the client's answer to the request id
// sent on one of the session's streams; forget ends the wait.
func (l *Local) AwaitReply(session string, id json.RawMessage) (reply <-chan json.RawMessage, forget func()) {
	key := replyKey(session, id)
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
// its waiter, if it still waits on this replica. Keys include the session,
// so one session cannot answer another's requests.
func (l *Local) DeliverReply(session string, id json.RawMessage, reply json.RawMessage) {
	key := replyKey(session, id)
	l.mu.Lock()
	ch, ok := l.waiters[key]
	delete(l.waiters, key)
	l.mu.Unlock()
	if ok {
		ch <- reply
	}
}
