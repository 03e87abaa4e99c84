package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/h1"
	"github.com/switchboard-mcp/switchboard/services/telemetry"
)

// stack is the one HTTP stack of a backend connection. Every request the
// aggregator sends to the backend goes through send: go-sdk's (the
// handshake, listings, probes, GET streams, held calls and calls on a
// session of their own, through sdkTransport) and the raw path's (raw.go,
// through rawTransport). send is the one place where
//
//   - the configured headers and the Authorization are set: the caller's
//     credential (WithCaller), else the backend's own client-credentials
//     token; a token the backend refuses (401) is forgotten, and a request
//     of the aggregator's own so refused is sent once more with a new one;
//   - the W3C trace context goes on the request, so the backend joins the
//     caller's trace;
//   - the request is sent over the backend's connections, h1 (each
//     exchange on the calling goroutine; a pooled connection found dead
//     before the request was written is replaced once), or net/http for
//     what h1 does not carry (a proxy, a large body), with the same single
//     resend (resender);
//
// and refusal is the one reading of a backend's outright refusal of a
// call (a 401 challenge, a plain 400), whichever path sent it.
type stack struct {
	headers map[string]string
	// tokens are the backend's OAuth tokens; nil for none.
	tokens *tokenSource
	conns  http.RoundTripper
}

// newStack is the stack of a backend with cfg; tokens may be nil.
func newStack(cfg Config, tokens *tokenSource) *stack {
	base := http.DefaultTransport.(*http.Transport).Clone()
	// Many concurrent calls to the same backend share a pool of keep-alive
	// connections instead of dialing per call.
	base.MaxIdleConns = 256
	base.MaxIdleConnsPerHost = 64
	base.IdleConnTimeout = 90 * time.Second
	base.DialContext = (&net.Dialer{Timeout: cfg.Timeout, KeepAlive: 30 * time.Second}).DialContext
	return &stack{headers: cfg.Headers, tokens: tokens, conns: h1.New(h1.Config{
		Dial:           base.DialContext,
		TLS:            base.TLSClientConfig,
		Proxy:          base.Proxy,
		Fallback:       resender{next: base},
		MaxIdlePerHost: base.MaxIdleConnsPerHost,
		MaxIdle:        base.MaxIdleConns,
		IdleTimeout:    base.IdleConnTimeout,
	})}
}

// send sets req's headers, its Authorization and trace context, and sends
// it. req is the caller's to change: rawTransport's, or sdkTransport's
// copy of go-sdk's.
func (s *stack) send(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	cred := callerCredential(ctx)
	// The gateway's own identity goes on every request without a caller's:
	// the handshake, listings, probes and subscriptions too.
	own := (cred == nil || cred.authorization == "") && s.tokens != nil && s.tokens.auth.Mode == AuthClientCredentials
	if own {
		v, err := s.tokens.serviceToken(ctx)
		if err != nil {
			closeRequestBody(req)
			return nil, err
		}
		cred = &callerCred{authorization: v, key: serviceKey}
	}
	h := req.Header
	for k, v := range s.headers {
		h.Set(k, v)
	}
	if cred != nil && cred.authorization != "" {
		h["Authorization"] = []string{cred.authorization}
	}
	otel.GetTextMapPropagator().Inject(ctx, propagation.HeaderCarrier(h))
	resp, err := s.conns.RoundTrip(req)
	if err != nil || resp.StatusCode != http.StatusUnauthorized || cred == nil || cred.authorization == "" || s.tokens == nil {
		return resp, err
	}
	s.tokens.refused(cred.key, cred.authorization)
	if !own {
		// A call fails with the refusal (classify); its next one gets a
		// new token.
		return resp, nil
	}
	return s.resend(req, resp)
}

// resend sends req, an aggregator's own request that the backend refused
// (resp) with the token it carried, once more with a new one: with no
// caller to see the refusal, a handshake's would mark the backend down.
// Its answer is final whatever it is, so that a backend refusing every
// token costs at most one grant a request. A request whose body cannot
// be read again, or for which no other token comes, keeps resp.
func (s *stack) resend(req *http.Request, resp *http.Response) (*http.Response, error) {
	ctx := req.Context()
	v, err := s.tokens.serviceToken(ctx)
	if err != nil || v == req.Header.Get("Authorization") {
		return resp, nil
	}
	again := req.Clone(ctx)
	if req.GetBody != nil {
		if again.Body, err = req.GetBody(); err != nil {
			return resp, nil
		}
	} else if req.Body != nil && req.Body != http.NoBody {
		return resp, nil
	}
	_ = drain(resp.Body)
	again.Header["Authorization"] = []string{v}
	return s.conns.RoundTrip(again)
}

func closeRequestBody(req *http.Request) {
	if req.Body != nil {
		_ = req.Body.Close()
	}
}

// rawTransport sends the raw path's requests (raw.go), which the raw path
// made itself and reads to the end itself.
type rawTransport struct{ s *stack }

func (t rawTransport) RoundTrip(req *http.Request) (*http.Response, error) { return t.s.send(req) }

// CloseIdleConnections closes the stack's idle connections: http.Client
// reaches a transport's pool only through this method, so without it a
// closed client's connections stayed open until they idled out.
func (t rawTransport) CloseIdleConnections() { t.s.closeIdle() }

func (s *stack) closeIdle() {
	if c, ok := s.conns.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// sdkTransport sends go-sdk's requests: a copy of each (a RoundTripper
// must not change the request it is given) goes through the stack in a
// span of its own, an HTTP error answering a call's request (a 401's
// challenge, a 503's Retry-After) is read as the raw path reads it, a
// plain 400 to a call fails that call instead of go-sdk's whole session,
// and the response outlives the caller's context briefly (detach).
type sdkTransport struct {
	s       *stack
	backend string
}

func (t sdkTransport) CloseIdleConnections() { t.s.closeIdle() }

func (t sdkTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx := r.Context()
	span := trace.SpanFromContext(ctx)
	if telemetry.Recording() {
		method, target := describeRequest(r)
		ctx, span = startSpan(ctx, t.backend, method, target, r.Header.Get("Mcp-Protocol-Version"))
	}
	resp, err := detach(ctx, func(ctx context.Context) (*http.Response, error) { return t.s.send(r.Clone(ctx)) })
	cred := callerCredential(r.Context())
	if err != nil {
		span.SetStatus(codes.Error, "no response")
		span.End()
		if cred != nil && cred.abandon != nil && carriesAnswer(r) {
			cred.answerFailed(err)
		}
		return nil, err
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	if cred != nil && resp.StatusCode >= 400 && resp.StatusCode != http.StatusNotFound {
		// go-sdk reports an HTTP error answering a call's request by its
		// status alone (a 404 it reads itself: the session is gone), and
		// ends its session on some. The answer is read as the raw path
		// reads it and kept for classify; on the session every caller
		// shares it is the transport's error instead, which go-sdk passes
		// on whole, keeping the session. So is an error answering the
		// client's answer to the backend's question, which ends the held
		// call with it: go-sdk keeps the session to tell the backend
		// that the call is cancelled.
		method := requestMethod(r)
		err := rejection(resp, method)
		answer := cred.abandon != nil && method == "" && carriesAnswer(r)
		switch {
		case answer:
			cred.answerFailed(err)
		case r.Method == http.MethodPost:
			// Not a GET's or a DELETE's answer: those carry no call (a 405
			// says the backend has no stream, or lets no client end its
			// session, both allowed), and the DELETE ending a call's own
			// session would put its answer in place of the call's.
			cred.record(err)
		}
		if cred.shared || answer {
			_ = drain(resp.Body)
			span.SetStatus(codes.Error, "HTTP error")
			span.End()
			return nil, err
		}
	}
	if resp.StatusCode == http.StatusBadRequest && r.GetBody != nil && callMethods[requestMethod(r)] {
		if err := refusal(resp); err != nil {
			span.SetStatus(codes.Error, "refused")
			span.End()
			return nil, err
		}
	}
	body := resp.Body
	if !isEventStream(resp.Header.Get("Content-Type")) {
		// go-sdk reads a JSON answer whole, however long.
		body = &boundedBody{ReadCloser: body}
	} else if cred != nil {
		// go-sdk bounds an event stream's events (transport), and reports
		// one too long as the end of its session: boundedLines notes it
		// for classify, which reports what the raw path would.
		body = &boundedLines{ReadCloser: body, cred: cred}
	}
	resp.Body = &endSpan{ReadCloser: body, span: span}
	return resp, nil
}

// carriesAnswer reports whether r carries a client's answer to a
// backend's question: a response (a POST without a method) with the
// result of an elicitation (its action), of a sampling request (its
// message's content) or of a roots request (its roots); not go-sdk's own
// replies to the backend's pings, nor an error.
func carriesAnswer(r *http.Request) bool {
	if r.Method != http.MethodPost || r.GetBody == nil {
		return false
	}
	rc, err := r.GetBody()
	if err != nil {
		return false
	}
	defer rc.Close()
	var msg struct {
		Method string `json:"method"`
		Result *struct {
			Action  string          `json:"action"`
			Content json.RawMessage `json:"content"`
			Roots   json.RawMessage `json:"roots"`
		} `json:"result"`
	}
	if json.NewDecoder(rc).Decode(&msg) != nil || msg.Method != "" || msg.Result == nil {
		return false
	}
	return msg.Result.Action != "" || len(msg.Result.Content) > 0 || len(msg.Result.Roots) > 0
}

// isEventStream reports a Content-Type of text/event-stream, parameters
// or not, without parsing it: it is asked of every answer.
func isEventStream(ctype string) bool {
	const es = "text/event-stream"
	return len(ctype) >= len(es) && strings.EqualFold(ctype[:len(es)], es) && (len(ctype) == len(es) || ctype[len(es)] == ';' || ctype[len(es)] == ' ')
}

// boundedBody fails a read past maxMessageBytes: a backend's message on
// go-sdk's sessions (the handshake, pings, calls on a session of their
// own) is bounded as on the raw path (readBounded).
type boundedBody struct {
	io.ReadCloser
	read int64
}

func (b *boundedBody) Read(p []byte) (int, error) {
	if left := maxMessageBytes + 1 - b.read; int64(len(p)) > left {
		p = p[:left]
	}
	n, err := b.ReadCloser.Read(p)
	if b.read += int64(n); b.read > maxMessageBytes {
		return n, fmt.Errorf("%w: a message over %d bytes", ErrProtocolViolation, maxMessageBytes)
	}
	return n, err
}

// boundedLines notes a line past maxMessageBytes in the event stream of a
// call's request, the bound the raw path puts on a line
// (eventReader.line), for classify: go-sdk's own bound on an event, a
// little larger (transport), ends the session on it and reports only
// that. It notes and does not fail the read, which go-sdk would take for
// a cut stream and resume, reading the line again.
type boundedLines struct {
	io.ReadCloser
	// line is how long the last line read so far is.
	line int
	cred *callerCred
}

func (b *boundedLines) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	read := p[:n]
	if first := bytes.IndexAny(read, "\r\n"); first >= 0 {
		// The line read so far ends here; the chunk's last one goes on.
		if b.line+first > maxMessageBytes {
			b.cred.record(errLongLine)
		}
		b.line = n - bytes.LastIndexAny(read, "\r\n") - 1
	} else {
		b.line += n
	}
	if b.line > maxMessageBytes {
		b.cred.record(errLongLine)
	}
	return n, err
}

// endSpan ends a request's span when its response body is closed.
type endSpan struct {
	io.ReadCloser
	span trace.Span
	once sync.Once
}

func (b *endSpan) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(func() { b.span.End() })
	return err
}

// refusal is the one reading of a backend's outright refusal of a call:
// a 401 or 403, with a challenge or not, is a *ChallengeError (the
// credential was refused, or does not allow the call: the caller's
// answer, not an outage); a 400 without a JSON-RPC
// error in its body is ErrMalformedRequest (the backend refused the
// caller's request as malformed, and must not take go-sdk's session, or
// the backend's health, down with it). Anything else is nil: a JSON-RPC
// error is the backend's own answer, read by whoever reads the body. It
// reads a 400's body, leaving a copy in its place.
func refusal(resp *http.Response) error {
	if ch := challengeOf(resp); ch != nil {
		return ch
	}
	switch resp.StatusCode {
	case http.StatusRequestEntityTooLarge, http.StatusRequestHeaderFieldsTooLarge:
		// This request was too large for the backend (or a proxy before
		// it): its own fault, like a 400, not an outage that would end
		// the session every caller shares.
		return fmt.Errorf("%w: the backend refused the request as too large (HTTP %d)", ErrMalformedRequest, resp.StatusCode)
	case http.StatusBadRequest:
	default:
		return nil
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if m, err := parseMessage(body); err == nil && m.err != nil {
		return nil
	}
	// classify bounds the text (maxRejectionText) once the backend's
	// secrets are cut out of it.
	return fmt.Errorf("%w: %s", ErrMalformedRequest, strings.TrimSpace(string(body)))
}

// callMethods are the requests whose 400 is the caller's fault: a 400 to
// a handshake is how a Legacy backend says it is not Modern.
var callMethods = map[string]bool{"tools/call": true, "resources/read": true, "prompts/get": true, "completion/complete": true}

// maxRejectionText bounds how much of a rejection's body is kept in its
// error, redacted.
const maxRejectionText = 512

// detach keeps connections reusable under go-sdk. The SDK hands a call its
// result as soon as the response message arrives and drains the rest of
// the event stream in the background; the caller's context usually ends
// (the gRPC call returns) before those last bytes are read, and a request
// whose context ends mid-body loses its connection. So once the response
// headers are in, the request no longer dies with the caller's context:
// after the caller is gone the body gets a short grace to finish before
// it is cut.
func detach(parent context.Context, send func(context.Context) (*http.Response, error)) (*http.Response, error) {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	// Until the headers arrive, the caller's cancellation aborts at once.
	stop := context.AfterFunc(parent, cancel)
	resp, err := send(ctx)
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

// drainGrace is how long a response may keep streaming after its caller
// gave up; a normal response's tail arrives within microseconds, a hung
// stream is cut after this.
const drainGrace = 250 * time.Millisecond

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

// resender carries what h1 does not (a proxy, a large body) over
// net/http, with h1's rule: a request that a pooled keep-alive
// connection could not take (the backend or a proxy closed it) is sent
// once more on a fresh one. A request that was not completely written
// cannot have been processed, so this is safe for tool calls too; the
// standard transport itself retries only idempotent methods, and every
// MCP request is a POST.
type resender struct{ next http.RoundTripper }

func (t resender) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func (t resender) RoundTrip(r *http.Request) (*http.Response, error) {
	ctx := r.Context()
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
		resp, err := t.next.RoundTrip(req)
		if err == nil || attempt > 0 || !reused || written || r.GetBody == nil || ctx.Err() != nil {
			return resp, err
		}
	}
}

// drain reads what is left of an answer's body (up to 64 KiB) and closes
// it, so that its connection can carry the next request.
func drain(body io.ReadCloser) error {
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 64<<10))
	return body.Close()
}
