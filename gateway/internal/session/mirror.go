package session

import (
	"slices"
	"strings"
	"time"
)

// With an indexer, the state of every Legacy session lives in its database
// (see Shared), and Local is this replica's copy of all of it, kept
// current by the indexer's WatchSessionEvents stream: a change is checked
// against this replica's bounds first (Admit), recorded in the indexer,
// and then held here (Mirror) as every other replica holds it. Copies from
// the indexer are always held: the indexer applies the same bounds to
// every session together, so what it streams fits them (up to changes in
// flight).

// Admit reports whether setting level (when uri is empty) or subscribing to
// uri would pass this replica's bounds, changing nothing.
func (l *Local) Admit(session, principal, level, uri string) error {
	if len(uri) > l.limits.URIBytes {
		return ErrURITooLong
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	st, ok := l.sessions[session]
	if !ok {
		cost := int64(sessionOverhead + len(level))
		if uri != "" {
			cost += int64(len(uri) + uriOverhead)
		}
		err := l.admit(principal, cost)
		if err != nil && l.now().Sub(l.pruned) >= statePruneWhenFull {
			l.prune(l.now())
			err = l.admit(principal, cost)
		}
		return err
	}
	var delta int64
	if uri != "" {
		if slices.Contains(st.uris, uri) {
			return nil
		}
		if len(st.uris) >= l.limits.Subscriptions {
			return ErrTooManySubscriptions
		}
		delta = int64(len(uri) + uriOverhead)
	} else {
		delta = int64(len(level) - len(st.level))
	}
	if delta > 0 && st.owner.bytes+delta > l.limits.PrincipalBytes {
		return ErrPrincipalFull
	}
	if delta > 0 && l.bytes+delta > l.limits.TotalBytes {
		return ErrFull
	}
	return nil
}

// A forgotten session (deleted or expired) is remembered for
// tombstoneTTL, at most maxTombstones of them, so that a copy of its state
// sent before it went (an UpdateSessionState answer, or an event still in
// flight) does not bring it back.
const (
	tombstoneTTL  = 5 * time.Minute
	maxTombstones = 10_000
)

// tombstone remembers that session was forgotten. Call with l.mu held.
func (l *Local) tombstone(session string) {
	now := l.now()
	if len(l.forgotten) >= maxTombstones {
		for s, at := range l.forgotten {
			if now.Sub(at) >= tombstoneTTL {
				delete(l.forgotten, s)
			}
		}
	}
	for s := range l.forgotten {
		if len(l.forgotten) < maxTombstones {
			break
		}
		delete(l.forgotten, s) // still full: any one goes
	}
	l.forgotten[strings.Clone(session)] = now
}

// forgottenLately reports whether session was forgotten within
// tombstoneTTL. Call with l.mu held.
func (l *Local) forgottenLately(session string, now time.Time) bool {
	at, ok := l.forgotten[session]
	if ok && now.Sub(at) >= tombstoneTTL {
		delete(l.forgotten, session)
		return false
	}
	return ok
}

// MirroredState is a session's state as the indexer holds it.
type MirroredState struct {
	Session, Principal string
	Level              string
	URIs               []string
	Expires            time.Time
	// Version orders the copies of one session's state: an older one
	// never replaces a newer.
	Version uint64
}

// Mirror holds the indexer's copy of a session's state, unless a newer
// one is held or the session was forgotten lately; a GET stream following
// the session hears of a change of its URIs.
func (l *Local) Mirror(m MirroredState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	if l.forgottenLately(m.Session, now) {
		return
	}
	if now.Sub(l.pruned) >= statePruneEvery {
		l.prune(now)
	}
	st, ok := l.sessions[m.Session]
	if ok && st.owner.key == m.Principal {
		// A session's expiry is sealed in its id and never moves: of the
		// copies of its state, the earliest expiry holds, whichever
		// version came first (this replica's own, which Shared passes
		// with the indexer's answer, over a later one an indexer sent).
		if st.expires.Before(m.Expires) {
			m.Expires = st.expires
		}
		st.expires = m.Expires
	}
	if ok && m.Version <= st.version {
		return
	}
	if !now.Before(m.Expires) {
		if ok {
			l.drop(m.Session, st)
		}
		return
	}
	if !ok || st.owner.key != m.Principal {
		if ok {
			l.drop(m.Session, st)
		}
		u := l.principals[m.Principal]
		if u == nil {
			u = &usage{key: strings.Clone(m.Principal)}
			l.principals[u.key] = u
		}
		u.sessions++
		st = &sessionState{owner: u, changed: make(chan struct{})}
		l.sessions[strings.Clone(m.Session)] = st
		l.adjust(st, sessionOverhead)
		if w := l.streams[m.Session]; w != nil {
			close(w.changed)
			w.changed = make(chan struct{})
		}
	}
	cost := int64(sessionOverhead + len(m.Level))
	for _, u := range m.URIs {
		cost += int64(len(u) + uriOverhead)
	}
	l.adjust(st, cost-st.bytes)
	changed := !slices.Equal(st.uris, m.URIs)
	st.level, st.expires, st.version = strings.Clone(m.Level), m.Expires, m.Version
	if changed {
		st.uris = make([]string, len(m.URIs))
		for i, u := range m.URIs {
			st.uris[i] = strings.Clone(u)
		}
		close(st.changed)
		st.changed = make(chan struct{})
	}
}

// Retain drops the copies from the indexer of every session not in keep:
// after a new snapshot, those are gone.
func (l *Local) Retain(keep map[string]struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for session, st := range l.sessions {
		if _, ok := keep[session]; !ok && st.version > 0 {
			l.drop(session, st)
			if w := l.streams[session]; w != nil {
				close(w.changed)
				w.changed = make(chan struct{})
			}
		}
	}
}

// adjust adds delta bytes to st's cost without a bound. Call with l.mu
// held.
func (l *Local) adjust(st *sessionState, delta int64) {
	st.bytes += delta
	st.owner.bytes += delta
	l.bytes += delta
}
