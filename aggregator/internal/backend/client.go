// Package backend talks to one backend MCP server.
//
// A Client keeps one long-lived go-sdk MCP session per backend (the
// handshake, listings, list_changed, subscriptions, probes) over a pooled,
// keep-alive HTTP transport, and re-connects when the session breaks, so a
// call never pays for a new TCP connection or a new handshake. Calls,
// reads, prompt gets and completions go on the raw path (raw.go), their
// bytes passed through untouched; a Legacy backend's call that may ask the
// client for input is held across the client's retry (held.go), and a
// streamed call that wants a Legacy backend's log messages runs on a
// session of its own (stream.go). It applies the backend's credentials
// (callercred.go, oauth.go), follows list cursors to the end, turns
// failures into the typed errors of this package, and tracks the backend's
// health from probes and listings.
package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/stdio"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// Client is the aggregator's connection to one backend. It is safe for
// concurrent use.
type Client struct {
	cfg Config
	// tokens obtains the OAuth modes' tokens (oauth.go); nil otherwise.
	tokens   *tokenSource
	log      *slog.Logger
	redactor *redactor
	http     *http.Client
	// raw sends the raw path's calls (raw.go) over the same connection
	// pool; ids numbers their requests.
	raw *http.Client
	ids atomic.Uint64
	mcp *mcp.Client
	// probe connects without list_changed handlers, so a Modern health probe
	// is a bare server/discover that opens no subscription.
	probe *mcp.Client

	mu      sync.Mutex
	session *mcp.ClientSession
	// connecting is the (re)connect in progress, if any.
	connecting *connectAttempt

	health healthTracker

	heldMu  sync.Mutex
	held    map[string]*heldCall // by id
	heldBy  map[string]int       // held calls by principal (heldPrincipal)
	maxHeld int

	onUpdated atomic.Pointer[func(uri string)]
	// subMu serialises subscription changes, so the backend sees one
	// subscribe per URI and the unsubscribe only after the last watcher.
	subMu sync.Mutex
	subs  map[string]int // watchers per subscribed URI
	// plain is the Legacy session of plain calls (plaincalls.go), under mu.
	plain plainCalls
	// decoded is the last listing's items by their bytes (ops.go).
	decoded decodedItems
	// bridge runs a stdio backend (Config.Command); nil for HTTP.
	bridge *stdio.Bridge
}

// Implementation is how the aggregator introduces itself to backends.
var Implementation = &mcp.Implementation{Name: "switchboard-aggregator", Version: "1"}

// New builds a client. onListChanged is called (from an SDK goroutine) when
// the backend announces that one of its lists changed; log may be nil (the
// default logger).
func New(cfg Config, onListChanged func(backend string), log *slog.Logger) *Client {
	if log == nil {
		log = slog.Default()
	}
	var bridge *stdio.Bridge
	if len(cfg.Command) > 0 {
		// A stdio server is reached through its bridge, as any HTTP
		// backend: one path for everything the client does.
		var err error
		bridge, err = stdio.Start(stdio.Spec{Name: cfg.Name, Command: cfg.Command, Env: cfg.Env, Dir: cfg.Dir, Log: log,
			Redact: newSecretSet(stdio.SecretEnv(cfg.Env, MinRedactedHidden)).redactText})
		if err != nil {
			// Validated at start and reload (the command is found);
			// what fails now leaves the backend down, and says why.
			log.Error("the stdio backend cannot start", "backend", cfg.Name, "err", err)
			cfg.URL = "http://127.0.0.1:0/stdio-backend-not-started"
		} else {
			cfg.URL = bridge.URL()
			cfg.Headers = map[string]string{"Authorization": "Bearer " + bridge.Token()}
			cfg.Protocol = ProtocolLegacy
		}
	}
	var tokens *tokenSource
	if cfg.Auth.Mode == AuthTokenExchange || cfg.Auth.Mode == AuthClientCredentials {
		tokens = newTokenSource(cfg.Auth, cfg.Timeout, log.With("backend", cfg.Name))
	}
	// One stack carries every request to the backend (stack.go); go-sdk's
	// and the raw path's differ only in how they hand it theirs.
	st := newStack(cfg, tokens)

	c := &Client{
		cfg:    cfg,
		tokens: tokens,
		log:    log.With("backend", cfg.Name),
		// The backend's secrets are cut out of everything it sends back
		// (redact.go).
		redactor: newRedactor(cfg, tokens),
		// Both clients follow redirects on the backend's origin only
		// (redirect.go).
		http:    &http.Client{Transport: sdkTransport{s: st, backend: cfg.Name}, CheckRedirect: checkRedirect},
		raw:     &http.Client{Transport: rawTransport{s: st}, CheckRedirect: checkRedirect},
		health:  newHealthTracker(),
		held:    map[string]*heldCall{},
		heldBy:  map[string]int{},
		maxHeld: maxHeldCalls,
		subs:    map[string]int{},
		bridge:  bridge,
	}
	notify := func() {
		if onListChanged != nil {
			onListChanged(cfg.Name)
		}
	}
	noMRTR := &mcp.MultiRoundTripOptions{Disabled: true}
	c.mcp = mcp.NewClient(Implementation, &mcp.ClientOptions{
		Logger:                     c.log,
		Capabilities:               listingCapabilities(),
		MultiRoundTrip:             noMRTR,
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { notify() },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { notify() },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { notify() },
		ResourceUpdatedHandler:     c.resourceUpdated,
	})
	c.probe = mcp.NewClient(Implementation, &mcp.ClientOptions{
		Logger:         c.log,
		Capabilities:   listingCapabilities(),
		MultiRoundTrip: noMRTR,
	})
	serveRoots(c.mcp, nil)
	serveRoots(c.probe, nil)
	return c
}

// listingCapabilities are the capabilities the aggregator's own sessions
// declare. They declare MCP Apps (HTML pages), because a server may list
// its UI tools only to hosts that declare it, and the catalog carries
// UIs through to clients (catalog/ui.go); a client that renders none
// ignores a tool's _meta.ui, as the extension provides.
func listingCapabilities() *mcp.ClientCapabilities {
	caps := &mcp.ClientCapabilities{}
	caps.AddExtension(mcpspec.ExtensionUI, map[string]any{"mimeTypes": []string{"text/html;profile=mcp-app"}})
	return caps
}

// Name is the backend's configured name.
func (c *Client) Name() string { return c.cfg.Name }

// URL is the backend's configured URL.
func (c *Client) URL() string { return c.cfg.URL }

// Timeout is the backend's per-request timeout.
func (c *Client) Timeout() time.Duration { return c.cfg.Timeout }

func (c *Client) transport(standaloneSSE bool) *mcp.StreamableClientTransport {
	return &mcp.StreamableClientTransport{
		Endpoint:   c.cfg.URL,
		HTTPClient: c.http,
		// The SDK's default retries re-open an interrupted event stream (a
		// Legacy GET stream cut by a proxy's idle timeout) instead of
		// failing the session.
		DisableStandaloneSSE: !standaloneSSE,
		// A message is bounded as on the raw path (readStream); the event
		// around it adds its field names and line ends (and see
		// boundedLines).
		MaxEventSize: maxMessageBytes + 1024,
	}
}

func (c *Client) sessionOptions() *mcp.ClientSessionOptions {
	if c.cfg.Protocol == ProtocolAuto {
		return nil
	}
	return &mcp.ClientSessionOptions{ProtocolVersion: c.cfg.Protocol}
}

// connect opens a session and checks that a pinned Modern backend did not
// fall back to Legacy.
func (c *Client) connect(ctx context.Context, client *mcp.Client, standaloneSSE bool) (*mcp.ClientSession, error) {
	s, err := client.Connect(ctx, c.transport(standaloneSSE), c.sessionOptions())
	if err != nil {
		return nil, err
	}
	if v := s.InitializeResult().ProtocolVersion; c.cfg.Protocol == ProtocolModern && v != ProtocolModern {
		_ = s.Close()
		return nil, &eraError{negotiated: v, configured: ProtocolModern}
	}
	return s, nil
}

// connectAttempt is one (re)connect in progress; callers that arrive
// meanwhile wait for it and share its outcome instead of dialing again.
type connectAttempt struct {
	done    chan struct{}
	session *mcp.ClientSession
	err     error
}

// current returns the live session, connecting if there is none.
func (c *Client) current(ctx context.Context) (*mcp.ClientSession, error) {
	c.mu.Lock()
	if c.session != nil {
		s := c.session
		c.mu.Unlock()
		return s, nil
	}
	if a := c.connecting; a != nil {
		c.mu.Unlock()
		select {
		case <-a.done:
			return a.session, a.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	a := &connectAttempt{done: make(chan struct{})}
	c.connecting = a
	c.mu.Unlock()

	// The session outlives this request and belongs to no caller: connect
	// under a context that carries nothing of the request (its caller's
	// credential would reach the backend with the handshake and the
	// session's stream, for as long as the session lives), bounded by the
	// backend timeout (or the request's deadline, if sooner).
	limit := c.cfg.Timeout
	if d, ok := ctx.Deadline(); ok {
		limit = min(limit, time.Until(d))
	}
	cctx, cancel := context.WithTimeout(context.Background(), limit)
	a.session, a.err = c.connect(cctx, c.mcp, true)
	cancel()

	c.mu.Lock()
	c.connecting = nil
	if a.err == nil {
		c.session = a.session
	}
	c.mu.Unlock()
	close(a.done)
	if a.err != nil {
		return nil, a.err
	}
	v := a.session.InitializeResult().ProtocolVersion
	c.health.setProtocol(v)
	c.log.Info("backend session opened", "protocol", v)
	go c.watch(a.session)
	go c.resubscribe(a.session)
	return a.session, nil
}

// watch forgets a session as soon as its connection ends (the backend
// closed it, or its event stream could not be re-opened), so the next
// request opens a new one instead of failing on the dead one.
func (c *Client) watch(s *mcp.ClientSession) {
	err := s.Wait()
	c.mu.Lock()
	current := c.session == s
	if current {
		c.session = nil
	}
	c.mu.Unlock()
	if current {
		c.log.Info("backend session ended", "err", c.Redact(fmt.Sprint(err)))
		_ = s.Close()
	}
}

// drop forgets a broken session so the next request re-connects.
func (c *Client) drop(s *mcp.ClientSession) {
	c.mu.Lock()
	if c.session == s {
		c.session = nil
	}
	c.mu.Unlock()
	go func() { _ = s.Close() }()
}

// RunsProcess reports whether the backend is a stdio server this client
// runs.
func (c *Client) RunsProcess() bool { return c.bridge != nil }

// Close ends the session, cancels every held call, stops a stdio server.
func (c *Client) Close() {
	// Not after the session: its close (the DELETE to the bridge) waits
	// for the calls in flight, which only the process's stop ends; a
	// replaced server ran on beside its replacement some ten seconds.
	var stopped sync.WaitGroup
	if c.bridge != nil {
		stopped.Go(c.bridge.Close)
	}
	c.heldMu.Lock()
	for id, h := range c.held {
		h.timer.Stop()
		h.cancel()
		c.unholdLocked(id)
	}
	c.heldMu.Unlock()
	c.mu.Lock()
	s := c.session
	c.session = nil
	c.mu.Unlock()
	if s != nil {
		_ = s.Close()
	}
	c.closePlain()
	c.http.CloseIdleConnections()
	c.raw.CloseIdleConnections()
	stopped.Wait()
}

// Capabilities returns the capabilities of the current session, or nil when
// there is none.
func (c *Client) Capabilities() *mcp.ServerCapabilities {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.session == nil {
		return nil
	}
	return c.session.InitializeResult().Capabilities
}

// retry says whether an operation may be sent again after a failure.
type retry int

const (
	// retryIdempotent: lists and reads may be repeated after any transport
	// failure.
	retryIdempotent retry = iota
	// retryUnsent: calls are repeated only when the backend certainly did
	// not process them (its session was gone).
	retryUnsent
)

// do runs op on the session and classifies its error. A transport failure
// drops the session; op is retried once on a fresh session when policy
// allows. budget bounds op as a whole; ops that send several requests pass
// 0 and bound each request themselves with c.bounded.
func do[T any](ctx context.Context, c *Client, policy retry, budget time.Duration, op func(context.Context, *mcp.ClientSession) (T, error)) (T, error) {
	var zero T
	for attempt := 0; ; attempt++ {
		s, err := c.current(ctx)
		if err != nil {
			return zero, c.classify(ctx, err)
		}
		opCtx, cancel := ctx, context.CancelFunc(func() {})
		if budget > 0 {
			opCtx, cancel = context.WithTimeoutCause(ctx, budget, errBudget)
		}
		res, err := op(opCtx, s)
		if err != nil && errors.Is(context.Cause(opCtx), errBudget) {
			err = fmt.Errorf("%w: %w", errBudget, err)
		}
		cancel()
		if err == nil {
			return res, nil
		}
		classified := c.classify(ctx, err)
		if !errors.Is(classified, ErrUnavailable) || answered(err) {
			return zero, classified
		}
		c.drop(s)
		again := policy == retryIdempotent || errors.Is(err, mcp.ErrSessionMissing)
		if attempt > 0 || !again || ctx.Err() != nil {
			return zero, classified
		}
	}
}

// errBudget is the cause of a context that ran out of the backend timeout.
var errBudget = errors.New("backend timeout")

type callTimeoutKey struct{}

// WithCallTimeout returns ctx in which a call's requests to the backend
// are bounded by d instead of the backend's timeout, longer or shorter:
// a tool's own timeout (its override).
func WithCallTimeout(ctx context.Context, d time.Duration) context.Context {
	return context.WithValue(ctx, callTimeoutKey{}, d)
}

// budget bounds a request made in ctx: the call's own timeout
// (WithCallTimeout), else the backend's.
func (c *Client) budget(ctx context.Context) time.Duration {
	if d, ok := ctx.Value(callTimeoutKey{}).(time.Duration); ok && d > 0 {
		return d
	}
	return c.cfg.Timeout
}

// bounded runs one request under its budget.
func bounded[T any](ctx context.Context, c *Client, f func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, c.budget(ctx), errBudget)
	defer cancel()
	res, err := f(ctx)
	if err != nil && errors.Is(context.Cause(ctx), errBudget) {
		err = fmt.Errorf("%w: %w", errBudget, err)
	}
	return res, err
}

// Redact cuts the backend's secrets (redact.go) out of a message.
func (c *Client) Redact(msg string) string { return c.redactor.shared().redactText(msg) }

// redactCall cuts the backend's secrets and the call's own Authorization
// out of an error text of the call in ctx.
func (c *Client) redactCall(ctx context.Context, msg string) string {
	return c.redactor.forCall(ctx).redactText(msg)
}

// redactResult cuts the backend's secrets out of a result of the call in
// ctx (redact.go: those of at least MinRedactedHidden bytes, the
// client-credentials tokens, the last one and the call's own; for a result
// marked isError, the call's own Authorization whatever it is).
func (c *Client) redactResult(ctx context.Context, res *Result) *Result {
	res.JSON = c.redactor.forResult(ctx, res.IsError).redactJSON(res.JSON)
	return res
}

// RedactKept cuts out of a result of the call in ctx what it loses when
// it is kept beyond the call (a task's outcome, stored in the cluster's
// database and shown to operators): what a result marked isError loses,
// the caller's own exchanged token included, which a normal result keeps
// for the caller it belongs to.
func (c *Client) RedactKept(ctx context.Context, result string) string {
	return c.redactor.forResult(ctx, true).redactJSON(result)
}

// redactToolResult is redactResult for a result of the go-sdk paths
// (held calls, calls on a session of their own), input_required results
// (which carry the backend's questions) included.
func (c *Client) redactToolResult(ctx context.Context, res *mcp.CallToolResult) (*mcp.CallToolResult, error) {
	set := c.redactor.forResult(ctx, res.IsError)
	if set.empty() {
		return res, nil
	}
	text, err := json.Marshal(res)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrProtocolViolation, err)
	}
	redacted := set.redactJSON(string(text))
	if redacted == string(text) {
		return res, nil
	}
	out := new(mcp.CallToolResult)
	if err := json.Unmarshal([]byte(redacted), out); err != nil {
		return nil, fmt.Errorf("%w: a result that could not be redacted", ErrProtocolViolation)
	}
	return out, nil
}

// redactNotice is redactNotification for a go-sdk notification's params:
// the same, as JSON, when a secret was cut out.
func (c *Client) redactNotice(ctx context.Context, params any) any {
	set := c.redactor.forNotification(ctx)
	if set.empty() {
		return params
	}
	text, err := json.Marshal(params)
	if err != nil {
		return params
	}
	if redacted := set.redactJSON(string(text)); redacted != string(text) {
		return json.RawMessage(redacted)
	}
	return params
}

// redactNotification cuts the backend's secrets out of a notification's
// params (JSON) relayed for the call in ctx.
func (c *Client) redactNotification(ctx context.Context, params []byte) []byte {
	set := c.redactor.forNotification(ctx)
	if set.empty() {
		return params
	}
	if text := set.redactJSON(string(params)); text != string(params) {
		return []byte(text)
	}
	return params
}
