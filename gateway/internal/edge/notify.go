package edge

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
)

// A tools/call whose client asked for progress (_meta.progressToken) or log
// messages (Modern: _meta logLevel; Legacy: logging/setLevel) is answered
// over SSE: the backend's notifications for that call, in order, then the
// response. Notifications only ever go on the call's own response stream,
// never on a listen or GET stream.

// logLevels are MCP's log levels (RFC 5424 severities).
var logLevels = map[string]bool{
	"debug": true, "info": true, "notice": true, "warning": true,
	"error": true, "critical": true, "alert": true, "emergency": true,
}

// sessionLogLevels remembers the level each Legacy session set with
// logging/setLevel. A session id is sealed when it is minted and cannot
// carry later state, so the level lives on the replica that received
// logging/setLevel: a call that lands on another replica gets no log
// messages (progress is unaffected), until the client sets the level there.
type sessionLogLevels struct {
	mu     sync.Mutex
	levels map[string]sessionLogLevel // session digest -> level
}

type sessionLogLevel struct {
	level   string
	expires time.Time
}

func newSessionLogLevels() *sessionLogLevels {
	return &sessionLogLevels{levels: map[string]sessionLogLevel{}}
}

// set records level for the session until it expires, and forgets the
// levels of sessions that have expired.
func (s *sessionLogLevels) set(session, level string, expires time.Time) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.levels {
		if now.After(v.expires) {
			delete(s.levels, k)
		}
	}
	s.levels[session] = sessionLogLevel{level: level, expires: expires}
}

func (s *sessionLogLevels) get(session string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.levels[session]
	if !ok || time.Now().After(v.expires) {
		return ""
	}
	return v.level
}

// wantsNotifications reports whether a call's client asked for
// notifications the aggregator must stream.
func wantsNotifications(rc *aggregatorv1.RequestContext) bool {
	return rc.GetProgressTokenJson() != "" || rc.GetLogLevel() != ""
}

// callToolStreaming calls a tool with CallToolStream and writes each
// notification to the client's response stream as it arrives.
func (g *Gateway) callToolStreaming(ctx context.Context, c *call, req *aggregatorv1.CallToolRequest) (*aggregatorv1.CallToolResponse, error) {
	stream, err := g.agg.CallToolStream(ctx, &aggregatorv1.CallToolStreamRequest{Call: req, Principal: req.GetPrincipal()})
	if err != nil {
		return nil, err
	}
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil, errors.New("aggregator: call stream ended without a result")
		}
		if err != nil {
			return nil, err
		}
		if res := ev.GetResult(); res != nil {
			return res, nil
		}
		n := ev.GetNotification()
		if n == nil || !json.Valid([]byte(n.GetParamsJson())) {
			continue
		}
		if !c.streaming {
			startSSE(c.w)
			c.streaming = true
		}
		msg, _ := json.Marshal(struct {
			JSONRPC string          `json:"jsonrpc"`
			Method  string          `json:"method"`
			Params  json.RawMessage `json:"params"`
		}{"2.0", n.GetMethod(), json.RawMessage(n.GetParamsJson())})
		if _, err := c.w.Write(sseEvent(msg)); err != nil {
			return nil, err
		}
		if err := http.NewResponseController(c.w).Flush(); err != nil {
			return nil, err
		}
	}
}
