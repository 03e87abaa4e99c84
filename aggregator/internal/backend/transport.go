package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"time"
)

// headerInjector adds the configured headers to every request, and the
// Authorization of the call (WithCaller) or, without one, the backend's
// own client credentials token when it has one (service).
type headerInjector struct {
	headers map[string]string
	service func(context.Context) (string, error)
	next    http.RoundTripper
}

func (h headerInjector) RoundTrip(r *http.Request) (*http.Response, error) {
	auth := callerAuthorization(r.Context())
	if auth == "" && h.service != nil {
		v, err := h.service(r.Context())
		if err != nil {
			return nil, err
		}
		auth = v
	}
	r = r.Clone(r.Context())
	for k, v := range h.headers {
		r.Header.Set(k, v)
	}
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	resp, err := h.next.RoundTrip(r)
	if err == nil {
		if cred := callerCredential(r.Context()); cred != nil {
			if ch := challengeOf(resp); ch != nil {
				cred.challenge.Store(ch)
			}
		}
	}
	return resp, err
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
	return resend(d.next, ctx, r)
}

// resender is the raw path's transport: it sends a request once more on a
// fresh connection when a pooled one turns out dead, as detacher does; the
// raw path reads its responses to the end itself, so nothing needs
// detaching.
type resender struct{ next http.RoundTripper }

func (t resender) RoundTrip(r *http.Request) (*http.Response, error) {
	return resend(t.next, r.Context(), r)
}

func resend(next http.RoundTripper, ctx context.Context, r *http.Request) (*http.Response, error) {
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
		resp, err := next.RoundTrip(req)
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
