// The pool of idle connections: taken most recent first, bounded per host
// and in all, swept once idle for longer than IdleTimeout.

package h1

import (
	"context"
	"net/url"
	"time"
)

// conn is an idle connection for key that is still good, or a new one.
func (t *Transport) conn(ctx context.Context, u *url.URL, key string) (*conn, bool, error) {
	now := time.Now()
	for {
		c := t.takeIdle(key)
		if c == nil {
			break
		}
		if now.Sub(c.idleSince) < t.cfg.IdleTimeout && c.alive() {
			return c, true, nil
		}
		c.close()
	}
	c, err := t.dial(ctx, u, key)
	return c, false, err
}

func (t *Transport) takeIdle(key string) *conn {
	t.mu.Lock()
	defer t.mu.Unlock()
	stack := t.idle[key]
	if len(stack) == 0 {
		return nil
	}
	c := stack[len(stack)-1]
	stack[len(stack)-1] = nil
	t.idle[key] = stack[:len(stack)-1]
	t.idleCount--
	return c
}

// Idle is the number of idle connections the transport holds.
func (t *Transport) Idle() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.idleCount
}

// put keeps c for its next request, or closes it past the bounds.
func (t *Transport) put(c *conn) {
	t.mu.Lock()
	// Stamped under the lock, so that each stack stays in the order of use
	// that sweep relies on.
	c.idleSince = time.Now()
	if c.generation != t.generation || len(t.idle[c.key]) >= t.cfg.MaxIdlePerHost || t.idleCount >= t.cfg.MaxIdle {
		t.mu.Unlock()
		c.close()
		return
	}
	if t.idle == nil {
		t.idle = map[string][]*conn{}
	}
	t.idle[c.key] = append(t.idle[c.key], c)
	t.idleCount++
	start := !t.janitor
	t.janitor = true
	t.mu.Unlock()
	if start {
		go t.sweep()
	}
}

// sweep closes connections idle for longer than IdleTimeout, and ends
// when none is left.
func (t *Transport) sweep() {
	tick := time.NewTicker(max(t.cfg.IdleTimeout/2, time.Millisecond))
	defer tick.Stop()
	for range tick.C {
		cutoff := time.Now().Add(-t.cfg.IdleTimeout)
		var expired []*conn
		t.mu.Lock()
		for key, stack := range t.idle {
			// The stack is in the order of use: the oldest first.
			n := 0
			for n < len(stack) && stack[n].idleSince.Before(cutoff) {
				n++
			}
			expired = append(expired, stack[:n]...)
			if n == len(stack) {
				delete(t.idle, key)
			} else {
				t.idle[key] = append(stack[:0], stack[n:]...)
			}
			t.idleCount -= n
		}
		done := t.idleCount == 0
		if done {
			t.janitor = false
		}
		t.mu.Unlock()
		for _, c := range expired {
			c.close()
		}
		if done {
			return
		}
	}
}

// CloseIdleConnections closes every idle connection.
//
// Connections in use then are closed when their exchange ends.
func (t *Transport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.idleCount = 0
	t.generation++
	t.mu.Unlock()
	for _, stack := range idle {
		for _, c := range stack {
			c.close()
		}
	}
	if t.cfg.Fallback != nil {
		if f, ok := t.cfg.Fallback.(interface{ CloseIdleConnections() }); ok {
			f.CloseIdleConnections()
		}
	}
}
