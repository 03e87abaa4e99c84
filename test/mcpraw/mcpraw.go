// Package mcpraw speaks MCP 2026-07-28 over raw HTTP: one stateless POST
// per request, with the per-request _meta and the headers the revision
// binds (Mcp-Protocol-Version, Mcp-Method, Mcp-Name), as go-sdk's Modern
// client sends them. Tests and the load tool use it for what go-sdk's
// client has no API for (the tasks extension), and to measure the gateway
// without a client library's costs.
package mcpraw

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"

	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// Version is the revision the client speaks.
const Version = "2026-07-28"

// Client capabilities a request may declare.
var (
	NoCapabilities    = json.RawMessage(`{}`)
	TasksCapabilities = json.RawMessage(`{"extensions":{"io.modelcontextprotocol/tasks":{}}}`)
	// AskableTasksCapabilities also answer elicitations.
	AskableTasksCapabilities = json.RawMessage(`{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`)
)

// Client sends requests to one MCP endpoint.
type Client struct {
	URL string
	// Authorization is the Authorization header's value, or "".
	Authorization string
	// Capabilities are declared in every request's _meta; nil declares
	// none.
	Capabilities json.RawMessage
	// Name is the clientInfo name ("mcpraw" when empty).
	Name string
	// HTTP sends the requests; nil is http.DefaultClient.
	HTTP *http.Client
	// Session, when set, sends each request in that 2025-11-25 session
	// (Mcp-Session-Id, that revision's version header), without the
	// Modern _meta, Mcp-Method and Mcp-Name.
	Session string
	ids     atomic.Int64
}

// LegacyVersion is the revision a Session's requests name.
const LegacyVersion = "2025-11-25"

// Error is a JSON-RPC error.
type Error struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *Error) Error() string { return fmt.Sprintf("error %d: %s", e.Code, e.Message) }

// Answer is one response: its result (raw) or its error.
type Answer struct {
	HTTPStatus int
	Header     http.Header
	Result     json.RawMessage
	Error      *Error
}

// OpenSession initializes a 2025-11-25 session (with Capabilities, or
// none) and sends notifications/initialized; the client's requests are
// then sent in it (Session).
func (c *Client) OpenSession(ctx context.Context) error {
	caps := c.Capabilities
	if caps == nil {
		caps = NoCapabilities
	}
	init, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.ids.Add(1), "method": "initialize", "params": map[string]any{
		"protocolVersion": LegacyVersion, "capabilities": caps, "clientInfo": map[string]any{"name": "mcpraw", "version": "0"}}})
	if err != nil {
		return err
	}
	resp, err := c.post(ctx, init, map[string]string{"Mcp-Protocol-Version": LegacyVersion})
	if err != nil {
		return err
	}
	resp.Body.Close()
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		return fmt.Errorf("initialize: HTTP %d, session %q", resp.StatusCode, id)
	}
	resp, err = c.post(ctx, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), map[string]string{"Mcp-Protocol-Version": LegacyVersion, "Mcp-Session-Id": id})
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("notifications/initialized: HTTP %d", resp.StatusCode)
	}
	c.Session = id
	return nil
}

// post sends body with the client's Authorization and header.
func (c *Client) post(ctx context.Context, body []byte, header map[string]string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.URL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.Authorization != "" {
		req.Header.Set("Authorization", c.Authorization)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	hc := c.HTTP
	if hc == nil {
		hc = http.DefaultClient
	}
	return hc.Do(req)
}

// Send posts one request of method, whose Mcp-Name is name ("" for none),
// with params (its _meta is set here) and reads the answer; err is a
// transport failure or an answer that is no JSON-RPC response.
func (c *Client) Send(ctx context.Context, method, name string, params map[string]any) (Answer, error) {
	if params == nil {
		params = map[string]any{}
	}
	caps := c.Capabilities
	if caps == nil {
		caps = NoCapabilities
	}
	clientName := c.Name
	if clientName == "" {
		clientName = "mcpraw"
	}
	if c.Session == "" {
		params["_meta"] = map[string]any{
			"io.modelcontextprotocol/protocolVersion":    Version,
			"io.modelcontextprotocol/clientInfo":         map[string]any{"name": clientName, "version": "0"},
			"io.modelcontextprotocol/clientCapabilities": caps,
		}
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.ids.Add(1), "method": method, "params": params})
	if err != nil {
		return Answer{}, err
	}
	header := map[string]string{"Mcp-Protocol-Version": Version, "Mcp-Method": method}
	switch {
	case c.Session != "":
		header = map[string]string{"Mcp-Protocol-Version": LegacyVersion, "Mcp-Session-Id": c.Session}
	case name != "":
		header["Mcp-Name"] = name
	}
	resp, err := c.post(ctx, body, header)
	if err != nil {
		return Answer{}, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return Answer{}, err
	}
	a := Answer{HTTPStatus: resp.StatusCode, Header: resp.Header}
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  *Error          `json:"error"`
	}
	if err := json.Unmarshal(mcpspec.LastMessage(resp.Header.Get("Content-Type"), raw), &msg); err != nil || (msg.Result == nil && msg.Error == nil) {
		return a, fmt.Errorf("%s: HTTP %d, not a JSON-RPC response: %.300s", method, resp.StatusCode, raw)
	}
	a.Result, a.Error = msg.Result, msg.Error
	return a, nil
}
