package edge

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
)

// response writes one MCP response: plain JSON, or an SSE stream once a
// method sends something before its result (notifications, input
// requests, a listen's events). It is the methods' Responder.
type response struct {
	w         http.ResponseWriter
	rc        *http.ResponseController
	streaming bool
}

func newResponse(w http.ResponseWriter) *response {
	return &response{w: w, rc: http.NewResponseController(w)}
}

func (r *response) startSSE() {
	if r.streaming {
		return
	}
	r.streaming = true
	h := r.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	// Proxies such as nginx must not buffer a notification stream.
	h.Set("X-Accel-Buffering", "no")
	r.w.WriteHeader(http.StatusOK)
}

func (r *response) flushed(b []byte) error {
	if err := writeProgressing(r.rc, r.w, b); err != nil {
		return err
	}
	return r.rc.Flush()
}

// Send implements methods.Responder.
func (r *response) Send(msg []byte) error {
	r.startSSE()
	return r.flushed(wire.SSEEvent(msg))
}

// Comment implements methods.Responder.
func (r *response) Comment(text string) error {
	r.startSSE()
	return r.flushed(wire.SSEComment(text))
}

// Prime implements methods.Responder.
func (r *response) Prime(id string, retry time.Duration) error {
	r.startSSE()
	return r.flushed(wire.SSEPrime(id, retry))
}

// finish writes the final response. On a stream it is the last event;
// otherwise it is JSON with the status the era gives an error (Legacy
// errors travel in a 200, but for a 429).
func (r *response) finish(id json.RawMessage, result json.RawMessage, rerr *wire.Error, modern bool) {
	if r.streaming {
		_ = r.flushed(wire.SSEEvent(wire.Response(id, result, rerr)))
		return
	}
	status := http.StatusOK
	// A Legacy error keeps its 200, except one that says when to come
	// back (a rate limit's 429 with Retry-After).
	if rerr != nil && (modern || rerr.HTTPStatus != 0) {
		status = rerr.ModernStatus()
		setRetryAfter(r.w, rerr)
	}
	writeJSON(r.w, r.rc, status, id, result, rerr)
}

// writeTimeout bounds how long an answer's write may make no progress.
// The server has no WriteTimeout, as notification streams live long;
// without this a client that stops reading (its receive window full)
// would hold the request, and the answer it did not take, for as long as
// its connection stays open. A slow client still gets a large answer: the
// deadline is renewed for each writeChunk that goes out. net/http lifts
// it once the answer is flushed.
var writeTimeout = time.Minute

// writeChunk is how much of an answer one write deadline covers.
const writeChunk = 64 << 10

// writeProgressing writes b to w, giving each writeChunk of it
// writeTimeout.
func writeProgressing(rc *http.ResponseController, w http.ResponseWriter, b []byte) error {
	for {
		n := min(len(b), writeChunk)
		_ = rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := w.Write(b[:n]); err != nil {
			return err
		}
		if b = b[n:]; len(b) == 0 {
			return nil
		}
	}
}

// writeJSON writes one JSON-RPC response as application/json, through
// w's controller rc.
func writeJSON(w http.ResponseWriter, rc *http.ResponseController, status int, id json.RawMessage, result json.RawMessage, rerr *wire.Error) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-cache, no-transform")
	w.WriteHeader(status)
	_ = writeProgressing(rc, w, wire.Response(id, result, rerr))
}

// setRetryAfter adds the Retry-After of an error that has one.
func setRetryAfter(w http.ResponseWriter, rerr *wire.Error) {
	if rerr.RetryAfter > 0 && rerr.HTTPStatus != 0 {
		w.Header().Set("Retry-After", strconv.Itoa(rerr.RetryAfter))
	}
}
