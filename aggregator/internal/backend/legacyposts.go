package backend

import (
	"bytes"
	"context"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-mcp/switchboard/services/rawjson"
)

// Messages the raw path posts into a Legacy backend's session besides the
// call itself: the refusal of a request it cannot serve, and the
// cancellation of a call it gave up on.

// refuseRequest answers a Legacy backend's server-to-client request on a
// raw call with a JSON-RPC error, so it does not wait for an answer that
// would never come: the shared session declared no client capabilities,
// and calls that may ask the client for input go through held.go instead.
func (c *Client) refuseRequest(ctx context.Context, s *mcp.ClientSession, m message) {
	b := append([]byte(`{"jsonrpc":"2.0","id":`), m.id...)
	b = append(b, `,"error":{"code":-32601,"message":"the aggregator does not serve this request on a shared session"}}`...)
	if err := c.postInSession(ctx, s, b); err != nil {
		c.log.Warn("could not refuse a backend's request", "method", string(m.method), "err", c.Redact(err.Error()))
	}
}

// cancelNotifyTimeout bounds the notifications/cancelled sent to a Legacy
// backend for a call the aggregator gave up on (go-sdk's own bound).
const cancelNotifyTimeout = 5 * time.Second

// cancelAtBackend tells a Legacy backend that the call with id, sent in
// its session sessionID, is cancelled, when ctx ended before the answer
// (the caller cancelled, or the backend timeout passed). In that era a
// closed connection is not a cancellation: without the notification the
// backend would carry on. It runs in the background and never delays the
// caller; Modern backends (no sessionID) take the closed stream as the
// cancellation.
func (c *Client) cancelAtBackend(ctx context.Context, s *mcp.ClientSession, id, sessionID string) {
	if sessionID == "" || ctx.Err() == nil {
		return
	}
	b := []byte(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":`)
	b = rawjson.AppendString(b, id)
	b = append(b, `,"reason":"the caller cancelled the request"}}`...)
	go func() {
		nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cancelNotifyTimeout)
		defer cancel()
		if err := c.postInSession(nctx, s, b); err != nil {
			c.log.Info("could not tell the backend a call was cancelled", "err", c.Redact(err.Error()))
		}
	}()
}

// postInSession posts one JSON-RPC notification or response to the backend
// in Legacy session s and discards the answer.
func (c *Client) postInSession(ctx context.Context, s *mcp.ClientSession, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header["Content-Type"] = jsonContentType
	req.Header["Accept"] = acceptBoth
	req.Header.Set("Mcp-Protocol-Version", s.InitializeResult().ProtocolVersion)
	req.Header.Set("Mcp-Session-Id", s.ID())
	for k, v := range c.cfg.Headers {
		req.Header.Set(k, v)
	}
	resp, err := c.raw.Do(req)
	if err != nil {
		return err
	}
	return drain(resp.Body)
}
