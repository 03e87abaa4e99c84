package methods

import (
	"net/http"
	"strconv"
	"sync"

	"github.com/switchboard-mcp/switchboard/gateway/internal/session"
	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// streamLimits bounds the streams a replica holds open, per principal and
// in total: notification streams (listen, GET), each holding a goroutine
// here and a catalog watch in the aggregator, which recomputes the
// watcher's view on every catalog change, and the waits of a 2025-11-25
// tasks/result, each holding a goroutine and reading its task at the
// task's poll interval; a client must not be able to open them without
// end. A stream takes its place before its watch is opened (its first
// read made) and gives it back when it ends.
type streamLimits struct {
	perPrincipal, total int

	mu          sync.Mutex
	open        int
	byPrincipal map[string]int
}

func newStreamLimits(perPrincipal, total int) *streamLimits {
	return &streamLimits{perPrincipal: perPrincipal, total: total, byPrincipal: map[string]int{}}
}

// acquire takes a place for one of p's streams, or says why there is none:
// an error for HTTP 429.
func (l *streamLimits) acquire(p *commonv1.Principal) (release func(), rerr *wire.Error) {
	key := session.PrincipalDigest(p)
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.byPrincipal[key] >= l.perPrincipal:
		return nil, tooManyStreams("at most " + strconv.Itoa(l.perPrincipal) + " per principal are open on this server; close one first")
	case l.open >= l.total:
		return nil, tooManyStreams("this server holds as many as it serves; retry later")
	}
	l.byPrincipal[key]++
	l.open++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			l.open--
			if l.byPrincipal[key]--; l.byPrincipal[key] == 0 {
				delete(l.byPrincipal, key)
			}
		})
	}, nil
}

// streamRetryAfterSeconds is the Retry-After of a refused stream.
const streamRetryAfterSeconds = 60

// tooManyStreams is the refusal of a stream past a limit: HTTP 429, and
// for a listen the JSON-RPC error in its body (-32603: MCP defines no code
// of its own for it).
func tooManyStreams(why string) *wire.Error {
	e := wire.NewError(wire.CodeInternalError, "too many open streams (notification streams and tasks/result waits): "+why)
	e.HTTPStatus = http.StatusTooManyRequests
	// Streams end when their clients go; a minute is a fair time to wait
	// for some of them to.
	e.RetryAfter = streamRetryAfterSeconds
	return e
}
