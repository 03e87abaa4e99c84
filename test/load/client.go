package load

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Era is an MCP protocol era as a client chooses it.
type Era struct {
	// Name is "Modern" or "Legacy".
	Name string
	// Request is the ProtocolVersion the client asks for; empty is the
	// go-sdk default (Modern, server/discover).
	Request string
	// Want is the version the session must end up with, so a silent
	// fallback from Modern to Legacy cannot pass for a Modern figure.
	Want string
}

// The two eras Switchboard serves on one URL.
var (
	Modern = Era{Name: "Modern", Want: "2026-07-28"}
	Legacy = Era{Name: "Legacy", Request: "2025-11-25", Want: "2025-11-25"}
	Eras   = []Era{Modern, Legacy}
)

// clientImpl is how the load client introduces itself.
var clientImpl = &mcp.Implementation{Name: "switchboard-load", Version: "1"}

// sharedTransport carries every session of a run. Enough idle connections
// per host are kept for the highest concurrency, so keep-alive connections
// are reused the way a long-lived client reuses them, and a run measures
// the servers rather than TCP connection set-up.
var sharedTransport = &http.Transport{
	MaxIdleConns:        1024,
	MaxIdleConnsPerHost: 256,
	IdleConnTimeout:     90 * time.Second,
	DisableCompression:  true,
}

// byteCounter counts the response body bytes of the requests it carries,
// and adds the session's bearer key to each when it has one.
type byteCounter struct {
	next  http.RoundTripper
	bytes atomic.Int64
	// authorization is the Authorization header value, or "".
	authorization string
}

func (b *byteCounter) RoundTrip(req *http.Request) (*http.Response, error) {
	if b.authorization != "" {
		// A RoundTripper must not change the caller's request.
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", b.authorization)
	}
	resp, err := b.next.RoundTrip(req)
	if err == nil && resp.Body != nil {
		resp.Body = &countingBody{ReadCloser: resp.Body, n: &b.bytes}
	}
	return resp, err
}

type countingBody struct {
	io.ReadCloser
	n *atomic.Int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// Session is one connected MCP client session and the bytes it received.
type Session struct {
	*mcp.ClientSession
	counter *byteCounter
}

// BytesReceived is the response body bytes received so far.
func (s *Session) BytesReceived() int64 { return s.counter.bytes.Load() }

// Connect opens a session with url in era e and checks the negotiated
// version. It returns how long Connect took.
func Connect(ctx context.Context, url string, e Era) (*Session, time.Duration, error) {
	return ConnectWith(ctx, url, e, "")
}

// ConnectWith is Connect presenting key as a bearer token on every
// request of the session ("" presents none).
func ConnectWith(ctx context.Context, url string, e Era, key string) (*Session, time.Duration, error) {
	counter := &byteCounter{next: sharedTransport}
	if key != "" {
		counter.authorization = "Bearer " + key
	}
	transport := &mcp.StreamableClientTransport{
		Endpoint:   url,
		HTTPClient: &http.Client{Transport: counter},
	}
	var opts *mcp.ClientSessionOptions
	if e.Request != "" {
		opts = &mcp.ClientSessionOptions{ProtocolVersion: e.Request}
	}
	client := mcp.NewClient(clientImpl, nil)
	start := time.Now()
	cs, err := client.Connect(ctx, transport, opts)
	took := time.Since(start)
	if err != nil {
		return nil, 0, fmt.Errorf("connect %s (%s): %w", url, e.Name, err)
	}
	if got := cs.InitializeResult().ProtocolVersion; got != e.Want {
		cs.Close()
		return nil, 0, fmt.Errorf("connect %s (%s): negotiated %s, want %s", url, e.Name, got, e.Want)
	}
	return &Session{ClientSession: cs, counter: counter}, took, nil
}

// CallEcho calls an echo tool and checks that it answered without error.
func CallEcho(ctx context.Context, s *Session, tool string) error {
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: map[string]any{"text": "load"}})
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("%s answered isError: %v", tool, contentText(res))
	}
	return nil
}

// maxPages bounds a list walk, so a server that returns a cursor forever
// cannot keep the harness walking.
const maxPages = 1000

// Walk lists every tool page by page and returns the number of tools and
// pages.
func Walk(ctx context.Context, s *Session) (tools, pages int, err error) {
	cursor := ""
	for pages < maxPages {
		res, err := s.ListTools(ctx, &mcp.ListToolsParams{Cursor: cursor})
		if err != nil {
			return tools, pages, fmt.Errorf("tools/list page %d: %w", pages+1, err)
		}
		pages++
		tools += len(res.Tools)
		if res.NextCursor == "" {
			return tools, pages, nil
		}
		cursor = res.NextCursor
	}
	return tools, pages, errors.New("tools/list did not end within the page bound")
}

// FindTool calls find_tool on an optimizer endpoint.
func FindTool(ctx context.Context, s *Session, query string) error {
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "find_tool", Arguments: map[string]any{"tool_description": query}})
	if err != nil {
		return err
	}
	if res.IsError {
		return fmt.Errorf("find_tool answered isError: %v", contentText(res))
	}
	return nil
}

// FindToolHits calls find_tool and returns how many tools it found.
func FindToolHits(ctx context.Context, s *Session, query string) (int, error) {
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: "find_tool", Arguments: map[string]any{"tool_description": query}})
	if err != nil {
		return 0, err
	}
	if res.IsError {
		return 0, fmt.Errorf("find_tool answered isError: %v", contentText(res))
	}
	// The hits are in structuredContent, and the same JSON in the text
	// content for clients that read only text.
	raw := []byte(contentText(res))
	if res.StructuredContent != nil {
		if raw, err = json.Marshal(res.StructuredContent); err != nil {
			return 0, err
		}
	}
	var found struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(raw, &found); err != nil {
		return 0, fmt.Errorf("find_tool result: %w", err)
	}
	return len(found.Tools), nil
}

func contentText(res *mcp.CallToolResult) string {
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			return t.Text
		}
	}
	return ""
}
