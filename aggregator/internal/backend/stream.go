package backend

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Notification methods a streamed call relays.
const (
	MethodProgress = "notifications/progress"
	MethodLog      = "notifications/message"
)

// streamProgressToken is the progress token a streamed call sends to the
// backend. The session belongs to that one call, so one fixed token can
// never collide with another caller's; the caller's own token (of any JSON
// type) is put back by whoever relays the notification.
const streamProgressToken = "switchboard-call"

// CallToolStreamed calls a tool on a backend session of its own, opened
// for this call and closed after it, and hands every progress and log
// notification the backend sends meanwhile to emit, in the order the
// backend sent them, before returning the result.
//
// The long-lived session is shared by every caller, and the SDK does not
// say which request a notifications/message belongs to; a session of its
// own is the only exact way to route log messages, and to set a Legacy
// backend's log level (logging/setLevel is per session) without changing
// it for everyone else. The price is a handshake per streamed call
// (server/discover for Modern backends, initialize for Legacy ones), paid
// only by calls that asked for progress or log messages.
//
// progress asks for notifications/progress; logLevel, if not empty, asks
// for notifications/message at that level or above. emit is never called
// after CallToolStreamed returns.
func (c *Client) CallToolStreamed(ctx context.Context, params *mcp.CallToolParams, progress bool, logLevel mcp.LoggingLevel, emit func(method string, params any)) (*mcp.CallToolResult, error) {
	r := relay{redact: func(p any) any { return c.redactNotice(ctx, p) }}
	r.set(Notify{Progress: progress, Level: logLevel, Emit: emit})
	opts := &mcp.ClientOptions{
		Logger:         c.log,
		Capabilities:   &mcp.ClientCapabilities{},
		MultiRoundTrip: &mcp.MultiRoundTripOptions{Disabled: true},
	}
	r.handle(opts)
	client := mcp.NewClient(Implementation, opts)
	serveRoots(client, nil)
	bctx, cancel := context.WithTimeoutCause(ctx, c.budget(ctx), errBudget)
	defer cancel()
	res, err := c.callOnOwnSession(bctx, client, params, progress, logLevel, nil)
	r.set(Notify{})
	if err != nil {
		if errors.Is(context.Cause(bctx), errBudget) {
			err = fmt.Errorf("%w: %w", errBudget, err)
		}
		// Classified in the caller's context: the budget's own end is a
		// timeout, not the caller's deadline.
		return nil, c.classify(ctx, err)
	}
	return c.redactToolResult(ctx, res)
}

// Notify is what the caller of a call on a session of its own (streamed,
// or held for the client's input) wants of the backend's notifications:
// progress, and log messages at or above Level (none if empty), handed to
// Emit in the order the backend sent them.
type Notify struct {
	Progress bool
	Level    mcp.LoggingLevel
	Emit     func(method string, params any)
}

// relay hands the notifications of a session of its own to the caller it
// is set to, as that caller's Notify asks. Set to another caller (the next
// round of a held call) or to none, it never calls the one before again;
// with none (a held call waiting for its client's input) it drops them.
type relay struct {
	// redact cuts the backend's secrets out of a notification's params
	// (Client.redactNotice with the call's context, which names the call's
	// own Authorization); nil leaves them.
	redact func(params any) any

	mu sync.Mutex
	to Notify
}

func (r *relay) set(n Notify) {
	r.mu.Lock()
	r.to = n
	r.mu.Unlock()
}

// handle makes the sessions of a client of opts hand their notifications
// to r.
func (r *relay) handle(opts *mcp.ClientOptions) {
	opts.ProgressNotificationHandler = func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
		if p := req.Params; p != nil && p.ProgressToken == streamProgressToken {
			r.emit(MethodProgress, p, func(n Notify) bool { return n.Progress })
		}
	}
	opts.LoggingMessageHandler = func(_ context.Context, req *mcp.LoggingMessageRequest) {
		if p := req.Params; p != nil {
			r.emit(MethodLog, p, func(n Notify) bool { return n.Level != "" && LevelAtLeast(p.Level, n.Level) })
		}
	}
}

func (r *relay) emit(method string, p any, wanted func(Notify) bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.to.Emit != nil && wanted(r.to) {
		if r.redact != nil {
			p = r.redact(p)
		}
		r.to.Emit(method, p)
	}
}

func (c *Client) callOnOwnSession(ctx context.Context, client *mcp.Client, params *mcp.CallToolParams, progress bool, logLevel mcp.LoggingLevel, opened func(*mcp.ClientSession)) (*mcp.CallToolResult, error) {
	s, err := c.connect(ctx, client, false)
	if err != nil {
		return nil, err
	}
	if opened != nil {
		opened(s)
	}
	modern := s.InitializeResult().ProtocolVersion >= ProtocolModern
	p := *params
	p.Meta = mcp.Meta{}
	for k, v := range params.Meta {
		p.Meta[k] = v
	}
	// SEP-414: the trace context in _meta too, as the raw path sends it.
	for k, v := range traceMeta(ctx) {
		p.Meta[k] = v
	}
	if progress {
		p.Meta["progressToken"] = streamProgressToken
	}
	if logLevel != "" {
		if modern {
			p.Meta[mcp.MetaKeyLogLevel] = logLevel
		} else if caps := s.InitializeResult().Capabilities; caps != nil && caps.Logging != nil {
			if err := s.SetLoggingLevel(ctx, &mcp.SetLoggingLevelParams{Level: logLevel}); err != nil {
				closeOwnSession(ctx, s, err)
				return nil, err
			}
		}
	}
	res, err := s.CallTool(ctx, &p)
	// Close returns once the session's queued notifications were handled,
	// so every notification sent before the result has been relayed.
	closeOwnSession(ctx, s, err)
	return res, err
}

// closeOwnSession closes a session opened for one call (CallToolStreamed,
// CallToolAsking) once its last request returned err. When that request
// failed because ctx ended, go-sdk tells the backend with
// notifications/cancelled from a goroutine of its own, which a session
// already closing drops unsent; and a Legacy backend's handler does not
// end with its session (a go-sdk backend answers the DELETE only once the
// handler returns). Closing at once would leave the call running at the
// backend and hold the caller up to go-sdk's 5s bound on the DELETE, so
// the session is closed after the notification had its time instead.
func closeOwnSession(ctx context.Context, s *mcp.ClientSession, err error) {
	if err != nil && ctx.Err() != nil {
		time.AfterFunc(cancelNotifyTimeout, func() { _ = s.Close() })
		return
	}
	_ = s.Close()
}

// logLevels are MCP's log levels, lowest first (RFC 5424 severities).
var logLevels = map[mcp.LoggingLevel]int{
	"debug": 0, "info": 1, "notice": 2, "warning": 3, "error": 4, "critical": 5, "alert": 6, "emergency": 7,
}

// ValidLevel reports whether l is one of MCP's log levels.
func ValidLevel(l mcp.LoggingLevel) bool {
	_, ok := logLevels[l]
	return ok
}

// LevelAtLeast reports whether a message at level l passes a min filter.
// Unknown levels pass, so a backend's message is not lost to a typo.
func LevelAtLeast(l, min mcp.LoggingLevel) bool {
	a, okA := logLevels[l]
	b, okB := logLevels[min]
	return !okA || !okB || a >= b
}
