package faults

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Raw Legacy (2025-11-25) HTTP, for tests that must see exactly what goes
// over the wire and when: the SSE events and comments of a response
// stream, a DELETE's status, how long each answer took. go-sdk clients
// hide all three.

// rawLegacy talks to one gateway's MCP endpoint (anonymous principal).
type rawLegacy struct {
	url string
}

// post sends one JSON-RPC message in session (none for initialize) and
// returns the response, whose body the caller reads and closes.
func (r rawLegacy) post(ctx context.Context, session, body string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, r.url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	}
	return http.DefaultClient.Do(req)
}

// exchange posts body and returns the status and the whole answer, within
// timeout.
func (r rawLegacy) exchange(ctx context.Context, session, body string, timeout time.Duration) (int, string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := r.post(ctx, session, body)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// initialize opens a session declaring capabilities (a JSON object) and
// returns its id.
func (r rawLegacy) initialize(ctx context.Context, capabilities string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := r.post(ctx, "", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":`+capabilities+`,"clientInfo":{"name":"faults-raw","version":"0"}}}`)
	if err != nil {
		return "", err
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	id := resp.Header.Get("Mcp-Session-Id")
	if resp.StatusCode != http.StatusOK || id == "" {
		return "", fmt.Errorf("initialize: %s %s", resp.Status, body)
	}
	resp, err = r.post(ctx, id, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
	if err != nil {
		return "", err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		return "", fmt.Errorf("notifications/initialized: %s", resp.Status)
	}
	return id, nil
}

// delete ends session and returns the status, within timeout.
func (r rawLegacy) delete(ctx context.Context, session string, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, r.url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Mcp-Session-Id", session)
	req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	resp.Body.Close()
	return resp.StatusCode, nil
}

// sseLine is one line of an event stream: an event's data, or a comment.
type sseLine struct {
	data    string // the data of an event
	comment string // the text of a comment line (": text")
}

// sseLines reads an event stream line by line onto a channel, closed when
// the stream ends.
func sseLines(body io.Reader) <-chan sseLine {
	out := make(chan sseLine, 64)
	go func() {
		defer close(out)
		sc := bufio.NewScanner(body)
		sc.Buffer(make([]byte, 64<<10), 4<<20)
		for sc.Scan() {
			line := sc.Text()
			switch {
			case strings.HasPrefix(line, ":"):
				out <- sseLine{comment: strings.TrimSpace(strings.TrimPrefix(line, ":"))}
			case strings.HasPrefix(line, "data:"):
				out <- sseLine{data: strings.TrimSpace(strings.TrimPrefix(line, "data:"))}
			}
		}
	}()
	return out
}
