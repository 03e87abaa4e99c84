package backend

import (
	"context"
	"fmt"
	"maps"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// OnResourceUpdated sets f to receive every notifications/resources/updated
// the backend sends. Call it before the first request.
func (c *Client) OnResourceUpdated(f func(uri string)) { c.onUpdated.Store(&f) }

func (c *Client) resourceUpdated(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
	if f := c.onUpdated.Load(); f != nil && req.Params != nil && req.Params.URI != "" {
		(*f)(req.Params.URI)
	}
}

// Subscribe asks the backend for updates of uri. Subscriptions are
// reference counted: only the first one for a URI reaches the backend, and
// they are renewed on every new session.
func (c *Client) Subscribe(ctx context.Context, uri string) error {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	if c.subs[uri] > 0 {
		c.subs[uri]++
		return nil
	}
	// An HTTP error answering this subscription (a 401 or 403: the
	// credential may not watch this resource; a 429 or 503) is the
	// subscription's alone, not an outage that would end the session the
	// others share (sharedRequest).
	_, err := do(sharedRequest(ctx), c, retryIdempotent, c.cfg.Timeout, func(ctx context.Context, s *mcp.ClientSession) (struct{}, error) {
		return struct{}{}, s.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
	})
	if err != nil {
		return err
	}
	c.subs[uri] = 1
	return nil
}

// Unsubscribe drops one reference to uri; the last one unsubscribes at the
// backend.
func (c *Client) Unsubscribe(ctx context.Context, uri string) {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	if c.subs[uri] > 1 {
		c.subs[uri]--
		return
	}
	delete(c.subs, uri)
	c.mu.Lock()
	s := c.session
	c.mu.Unlock()
	if s == nil {
		return // a new session will not renew it
	}
	ctx, cancel := context.WithTimeout(sharedRequest(context.WithoutCancel(ctx)), c.cfg.Timeout)
	defer cancel()
	if err := s.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: uri}); err != nil {
		c.log.Warn("backend unsubscribe failed", "err", c.Redact(err.Error()))
	}
}

// Subscriptions reports how many watchers hold a subscription to uri.
func (c *Client) Subscriptions(uri string) int {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	return c.subs[uri]
}

// AdoptSubscriptions takes over prev's subscriptions, for a client that
// replaces prev for the same backend (a reload changed its settings):
// they are made on this client's session, now if it is open, else as it
// opens; prev's end when prev is closed.
func (c *Client) AdoptSubscriptions(prev *Client) {
	prev.subMu.Lock()
	adopted := maps.Clone(prev.subs)
	prev.subMu.Unlock()
	if len(adopted) == 0 {
		return
	}
	c.subMu.Lock()
	for uri, n := range adopted {
		c.subs[uri] += n
	}
	c.subMu.Unlock()
	c.mu.Lock()
	s := c.session
	c.mu.Unlock()
	if s != nil {
		go c.resubscribe(s)
	}
}

// resubscribe renews every subscription on a new session: the backend
// forgot those of the session that ended.
func (c *Client) resubscribe(s *mcp.ClientSession) {
	c.subMu.Lock()
	defer c.subMu.Unlock()
	for uri := range c.subs {
		ctx, cancel := context.WithTimeout(sharedRequest(context.Background()), c.cfg.Timeout)
		err := s.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
		cancel()
		if err != nil {
			c.log.Warn("backend resubscribe failed", "err", c.Redact(fmt.Sprint(err)))
		}
	}
}
