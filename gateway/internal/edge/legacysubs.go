package edge

import (
	"slices"
	"sync"
	"time"
)

// sessionResources remembers the resources each Legacy session subscribed
// to with resources/subscribe. Like the log level, the set cannot travel in
// the sealed session id, so it lives on the replica that received the
// subscribe, and updates reach the session's GET stream only when that
// stream is held by the same replica (deployments with several gateway
// replicas need session affinity for them). The GET stream reopens its
// catalog watch with the new set whenever it changes.
type sessionResources struct {
	mu       sync.Mutex
	sessions map[string]*subscribedResources // by session digest
}

type subscribedResources struct {
	uris    []string
	expires time.Time
	// changed is closed, and replaced, whenever uris changes.
	changed chan struct{}
}

func newSessionResources() *sessionResources {
	return &sessionResources{sessions: map[string]*subscribedResources{}}
}

// entry returns the session's set, creating it, and forgets the sets of
// sessions that have expired. Call with s.mu held.
func (s *sessionResources) entry(session string, expires time.Time) *subscribedResources {
	now := time.Now()
	for k, v := range s.sessions {
		if now.After(v.expires) {
			delete(s.sessions, k)
		}
	}
	e := s.sessions[session]
	if e == nil {
		e = &subscribedResources{expires: expires, changed: make(chan struct{})}
		s.sessions[session] = e
	}
	return e
}

// subscribe adds uri to the session's set; it reports false when the set
// is full.
func (s *sessionResources) subscribe(session, uri string, expires time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entry(session, expires)
	if slices.Contains(e.uris, uri) {
		return true
	}
	if len(e.uris) == maxResourceSubscriptions {
		return false
	}
	e.uris = append(e.uris, uri)
	close(e.changed)
	e.changed = make(chan struct{})
	return true
}

// unsubscribe removes uri from the session's set.
func (s *sessionResources) unsubscribe(session, uri string, expires time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entry(session, expires)
	i := slices.Index(e.uris, uri)
	if i < 0 {
		return
	}
	e.uris = slices.Delete(e.uris, i, i+1)
	close(e.changed)
	e.changed = make(chan struct{})
}

// get returns the session's URIs and a channel closed when they change.
func (s *sessionResources) get(session string, expires time.Time) ([]string, <-chan struct{}) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.entry(session, expires)
	return slices.Clone(e.uris), e.changed
}
