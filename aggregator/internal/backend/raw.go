package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/paramheader"
	"github.com/switchboard-mcp/switchboard/services/rawjson"
	"github.com/switchboard-mcp/switchboard/services/telemetry"
)

// The raw path sends request/response calls (tools/call, resources/read,
// prompts/get, completion/complete) without go-sdk's client: the
// aggregator writes the JSON-RPC request itself, with the caller's
// argument bytes spliced in untouched, POSTs it over the pooled
// connections, and hands back the backend's result bytes exactly as they
// came. go-sdk keeps what needs a session's state: the handshake, listings,
// list_changed, subscriptions, probes, and calls that may be held for the
// client's input (held.go).
//
// A Modern backend gets a stateless POST carrying the per-request _meta and
// the headers the 2026-07-28 binding requires (MCP-Protocol-Version,
// Mcp-Method, Mcp-Name, Mcp-Param-*). A Legacy backend gets a POST in the
// long-lived go-sdk session (Mcp-Session-Id and the negotiated
// MCP-Protocol-Version); a 404 means the backend forgot the session, which
// is then re-established and the call sent again, as it cannot have run.

// Call is one request/response call passed through raw.
type Call struct {
	// Method is the MCP method.
	Method string
	// Name is what the Mcp-Name header mirrors: the original tool or prompt
	// name, or the resource URI; empty for completion/complete.
	Name string
	// Params is the request's params object without _meta, as JSON text
	// (see ParamsBuilder); the aggregator adds _meta itself.
	Params []byte
	// ClientCapabilities is the client's capabilities object as JSON, for a
	// Modern backend's _meta; nil declares none.
	ClientCapabilities []byte
	// ParamHeaders are the Mcp-Param-* headers (full names) to send to a
	// Modern backend, values already encoded.
	ParamHeaders map[string]string
	// Progress asks the backend for notifications/progress; LogLevel, if
	// not empty, for notifications/message at that level or above. Both are
	// handed to Notify (params as JSON, the progress token being the one
	// the aggregator chose), in order, before Call returns.
	Progress bool
	LogLevel mcp.LoggingLevel
	Notify   func(method string, params []byte)
}

// Result is a backend's result, exactly as it sent it.
type Result struct {
	// JSON is the result object's text, byte for byte.
	JSON string
	// IsError and ResultType mirror the result's isError and resultType
	// ("" when absent).
	IsError    bool
	ResultType string
}

// ParamsBuilder writes a params object member by member.
type ParamsBuilder struct{ b []byte }

// String adds a string member.
func (p *ParamsBuilder) String(key, value string) {
	p.key(key)
	p.b = rawjson.AppendString(p.b, value)
}

// Raw adds a member whose value is JSON text, copied as it is.
func (p *ParamsBuilder) Raw(key string, value []byte) {
	p.key(key)
	p.b = append(p.b, value...)
}

func (p *ParamsBuilder) key(k string) {
	if len(p.b) == 0 {
		p.b = append(p.b, '{')
	} else {
		p.b = append(p.b, ',')
	}
	p.b = rawjson.AppendString(p.b, k)
	p.b = append(p.b, ':')
}

// Bytes is the finished object.
func (p *ParamsBuilder) Bytes() []byte {
	if len(p.b) == 0 {
		return []byte("{}")
	}
	return append(p.b, '}')
}

// ErrProtocolViolation: the backend sent something the protocol forbids
// (a server-to-client request on a Modern response, a message that is not
// JSON-RPC, a result that is not JSON). The call failed; the session is
// left alone.
var ErrProtocolViolation = errors.New("the backend broke the MCP protocol")

// maxMessageBytes bounds one message (a response or an event) from a
// backend.
const maxMessageBytes = 32 << 20

// Call sends c on the raw path. Arguments and results are not decoded:
// the result's bytes are the backend's, but for the secrets the redactor
// cuts out of them (redact.go).
func (c *Client) Call(ctx context.Context, call *Call) (*Result, error) {
	res, handled, err := c.callPlain(ctx, call)
	if !handled {
		policy := retryIdempotent
		if call.Method == "tools/call" {
			policy = retryUnsent
		}
		res, err = do(ctx, c, policy, c.budget(ctx), func(ctx context.Context, s *mcp.ClientSession) (*Result, error) {
			return c.exchange(ctx, s, call)
		})
	}
	if err != nil {
		return nil, err
	}
	// The one change to the backend's bytes: its secrets are cut out
	// (redact.go).
	return c.redactResult(ctx, res), nil
}

// SpeaksModern reports whether calls to the backend are stateless Modern
// requests (false before the first session, or for a Legacy session).
func (c *Client) SpeaksModern() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.session != nil && c.session.InitializeResult().ProtocolVersion >= ProtocolModern
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

func (c *Client) nextID() string { return "sb-" + strconv.FormatUint(c.ids.Add(1), 10) }

// exchange sends one call on session s's era and reads its answer.
func (c *Client) exchange(ctx context.Context, s *mcp.ClientSession, call *Call) (*Result, error) {
	version := s.InitializeResult().ProtocolVersion
	modern := version >= ProtocolModern
	if !modern && call.LogLevel != "" {
		// logging/setLevel is per session: a shared Legacy session cannot
		// carry one caller's level (CallToolStreamed can).
		return nil, errors.New("a Legacy backend's log messages need a session of their own")
	}
	id := c.nextID()
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	span := trace.SpanFromContext(ctx)
	if telemetry.Recording() {
		ctx, span = startSpan(ctx, c.cfg.Name, call.Method, call.Name, version)
		defer span.End()
	}
	writeRequest(buf, id, call, modern, version, traceMeta(ctx))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.URL, bytes.NewReader(buf.Bytes()))
	if err != nil {
		return nil, err
	}
	// The era's headers; the stack adds the configured ones, the
	// Authorization and the trace context (stack.go).
	h := req.Header
	h["Content-Type"] = jsonContentType
	h["Accept"] = acceptBoth
	h["Mcp-Protocol-Version"] = []string{version}
	sessionID := ""
	if modern {
		h["Mcp-Method"] = []string{call.Method}
		if call.Name != "" {
			h["Mcp-Name"] = []string{nameHeaderValue(call.Name)}
		}
		for k, v := range call.ParamHeaders {
			h.Set(k, v)
		}
	} else if sessionID = s.ID(); sessionID != "" {
		h["Mcp-Session-Id"] = []string{sessionID}
	}
	resp, err := c.raw.Do(req)
	if err != nil {
		span.SetStatus(codes.Error, "no response")
		c.cancelAtBackend(ctx, s, id, sessionID)
		return nil, err
	}
	span.SetAttributes(semconv.HTTPResponseStatusCode(resp.StatusCode))
	res, err := c.readAnswer(ctx, resp, id, call, modern, s)
	if err != nil {
		span.SetStatus(codes.Error, "call failed")
		c.cancelAtBackend(ctx, s, id, sessionID)
	}
	if resp.StatusCode/100 == 2 {
		// The request was consumed whole before the backend answered 2xx;
		// only then may its buffer be used again.
		bufPool.Put(buf)
	}
	var wire *jsonrpc.Error
	if err != nil && resp.StatusCode == http.StatusNotFound && sessionID != "" && !errors.As(err, &wire) {
		return nil, fmt.Errorf("%w (HTTP 404 for session %s)", mcp.ErrSessionMissing, sessionID)
	}
	if errors.As(err, &wire) && wire.Code == mcp.CodeUnsupportedProtocolVersion {
		// The backend was restarted speaking another revision: it refused
		// the request unread, and the session is opened again in what it
		// speaks now (a plain call goes the usual way: plaincalls.go).
		return nil, fmt.Errorf("%w (the backend no longer speaks %s)", mcp.ErrSessionMissing, version)
	}
	return res, err
}

var (
	jsonContentType = []string{"application/json"}
	acceptBoth      = []string{"application/json, text/event-stream"}
)

// traceMeta is the trace context of a request to a backend, for its
// _meta (SEP-414: traceparent, tracestate), the same as the headers the
// stack sets (stack.go): nil when there is none. Baggage is never sent.
func traceMeta(ctx context.Context) propagation.MapCarrier {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return nil
	}
	carrier := propagation.MapCarrier{}
	otel.GetTextMapPropagator().Inject(ctx, carrier)
	return carrier
}

// writeRequest writes the JSON-RPC request: params with _meta in front.
func writeRequest(buf *bytes.Buffer, id string, call *Call, modern bool, version string, traceCtx propagation.MapCarrier) {
	b := buf.AvailableBuffer()
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = rawjson.AppendString(b, id)
	b = append(b, `,"method":`...)
	b = rawjson.AppendString(b, call.Method)
	b = append(b, `,"params":{"_meta":{`...)
	n := 0
	member := func(key string) {
		if n > 0 {
			b = append(b, ',')
		}
		n++
		b = rawjson.AppendString(b, key)
		b = append(b, ':')
	}
	if modern {
		member(mcp.MetaKeyProtocolVersion)
		b = rawjson.AppendString(b, version)
		member(mcp.MetaKeyClientCapabilities)
		if len(call.ClientCapabilities) > 0 {
			b = append(b, call.ClientCapabilities...)
		} else {
			b = append(b, '{', '}')
		}
		member(mcp.MetaKeyClientInfo)
		b = append(b, clientInfoJSON...)
		if call.LogLevel != "" {
			member(mcp.MetaKeyLogLevel)
			b = rawjson.AppendString(b, string(call.LogLevel))
		}
	}
	for _, k := range []string{"traceparent", "tracestate"} {
		if v := traceCtx[k]; v != "" {
			member(k)
			b = rawjson.AppendString(b, v)
		}
	}
	if call.Progress {
		// The request id is unique in this process, so it is a progress
		// token no other call shares, even on a shared Legacy session.
		member("progressToken")
		b = rawjson.AppendString(b, id)
	}
	b = append(b, '}')
	if p := bytes.TrimSpace(call.Params); len(p) > 2 {
		b = append(b, ',')
		b = append(b, p[1:]...)
	} else {
		b = append(b, '}')
	}
	b = append(b, '}')
	buf.Write(b)
}

var clientInfoJSON = func() []byte {
	b, _ := json.Marshal(Implementation)
	return b
}()

// nameHeaderValue is the Mcp-Name header for a name: as it is (go-sdk
// servers compare it undecoded, and a decoding server gets the same
// value), unless a header cannot carry it as it is; then base64 in the
// spec's =?base64?...?= form.
func nameHeaderValue(name string) string {
	if name == "" || name[0] == ' ' || name[0] == '\t' || name[len(name)-1] == ' ' || name[len(name)-1] == '\t' || strings.ContainsFunc(name, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return paramheader.EncodeValue(name)
	}
	return name
}

// readAnswer reads the response to request id: one JSON message, or an
// event stream whose notifications are relayed until the response.
func (c *Client) readAnswer(ctx context.Context, resp *http.Response, id string, call *Call, modern bool, s *mcp.ClientSession) (*Result, error) {
	if resp.StatusCode == http.StatusOK && isEventStream(resp.Header.Get("Content-Type")) {
		// readStream closes the body, or has its end read after it returns.
		return c.readStream(ctx, resp.Body, id, call, modern, s)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, rejection(resp, call.Method)
	}
	// Not an event stream: its type is parsed in full.
	if ctype, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); ctype != "application/json" {
		return nil, fmt.Errorf("%w: response of type %q", ErrProtocolViolation, ctype)
	}
	body, err := readBounded(resp.Body)
	if err != nil {
		return nil, err
	}
	m, err := parseMessage(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrProtocolViolation, err)
	}
	return answerOf(m, id)
}

// rejection turns a non-200 answer into an error, the one reading of an
// HTTP error answer on every route: the backend's JSON-RPC error if the
// body is one (a Modern backend answers many errors with HTTP 4xx),
// refusal's reading of a 400, 401, 403, 413 or 431, a *statusError
// otherwise (the request failed, the session stays; a Retry-After is
// kept). It reads up to 64 KiB of the body and puts back what it read.
func rejection(resp *http.Response, method string) error {
	if err := refusal(resp); err != nil {
		return err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(body), resp.Body), resp.Body}
	if m, err := parseMessage(body); err == nil && m.err != nil {
		return wireError(m.err)
	}
	retryAfter := resp.Header.Get("Retry-After")
	return &statusError{method: method, status: resp.StatusCode, retryAfter: retryAfterSeconds(retryAfter, time.Now()), retryAfterGiven: retryAfter != ""}
}

func readBounded(r io.Reader) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(r, maxMessageBytes+1))
	if err != nil {
		return nil, err
	}
	if len(body) > maxMessageBytes {
		return nil, fmt.Errorf("%w: a message over %d bytes", ErrProtocolViolation, maxMessageBytes)
	}
	return body, nil
}

// answerOf is the outcome the response message m carries for request id.
func answerOf(m message, id string) (*Result, error) {
	if !idIs(m.id, id) {
		return nil, fmt.Errorf("%w: a response for another request", ErrProtocolViolation)
	}
	if m.err != nil {
		return nil, wireError(m.err)
	}
	if m.result == nil || !json.Valid(m.result) {
		return nil, fmt.Errorf("%w: a response without a valid result", ErrProtocolViolation)
	}
	res := &Result{JSON: string(m.result)}
	res.IsError, res.ResultType = resultFacts(m.result)
	return res, nil
}

func idIs(raw []byte, id string) bool {
	if len(raw) == len(id)+2 && raw[0] == '"' && string(raw[1:len(raw)-1]) == id {
		return true
	}
	var s string
	return json.Unmarshal(raw, &s) == nil && s == id
}

// wireError decodes a JSON-RPC error object; classify turns it into a
// *ProtocolError with secrets removed.
func wireError(raw []byte) error {
	var e struct {
		Code    int64           `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(raw, &e); err != nil {
		return fmt.Errorf("%w: a malformed error object", ErrProtocolViolation)
	}
	return &jsonrpc.Error{Code: e.Code, Message: e.Message, Data: e.Data}
}

// drainGraceAfterAnswer bounds how long the rest of an event stream is
// read after its response arrived, so the connection is kept for reuse;
// a backend that holds the stream open loses the connection instead.
// (A variable for tests.)
var drainGraceAfterAnswer = drainGrace

// drainStream reads what is left of an answered event stream, for at most
// drainGraceAfterAnswer, and closes it.
func drainStream(body io.ReadCloser) {
	t := time.AfterFunc(drainGraceAfterAnswer, func() { _ = body.Close() })
	_, _ = io.Copy(io.Discard, body)
	t.Stop()
	_ = body.Close()
}

// readStream reads an event stream until the response to id, and closes
// it.
func (c *Client) readStream(ctx context.Context, body io.ReadCloser, id string, call *Call, modern bool, s *mcp.ClientSession) (*Result, error) {
	events := newEventReader(body)
	defer events.release()
	// drainStream closes the body once the answer is in; until then this
	// does.
	drained := false
	defer func() {
		if !drained {
			_ = body.Close()
		}
	}()
	for {
		data, err := events.next()
		if err == io.EOF {
			return nil, errors.New("the backend ended the stream without a response")
		}
		if err != nil {
			return nil, err
		}
		m, err := parseMessage(data)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrProtocolViolation, err)
		}
		switch {
		case m.isNotification():
			c.relay(ctx, m, id, call)
		case m.isRequest():
			if modern {
				return nil, fmt.Errorf("%w: a server-to-client request (%s) on a Modern response stream", ErrProtocolViolation, m.method)
			}
			c.refuseRequest(ctx, s, m)
		default:
			res, err := answerOf(m, id)
			// The end of the stream is read so that the connection is used
			// again. A backend writes it after the answer, in a write of its
			// own (go-sdk's final chunk: about 25 µs later at one client),
			// so the answer does not wait for it when the transport lets the
			// rest of the exchange outlive this call.
			drained = true
			if d, ok := body.(interface{ Detach() bool }); ok && d.Detach() {
				go drainStream(body)
			} else {
				drainStream(body)
			}
			return res, err
		}
	}
}

// relay hands a notification the call in ctx asked for to call.Notify.
func (c *Client) relay(ctx context.Context, m message, id string, call *Call) {
	if call.Notify == nil {
		return
	}
	switch {
	case call.Progress && m.methodIs(MethodProgress):
		if token, ok := rawjson.Get(m.params, "progressToken"); ok && idIs(token, id) {
			call.Notify(MethodProgress, c.redactNotification(ctx, m.params))
		}
	case call.LogLevel != "" && m.methodIs(MethodLog):
		var p struct {
			Level mcp.LoggingLevel `json:"level"`
		}
		if json.Unmarshal(m.params, &p) == nil && LevelAtLeast(p.Level, call.LogLevel) {
			call.Notify(MethodLog, c.redactNotification(ctx, m.params))
		}
	}
}
