package backend

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// Plain calls to a dual-era backend run in a Legacy session.
//
// A backend configured as protocol auto is reached Modern first, and its
// main session (listings, list_changed, subscriptions, probes) stays Modern.
// But a call that carries no per-request state beyond its arguments and a
// progress token — the client declared neither elicitation nor sampling
// and wants no log messages — means the same in a shared Legacy session
// (as every call to a Legacy-only backend does), and a go-sdk backend
// spends about
// half the CPU on it (250–430 µs against 550–700 µs for a stateless Modern
// request: no per-request session set-up). Such calls go on a second,
// Legacy session of the backend's, opened in the background; a call that
// needs per-request state, a backend that refuses Legacy and the time
// until that session is open keep the Modern path. The session declares no
// client capabilities, so a backend never asks it for input; one it asks
// anyway is refused (refuseRequest).
//
// roots does not keep a call Modern: go-sdk clients declare it by default,
// so counting it would leave almost no plain calls. A dual-era backend's
// tool then sees a client without roots, exactly as a Legacy-only
// backend's tools do on the aggregator's shared session; a backend whose
// tools need the caller's roots is pinned to 2026-07-28.
type plainCalls struct {
	session    *mcp.ClientSession
	connecting bool
	// retryAt is when a failed or refused connect may be tried again.
	retryAt time.Time
}

// plainRetry is how long after a failed Legacy connect plain calls stay on
// the Modern path; a backend that is Modern only is asked again this often.
const plainRetry = 5 * time.Minute

// isPlain reports whether call means the same in a shared Legacy session.
// The capability test is textual and errs towards Modern: a member named
// elicitation or sampling anywhere in the object keeps the call Modern.
// A call that declares the tasks extension, and a request about a task,
// are the extension's, which a Legacy session does not have.
func isPlain(call *Call) bool {
	if call.LogLevel != "" || strings.HasPrefix(call.Method, "tasks/") {
		return false
	}
	caps := call.ClientCapabilities
	return !bytes.Contains(caps, []byte(`"elicitation"`)) && !bytes.Contains(caps, []byte(`"sampling"`)) &&
		!bytes.Contains(caps, []byte(`"`+mcpspec.ExtensionTasks+`"`))
}

// plainSession returns the Legacy session for plain calls, or nil while
// there is none; it starts opening one when allowed.
func (c *Client) plainSession() *mcp.ClientSession {
	if c.cfg.Protocol != ProtocolAuto {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	p := &c.plain
	if p.session != nil || p.connecting || time.Now().Before(p.retryAt) || c.session == nil ||
		c.session.InitializeResult().ProtocolVersion < ProtocolModern {
		// A backend whose main session is already Legacy needs no second one.
		return p.session
	}
	p.connecting = true
	go c.openPlain()
	return nil
}

func (c *Client) openPlain() {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeout)
	defer cancel()
	s, err := c.probe.Connect(ctx, c.transport(false), &mcp.ClientSessionOptions{ProtocolVersion: ProtocolLegacy})
	if err == nil && s.InitializeResult().ProtocolVersion >= ProtocolModern {
		_ = s.Close()
		err = errors.New("the backend did not negotiate a Legacy session")
	}
	c.mu.Lock()
	c.plain.connecting = false
	if err != nil {
		c.plain.retryAt = time.Now().Add(plainRetry)
		c.mu.Unlock()
		c.log.Info("plain calls stay on the Modern path", "err", c.Redact(err.Error()))
		return
	}
	c.plain.session = s
	c.mu.Unlock()
	c.log.Info("plain calls use a Legacy session", "protocol", s.InitializeResult().ProtocolVersion)
	go func() {
		_ = s.Wait()
		c.dropPlain(s)
	}()
}

// dropPlain forgets the plain-call session s; the next plain call opens a
// new one in the background.
func (c *Client) dropPlain(s *mcp.ClientSession) {
	c.mu.Lock()
	if c.plain.session == s {
		c.plain.session = nil
	}
	c.mu.Unlock()
	go func() { _ = s.Close() }()
}

// callPlain runs call in the plain-call session if there is one. handled
// is false when the call must take the usual path: there is no such
// session, or the backend forgot it before the call ran.
func (c *Client) callPlain(ctx context.Context, call *Call) (res *Result, handled bool, err error) {
	if !isPlain(call) {
		return nil, false, nil
	}
	s := c.plainSession()
	if s == nil {
		return nil, false, nil
	}
	res, err = bounded(ctx, c, func(ctx context.Context) (*Result, error) { return c.exchange(ctx, s, call) })
	if errors.Is(err, mcp.ErrSessionMissing) {
		// The call did not run: send it the usual way.
		c.dropPlain(s)
		return nil, false, nil
	}
	if err != nil {
		classified := c.classify(ctx, err)
		if errors.Is(classified, ErrUnavailable) && !answered(err) {
			c.dropPlain(s)
		}
		return nil, true, classified
	}
	return res, true, nil
}

func (c *Client) closePlain() {
	c.mu.Lock()
	s := c.plain.session
	c.plain.session = nil
	c.mu.Unlock()
	if s != nil {
		_ = s.Close()
	}
}
