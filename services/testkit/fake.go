package testkit

import (
	"context"
	"strconv"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// What the two fakes share: the count of their calls, the check a test
// runs before each, and the open streams of their watch RPCs.

// calls counts a fake's calls by RPC.
type calls struct {
	mu sync.Mutex
	n  map[string]int
}

// begin counts a call of method, then runs check (when set) on it.
func (c *calls) begin(ctx context.Context, check func(context.Context, string, any) error, method string, req any) error {
	c.mu.Lock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[method]++
	c.mu.Unlock()
	if check != nil {
		return check(ctx, method, req)
	}
	return nil
}

// count reports how many calls of method there were.
func (c *calls) count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[method]
}

// answer is the answer of a unary RPC: begun's error, else fn's answer,
// else, when the test set no fn, unimplemented's (UNIMPLEMENTED).
func answer[Req, Resp any](begun error, fn, unimplemented func(context.Context, Req) (Resp, error), ctx context.Context, req Req) (Resp, error) {
	if begun != nil {
		var none Resp
		return none, begun
	}
	if fn == nil {
		return unimplemented(ctx, req)
	}
	return fn(ctx, req)
}

// watch is one open stream of a watch RPC: the events it is to send, and
// end, closed to end it.
type watch[T any] struct {
	events chan T
	end    chan struct{}
}

// watches are the open streams of one watch RPC, guarded by their fake's
// lock.
type watches[T any] map[*watch[T]]bool

// open adds a stream to *ws.
func open[T any](ws *watches[T]) *watch[T] {
	if *ws == nil {
		*ws = watches[T]{}
	}
	w := &watch[T]{events: make(chan T, 64), end: make(chan struct{})}
	(*ws)[w] = true
	return w
}

// send queues ev on every stream; one that fell 64 events behind misses
// it, as a slow subscriber of a real service would.
func (ws watches[T]) send(ev T) {
	for w := range ws {
		select {
		case w.events <- ev:
		default:
		}
	}
}

// endAll ends every stream.
func (ws watches[T]) endAll() {
	for w := range ws {
		close(w.end)
		delete(ws, w)
	}
}

// serve sends first, then w's events, until the caller goes away or w is
// ended (UNAVAILABLE, as when the service shuts down).
func (w *watch[T]) serve(ctx context.Context, first T, send func(T) error) error {
	if err := send(first); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-w.end:
			return status.Error(codes.Unavailable, "the watch was ended")
		case ev := <-w.events:
			if err := send(ev); err != nil {
				return err
			}
		}
	}
}

// page is one page of items with cursors "<kind>:<offset>": a cursor of
// another kind, or past the end, is INVALID_CURSOR.
func page[T any](kind string, items []T, cursor string, size int) ([]T, string, error) {
	start := 0
	if cursor != "" {
		k, off, ok := strings.Cut(cursor, ":")
		n, err := strconv.Atoi(off)
		if !ok || k != kind || err != nil || n < 0 || n > len(items) {
			return nil, "", apierr.New(codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_CURSOR, "invalid cursor")
		}
		start = n
	}
	end := min(start+size, len(items))
	next := ""
	if end < len(items) {
		next = kind + ":" + strconv.Itoa(end)
	}
	return items[start:end], next, nil
}
