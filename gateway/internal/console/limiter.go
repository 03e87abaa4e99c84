package console

import (
	"net"
	"net/http"
	"sync"
	"time"
)

// Login attempts are limited per client address: after maxFailures
// attempts not followed by a success within failureWindow, that address's
// logins are refused (429) until the window
// has passed. The table is bounded (maxFailureClients); when it is full,
// every address not in it shares one entry, so a flood from many
// addresses slows down all unknown ones instead of growing memory.
const (
	maxFailures       = 5
	failureWindow     = time.Minute
	maxFailureClients = 4096
	// sharedClient is the entry of the addresses that found the table full.
	sharedClient = "*"
)

type failureLimiter struct {
	mu      sync.Mutex
	clients map[string]*failures
	now     func() time.Time
}

type failures struct {
	count int
	since time.Time
}

func newFailureLimiter() *failureLimiter {
	return &failureLimiter{clients: map[string]*failures{}, now: time.Now}
}

// clientOf is the address logins are counted by: the peer's IP. A proxy
// in front of the ops port would make all operators one client; the ops
// port is meant to be reached directly (port-forward, the pod network).
func clientOf(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// entry returns the live entry for client, or nil; expired entries are
// dropped. Called with mu held.
func (l *failureLimiter) entry(client string, now time.Time) *failures {
	f := l.clients[client]
	if f != nil && now.Sub(f.since) >= failureWindow {
		delete(l.clients, client)
		return nil
	}
	return f
}

// attempt reserves one login attempt of client, or reports that client
// may not try again yet, and for how long. The check and the count are
// one critical section, so concurrent guesses cannot all pass the check
// before any of them is counted: every attempt counts until a success
// forgets them (succeeded).
func (l *failureLimiter) attempt(client string) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	f := l.entry(client, now)
	if f == nil {
		if len(l.clients) >= maxFailureClients {
			for k := range l.clients {
				l.entry(k, now) // prune the expired
			}
		}
		if len(l.clients) >= maxFailureClients {
			client = sharedClient
			f = l.entry(client, now)
		}
	}
	if f == nil {
		f = &failures{since: now}
		l.clients[client] = f
	}
	if f.count >= maxFailures {
		return failureWindow - now.Sub(f.since), true
	}
	f.count++
	return 0, false
}

// succeeded forgets client's failures.
func (l *failureLimiter) succeeded(client string) {
	l.mu.Lock()
	delete(l.clients, client)
	l.mu.Unlock()
}
