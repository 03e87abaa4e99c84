// Package backend talks to one backend MCP server with a go-sdk client.
//
// A Client keeps one long-lived MCP session per backend over a pooled,
// keep-alive HTTP transport, and re-connects when the session breaks, so a
// call never pays for a new TCP connection or a new handshake. It follows
// list cursors to the end, turns failures into the typed errors of this
// package, and tracks the backend's health from probes and listings.
package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
)

// Protocol versions a backend may be pinned to.
const (
	ProtocolAuto   = "auto"
	ProtocolModern = "2026-07-28"
	ProtocolLegacy = "2025-11-25"
)

// Config describes one backend.
type Config struct {
	Name string
	URL  string
	// Protocol is ProtocolAuto, ProtocolModern or ProtocolLegacy.
	Protocol string
	// Headers are added to every request. Their values are secrets: they
	// never appear in logs or errors.
	Headers map[string]string
	// Timeout bounds every request to the backend.
	Timeout time.Duration
	// InputWait bounds how long a held call waits for the client's input
	// (see CallToolAsking).
	InputWait time.Duration
}

// Validate checks a configuration before any connection is attempted.
func (c Config) Validate() error {
	if c.Name == "" {
		return errors.New("backend without a name")
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("backend %q: url must be an absolute http(s) URL", c.Name)
	}
	switch c.Protocol {
	case "", ProtocolAuto, ProtocolModern, ProtocolLegacy:
	default:
		return fmt.Errorf("backend %q: protocol %q is not auto, %s or %s", c.Name, c.Protocol, ProtocolModern, ProtocolLegacy)
	}
	for k := range c.Headers {
		if k == "" || strings.ContainsAny(k, " :\r\n") {
			return fmt.Errorf("backend %q: invalid header name %q", c.Name, k)
		}
	}
	return nil
}

// Errors a backend operation fails with. Callers branch with errors.Is.
var (
	// ErrTimeout: the backend did not answer within its timeout.
	ErrTimeout = errors.New("backend timed out")
	// ErrUnavailable: the backend could not be reached or its session broke.
	ErrUnavailable = errors.New("backend unavailable")
	// ErrMalformedRequest: the backend refused a call as malformed (HTTP 400
	// without a JSON-RPC error), for example arguments nested deeper than
	// its JSON decoder accepts. The caller sent it; the backend is fine.
	ErrMalformedRequest = errors.New("backend rejected the request as malformed")
)

// ProtocolError is a JSON-RPC error the backend answered with.
type ProtocolError struct {
	Code    int64
	Message string
	// Data is the error's data as JSON text; empty if none.
	Data string
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("backend error %d: %s", e.Code, e.Message)
}

// Client is the aggregator's connection to one backend. It is safe for
// concurrent use.
type Client struct {
	cfg      Config
	log      *slog.Logger
	redactor *strings.Replacer
	http     *http.Client
	mcp      *mcp.Client
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
	maxHeld int

	onUpdated atomic.Pointer[func(uri string)]
	// subMu serialises subscription changes, so the backend sees one
	// subscribe per URI and the unsubscribe only after the last watcher.
	subMu sync.Mutex
	subs  map[string]int // watchers per subscribed URI
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
	if cfg.Protocol == "" {
		cfg.Protocol = ProtocolAuto
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 30 * time.Second
	}
	if cfg.InputWait <= 0 {
		cfg.InputWait = 60 * time.Second
	}
	base := http.DefaultTransport.(*http.Transport).Clone()
	// Many concurrent calls to the same backend share a pool of keep-alive
	// connections instead of dialing per call.
	base.MaxIdleConns = 256
	base.MaxIdleConnsPerHost = 64
	base.IdleConnTimeout = 90 * time.Second
	base.DialContext = (&net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}).DialContext
	var rt http.RoundTripper = rejections{next: detacher{next: base}}
	if len(cfg.Headers) > 0 {
		rt = headerInjector{headers: cfg.Headers, next: rt}
	}
	// otelhttp injects the W3C trace context of the request's context, so
	// the backend call joins the caller's trace.
	rt = otelhttp.NewTransport(rt, otelhttp.WithSpanNameFormatter(func(string, *http.Request) string {
		return "mcp backend " + cfg.Name
	}))

	// Header values, and any password or query in the URL, are secrets:
	// they are cut out of every error message before it is logged or
	// reported.
	var pairs []string
	for _, v := range cfg.Headers {
		if v != "" {
			pairs = append(pairs, v, "[redacted]")
		}
	}
	if u, err := url.Parse(cfg.URL); err == nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			pairs = append(pairs, pw, "[redacted]")
		}
		if u.RawQuery != "" {
			pairs = append(pairs, u.RawQuery, "[redacted]")
		}
	}
	c := &Client{
		cfg:      cfg,
		log:      log.With("backend", cfg.Name),
		redactor: strings.NewReplacer(pairs...),
		http:     &http.Client{Transport: rt},
		health:   newHealthTracker(),
		held:     map[string]*heldCall{},
		maxHeld:  maxHeldCalls,
		subs:     map[string]int{},
	}
	notify := func() {
		if onListChanged != nil {
			onListChanged(cfg.Name)
		}
	}
	noMRTR := &mcp.MultiRoundTripOptions{Disabled: true}
	c.mcp = mcp.NewClient(Implementation, &mcp.ClientOptions{
		Logger:                     c.log,
		Capabilities:               &mcp.ClientCapabilities{},
		MultiRoundTrip:             noMRTR,
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { notify() },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { notify() },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { notify() },
		ResourceUpdatedHandler:     c.resourceUpdated,
	})
	c.probe = mcp.NewClient(Implementation, &mcp.ClientOptions{
		Logger:         c.log,
		Capabilities:   &mcp.ClientCapabilities{},
		MultiRoundTrip: noMRTR,
	})
	return c
}

// Name is the backend's configured name.
func (c *Client) Name() string { return c.cfg.Name }

// URL is the backend's configured URL.
func (c *Client) URL() string { return c.cfg.URL }

// Timeout is the backend's per-request timeout.
func (c *Client) Timeout() time.Duration { return c.cfg.Timeout }

// headerInjector adds the configured headers to every request.
type headerInjector struct {
	headers map[string]string
	next    http.RoundTripper
}

func (h headerInjector) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	return h.next.RoundTrip(r)
}

// detacher keeps connections reusable. The SDK hands a call its result as
// soon as the response message arrives and drains the rest of the event
// stream in the background; the caller's context usually ends (the gRPC
// call returns) before those last bytes are read, and a request whose
// context ends mid-body loses its connection. So once the response headers
// are in, the request no longer dies with the caller's context: after the
// caller is gone the body gets a short grace to finish before it is cut.
type detacher struct{ next http.RoundTripper }

// drainGrace is how long a response may keep streaming after its caller
// gave up; a normal response's tail arrives within microseconds, a hung
// stream is cut after this.
const drainGrace = 250 * time.Millisecond

func (d detacher) RoundTrip(r *http.Request) (*http.Response, error) {
	parent := r.Context()
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	// Until the headers arrive, the caller's cancellation aborts at once.
	stop := context.AfterFunc(parent, cancel)
	resp, err := d.send(ctx, r)
	stop()
	if err != nil {
		cancel()
		return nil, err
	}
	body := &watchedBody{ReadCloser: resp.Body, closed: make(chan struct{})}
	resp.Body = body
	go func() {
		defer cancel()
		select {
		case <-body.closed:
		case <-parent.Done():
			select {
			case <-body.closed:
			case <-time.After(drainGrace):
			}
		}
	}()
	return resp, nil
}

// send sends r once more on a fresh connection when a pooled keep-alive
// connection turns out to be dead (the backend or a proxy closed it) before
// the request was completely written. A request that was not completely
// written cannot have been processed, so this is safe for tool calls too;
// the transport itself retries only idempotent methods, and every MCP
// request is a POST.
func (d detacher) send(ctx context.Context, r *http.Request) (*http.Response, error) {
	for attempt := 0; ; attempt++ {
		var reused, written bool
		trace := &httptrace.ClientTrace{
			GotConn:      func(i httptrace.GotConnInfo) { reused = i.Reused },
			WroteRequest: func(i httptrace.WroteRequestInfo) { written = i.Err == nil },
		}
		req := r.WithContext(httptrace.WithClientTrace(ctx, trace))
		if attempt > 0 {
			body, err := r.GetBody()
			if err != nil {
				return nil, err
			}
			req.Body = body
		}
		resp, err := d.next.RoundTrip(req)
		if err == nil || attempt > 0 || !reused || written || r.GetBody == nil || ctx.Err() != nil {
			return resp, err
		}
	}
}

// rejections turns a backend's plain HTTP 400 to a call into
// ErrMalformedRequest. The SDK would report it as a bare "Bad Request" and
// break the whole session (every caller's) over one caller's request; an
// error from the round trip instead fails only that call and leaves the
// session open. Handshakes and JSON-RPC error bodies are left to the SDK:
// a 400 to server/discover is how a Legacy backend says it is not Modern,
// and a JSON-RPC error is the backend's own answer.
type rejections struct{ next http.RoundTripper }

// callMethods are the requests whose 400 is the caller's fault.
var callMethods = map[string]bool{"tools/call": true, "resources/read": true, "prompts/get": true, "completion/complete": true}

// maxRejectionText bounds how much of a rejection's body is kept for the log.
const maxRejectionText = 512

func (t rejections) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(r)
	if err != nil || resp.StatusCode != http.StatusBadRequest || r.GetBody == nil {
		return resp, err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var answer struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &answer) == nil && len(answer.Error) > 0 {
		return resp, nil
	}
	if !callMethods[requestMethod(r)] {
		return resp, nil
	}
	text := strings.TrimSpace(string(body))
	if len(text) > maxRejectionText {
		text = text[:maxRejectionText]
	}
	return nil, fmt.Errorf("%w: %s", ErrMalformedRequest, text)
}

// requestMethod is the JSON-RPC method of a request, or "".
func requestMethod(r *http.Request) string {
	if m := r.Header.Get("Mcp-Method"); m != "" {
		return m
	}
	rc, err := r.GetBody()
	if err != nil {
		return ""
	}
	defer rc.Close()
	var msg struct {
		Method string `json:"method"`
	}
	_ = json.NewDecoder(rc).Decode(&msg)
	return msg.Method
}

type watchedBody struct {
	io.ReadCloser
	once   sync.Once
	closed chan struct{}
}

func (b *watchedBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() { close(b.closed) })
	return err
}

func (c *Client) transport(standaloneSSE bool) *mcp.StreamableClientTransport {
	return &mcp.StreamableClientTransport{
		Endpoint:   c.cfg.URL,
		HTTPClient: c.http,
		// The SDK's default retries re-open an interrupted event stream (a
		// Legacy GET stream cut by a proxy's idle timeout) instead of
		// failing the session.
		DisableStandaloneSSE: !standaloneSSE,
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
		return nil, fmt.Errorf("backend negotiated protocol %s, but %s is configured", v, ProtocolModern)
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

	// The session outlives this request: connect under a context that is
	// not cancelled with it, bounded by the backend timeout (or the
	// request's deadline, if sooner).
	limit := c.cfg.Timeout
	if d, ok := ctx.Deadline(); ok {
		limit = min(limit, time.Until(d))
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limit)
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

// Close ends the session and cancels every held call.
func (c *Client) Close() {
	c.heldMu.Lock()
	for id, h := range c.held {
		h.timer.Stop()
		h.cancel()
		delete(c.held, id)
	}
	c.heldMu.Unlock()
	c.mu.Lock()
	s := c.session
	c.session = nil
	c.mu.Unlock()
	if s != nil {
		_ = s.Close()
	}
	c.http.CloseIdleConnections()
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
		if !errors.Is(classified, ErrUnavailable) {
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

// bounded runs one request under the backend timeout.
func bounded[T any](ctx context.Context, c *Client, f func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, c.cfg.Timeout, errBudget)
	defer cancel()
	res, err := f(ctx)
	if err != nil && errors.Is(context.Cause(ctx), errBudget) {
		err = fmt.Errorf("%w: %w", errBudget, err)
	}
	return res, err
}

// classify maps an SDK error to the caller's own context error,
// ErrMalformedRequest, ErrTimeout, *ProtocolError or ErrUnavailable, with
// secrets removed.
func (c *Client) classify(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if errors.Is(err, ErrMalformedRequest) {
		return fmt.Errorf("%w (%s)", ErrMalformedRequest, c.Redact(err.Error()))
	}
	if errors.Is(err, errBudget) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w after %s", ErrTimeout, c.cfg.Timeout)
	}
	var wire *jsonrpc.Error
	if errors.As(err, &wire) && !errors.Is(err, mcp.ErrConnectionClosed) && !errors.Is(err, mcp.ErrSessionMissing) && wire.Code != rejectedCode {
		return &ProtocolError{Code: wire.Code, Message: c.Redact(wire.Message), Data: c.Redact(string(wire.Data))}
	}
	return fmt.Errorf("%w: %s", ErrUnavailable, c.Redact(err.Error()))
}

// rejectedCode is the code the SDK's transport gives requests it could not
// deliver (HTTP failures); they are transport errors, not backend answers.
const rejectedCode = -32005

// Redact removes the configured header values from a message.
func (c *Client) Redact(msg string) string { return c.redactor.Replace(msg) }
