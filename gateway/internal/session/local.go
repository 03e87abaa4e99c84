package session

import (
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"
)

// A sealed session id is minted at initialize and cannot carry state the
// session acquires later. What a Legacy session sets afterwards (its log
// level, its resource subscriptions) is held in Local: with an indexer, as
// this replica's copy of what every replica recorded there (see Shared and
// mirror.go), so any replica serves it; without one, as what this replica
// received. The requests in flight and the input requests waiting for
// answers are this replica's own (calls.go); an answer that reaches
// another replica is relayed to this one through the indexer (Shared).
//
// All of it is chosen by clients, so all of it is bounded (Limits): per
// session (how many URIs, how long each), per principal (how many
// sessions with state, how many bytes) and in total (bytes, every session
// with state counting a fixed overhead, so the number of sessions is
// bounded too). A change that would pass a bound is refused whole, with an
// error the caller maps to the client's answer; what is held stays as it
// was. State is dropped when its session expires or is deleted.

// MaxSubscriptions bounds the resource URIs one session or listen stream
// subscribes to (the aggregator applies the same bound).
const MaxSubscriptions = 256

// Limits bound the state Local holds (gateway.sessions in the
// configuration). Every limit must be positive.
type Limits struct {
	// Subscriptions per session, at most MaxSubscriptions.
	Subscriptions int
	// URIBytes is the length of one subscribed URI.
	URIBytes int
	// PerPrincipal is how many sessions of one principal may hold state.
	PerPrincipal int
	// PrincipalBytes is the state of one principal's sessions together.
	PrincipalBytes int64
	// TotalBytes is the state of all sessions together.
	TotalBytes int64
}

// Errors of a change that would pass a bound.
var (
	ErrTooManySubscriptions = errors.New("too many resource subscriptions for one session")
	ErrURITooLong           = errors.New("resource URI too long")
	ErrPrincipalFull        = errors.New("this principal's sessions hold as much state as they may on this replica")
	ErrFull                 = errors.New("this replica holds as much session state as it may")
)

// What held state costs besides its own bytes: a session's map entry,
// digests, struct and channel, and a URI's slice element and allocation
// rounding. Estimates, erring high, so that the bytes bounds are bounds on
// memory.
const (
	sessionOverhead = 384
	uriOverhead     = 32
)

// How often expired state is looked for: at most once a minute on a
// change, and at most once a second when a bound is reached.
const (
	statePruneEvery    = time.Minute
	statePruneWhenFull = time.Second
)

// Local is one replica's state of its Legacy sessions.
type Local struct {
	limits Limits
	now    func() time.Time

	mu         sync.Mutex
	sessions   map[string]*sessionState // session digest -> state
	principals map[string]*usage        // principal digest -> what its sessions hold
	bytes      int64                    // of every session
	pruned     time.Time
	// streams are the sessions' open GET streams (OpenStream).
	streams map[string]*streamWatch
	// calls are the requests in flight, by session and id, and waiters
	// the input requests waiting for their answers (calls.go).
	calls   map[string]map[string][]*call
	waiters map[string]chan json.RawMessage
	// detached counts each session's requests running on after their
	// client's connection dropped (calls.go).
	detached map[string]int
	// detachedBy counts them by principal digest.
	detachedBy map[string]int
	// forgotten are the sessions Forget dropped lately (mirror.go).
	forgotten map[string]time.Time
}

// streamWatch is a session's open GET streams: changed is closed, and
// replaced, when the session gets state.
type streamWatch struct {
	open    int
	changed chan struct{}
	// end ends the newest open stream (nil when it gave none), the
	// gen-th opened.
	end func()
	gen uint64
}

// usage is what one principal's sessions hold.
type usage struct {
	// key is the principal's digest, the one copy the map and every
	// session of the principal share.
	key      string
	sessions int
	bytes    int64
}

type sessionState struct {
	owner   *usage
	expires time.Time
	level   string
	uris    []string
	// bytes is what this state costs, overhead included.
	bytes int64
	// changed is closed, and replaced, whenever uris changes.
	changed chan struct{}
	// version is the indexer's version of a copy held from it (Mirror);
	// 0 for state changed on this replica alone.
	version uint64
}

// NewLocal returns empty session state bounded by limits.
func NewLocal(limits Limits) *Local {
	limits.Subscriptions = min(limits.Subscriptions, MaxSubscriptions)
	return &Local{limits: limits, now: time.Now, sessions: map[string]*sessionState{}, principals: map[string]*usage{},
		streams: map[string]*streamWatch{}, calls: map[string]map[string][]*call{}, waiters: map[string]chan json.RawMessage{}, detached: map[string]int{}, detachedBy: map[string]int{},
		forgotten: map[string]time.Time{}}
}

// OpenStream registers an open GET stream of the session, until done is
// called, so that the stream hears of the session's first subscription
// (Subscriptions) even though the session had no state when it opened.
// It holds no state itself: what it costs lasts as long as the stream,
// and open streams are bounded where they are served.
//
// A session's messages go on one GET stream on a replica: 2025-11-25
// sends each on one stream only, never on several. end (if not nil) takes
// them from this stream; opening another does so for the one before (a
// client that opens a second stream has lost the first, or reconnects).
func (l *Local) OpenStream(session string, end func()) (done func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.streams[session]
	if w == nil {
		w = &streamWatch{changed: make(chan struct{})}
		l.streams[strings.Clone(session)] = w
	}
	if w.end != nil {
		w.end()
	}
	w.open++
	w.gen++
	mine := w.gen
	w.end = end
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if w.gen == mine {
			w.end = nil
		}
		if w.open--; w.open == 0 {
			delete(l.streams, session)
		}
	}
}

// SetLogLevel records level for the session until it expires.
func (l *Local) SetLogLevel(session, principal, level string, expires time.Time) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	st, created, err := l.state(session, principal, expires)
	if err != nil {
		return err
	}
	if err := l.charge(st, int64(len(level)-len(st.level))); err != nil {
		l.dropIfEmpty(session, st, created)
		return err
	}
	st.level = strings.Clone(level)
	if !st.holds() {
		l.drop(session, st) // no state left (see Unsubscribe)
	}
	return nil
}

// LogLevel is the level the session set on this replica, or "".
func (l *Local) LogLevel(session string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	st, ok := l.sessions[session]
	if !ok || !l.now().Before(st.expires) {
		return ""
	}
	return st.level
}

// Subscribe adds uri to the session's set; subscribing again to a URI in
// the set changes nothing.
func (l *Local) Subscribe(session, principal, uri string, expires time.Time) error {
	if len(uri) > l.limits.URIBytes {
		return ErrURITooLong
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	st, created, err := l.state(session, principal, expires)
	if err != nil {
		return err
	}
	if slices.Contains(st.uris, uri) {
		return nil
	}
	if len(st.uris) >= l.limits.Subscriptions {
		return ErrTooManySubscriptions
	}
	if err := l.charge(st, int64(len(uri)+uriOverhead)); err != nil {
		l.dropIfEmpty(session, st, created)
		return err
	}
	st.uris = append(st.uris, strings.Clone(uri))
	close(st.changed)
	st.changed = make(chan struct{})
	return nil
}

// Unsubscribe removes uri from the session's set.
func (l *Local) Unsubscribe(session, uri string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	st, ok := l.sessions[session]
	if !ok {
		return
	}
	i := slices.Index(st.uris, uri)
	if i < 0 {
		return
	}
	st.uris = slices.Delete(st.uris, i, i+1)
	_ = l.charge(st, -int64(len(uri)+uriOverhead))
	close(st.changed)
	st.changed = make(chan struct{})
	if !st.holds() {
		// A session holding no state costs nothing: it no longer counts
		// against the principal's sessions (its open GET stream, woken
		// above, finds it without state).
		l.drop(session, st)
	}
}

// Subscriptions returns the session's URIs and a channel closed when they
// change. A session without state has none; its channel is closed when it
// gets some, if a GET stream of it is open (OpenStream), and is nil
// otherwise.
func (l *Local) Subscriptions(session string, _ time.Time) ([]string, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st, ok := l.sessions[session]; ok {
		return slices.Clone(st.uris), st.changed
	}
	if w := l.streams[session]; w != nil {
		return nil, w.changed
	}
	return nil, nil
}

// Forget drops the session's state (it was deleted); a GET stream that
// follows its subscriptions hears of the change.
func (l *Local) Forget(session string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st, ok := l.sessions[session]; ok {
		l.drop(session, st)
	}
	l.tombstone(session)
	if w := l.streams[session]; w != nil {
		// Its open GET streams wake and find the session deleted.
		close(w.changed)
		w.changed = make(chan struct{})
	}
}

// StateBytes is what the session's state costs on this replica now (0
// for none).
func (l *Local) StateBytes(session string) int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st, ok := l.sessions[session]; ok {
		return st.bytes
	}
	return 0
}

// Held reports what all sessions hold on this replica: how many have
// state, and its bytes.
func (l *Local) Held() (sessions int, bytes int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.sessions), l.bytes
}

// state returns the session's state, creating it within the bounds.
// created says it is new. Call with l.mu held.
func (l *Local) state(session, principal string, expires time.Time) (st *sessionState, created bool, err error) {
	now := l.now()
	if now.Sub(l.pruned) >= statePruneEvery {
		l.prune(now)
	}
	if st, ok := l.sessions[session]; ok {
		return st, false, nil
	}
	if err := l.admit(principal, sessionOverhead); err != nil {
		if now.Sub(l.pruned) < statePruneWhenFull {
			return nil, false, err
		}
		l.prune(now)
		if err := l.admit(principal, sessionOverhead); err != nil {
			return nil, false, err
		}
	}
	u, ok := l.principals[principal]
	if !ok {
		u = &usage{key: strings.Clone(principal)}
		l.principals[u.key] = u
	}
	u.sessions++
	st = &sessionState{owner: u, expires: expires, changed: make(chan struct{})}
	l.sessions[strings.Clone(session)] = st
	_ = l.charge(st, sessionOverhead)
	if w := l.streams[session]; w != nil {
		// The session's open GET streams follow its state from now on.
		close(w.changed)
		w.changed = make(chan struct{})
	}
	return st, true, nil
}

// admit checks that principal may have a new session holding cost bytes.
func (l *Local) admit(principal string, cost int64) error {
	u := l.principals[principal]
	if u != nil && (u.sessions >= l.limits.PerPrincipal || u.bytes+cost > l.limits.PrincipalBytes) {
		return ErrPrincipalFull
	}
	if l.bytes+cost > l.limits.TotalBytes {
		return ErrFull
	}
	return nil
}

// charge adds delta bytes to st's cost, refusing growth past the
// principal's or the replica's bound.
func (l *Local) charge(st *sessionState, delta int64) error {
	u := st.owner
	if delta > 0 {
		if u.bytes+delta > l.limits.PrincipalBytes {
			return ErrPrincipalFull
		}
		if l.bytes+delta > l.limits.TotalBytes {
			return ErrFull
		}
	}
	st.bytes += delta
	u.bytes += delta
	l.bytes += delta
	return nil
}

// holds reports whether the session holds state: a subscription or a log
// level.
func (st *sessionState) holds() bool { return len(st.uris) > 0 || st.level != "" }

// dropIfEmpty drops state created for a change that was then refused.
func (l *Local) dropIfEmpty(session string, st *sessionState, created bool) {
	if created && !st.holds() {
		l.drop(session, st)
	}
}

// drop forgets one session's state. Call with l.mu held.
func (l *Local) drop(session string, st *sessionState) {
	delete(l.sessions, session)
	u := st.owner
	u.sessions--
	u.bytes -= st.bytes
	l.bytes -= st.bytes
	if u.sessions == 0 {
		delete(l.principals, u.key)
	}
	close(st.changed)
}

// prune drops the state of expired sessions. Call with l.mu held.
func (l *Local) prune(now time.Time) {
	l.pruned = now
	for session, st := range l.sessions {
		if !now.Before(st.expires) {
			l.drop(session, st)
		}
	}
}
