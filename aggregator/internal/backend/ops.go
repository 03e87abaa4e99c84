package backend

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MaxListPages caps how many pages of one list a backend may return. A
// backend that pages forever would otherwise stall every catalog build.
const MaxListPages = 1000

// Lists is everything a backend offers.
type Lists struct {
	Tools             []*mcp.Tool
	Resources         []*mcp.Resource
	ResourceTemplates []*mcp.ResourceTemplate
	Prompts           []*mcp.Prompt
	// Capabilities the backend announced when the lists were taken.
	Capabilities *mcp.ServerCapabilities
	// ProtocolVersion negotiated with the backend.
	ProtocolVersion string
}

// ListAll fetches every list the backend announces, following each list's
// cursors to the end. The outcome feeds the backend's health.
func (c *Client) ListAll(ctx context.Context) (*Lists, error) {
	start := time.Now()
	lists, err := do(ctx, c, retryIdempotent, 0, c.listAll)
	if err != nil {
		if ctx.Err() == nil {
			c.health.failure(c.Redact(err.Error()), failureOf(err))
		}
		return nil, err
	}
	c.health.success(time.Since(start), lists)
	return lists, nil
}

func (c *Client) listAll(ctx context.Context, s *mcp.ClientSession) (*Lists, error) {
	init := s.InitializeResult()
	caps := init.Capabilities
	if caps == nil {
		caps = &mcp.ServerCapabilities{}
	}
	out := &Lists{Capabilities: caps, ProtocolVersion: init.ProtocolVersion}
	var err error
	if caps.Tools != nil {
		if out.Tools, err = collect(ctx, "tools", func(ctx context.Context, cur string) ([]*mcp.Tool, string, error) {
			r, err := bounded(ctx, c, func(ctx context.Context) (*mcp.ListToolsResult, error) {
				return s.ListTools(ctx, &mcp.ListToolsParams{Cursor: cur})
			})
			if err != nil {
				return nil, "", err
			}
			return r.Tools, r.NextCursor, nil
		}); err != nil {
			return nil, err
		}
	}
	if caps.Resources != nil {
		if out.Resources, err = collect(ctx, "resources", func(ctx context.Context, cur string) ([]*mcp.Resource, string, error) {
			r, err := bounded(ctx, c, func(ctx context.Context) (*mcp.ListResourcesResult, error) {
				return s.ListResources(ctx, &mcp.ListResourcesParams{Cursor: cur})
			})
			if err != nil {
				return nil, "", err
			}
			return r.Resources, r.NextCursor, nil
		}); err != nil {
			return nil, err
		}
		if out.ResourceTemplates, err = collect(ctx, "resource templates", func(ctx context.Context, cur string) ([]*mcp.ResourceTemplate, string, error) {
			r, err := bounded(ctx, c, func(ctx context.Context) (*mcp.ListResourceTemplatesResult, error) {
				return s.ListResourceTemplates(ctx, &mcp.ListResourceTemplatesParams{Cursor: cur})
			})
			if err != nil {
				return nil, "", err
			}
			return r.ResourceTemplates, r.NextCursor, nil
		}); err != nil {
			return nil, err
		}
	}
	if caps.Prompts != nil {
		if out.Prompts, err = collect(ctx, "prompts", func(ctx context.Context, cur string) ([]*mcp.Prompt, string, error) {
			r, err := bounded(ctx, c, func(ctx context.Context) (*mcp.ListPromptsResult, error) {
				return s.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cur})
			})
			if err != nil {
				return nil, "", err
			}
			return r.Prompts, r.NextCursor, nil
		}); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// errCursorLoop is a backend paging error: its cursors repeat or never end.
var errCursorLoop = errors.New("backend pagination does not terminate")

// collect follows nextCursor until it is empty, refusing a cursor seen
// before (a cycle) and more than MaxListPages pages.
func collect[T any](ctx context.Context, kind string, page func(context.Context, string) ([]T, string, error)) ([]T, error) {
	var all []T
	seen := map[string]bool{}
	cursor := ""
	for n := 0; ; n++ {
		if n == MaxListPages {
			return nil, fmt.Errorf("%w: %s: more than %d pages", errCursorLoop, kind, MaxListPages)
		}
		items, next, err := page(ctx, cursor)
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		if next == "" {
			return all, nil
		}
		if seen[next] {
			return nil, fmt.Errorf("%w: %s: cursor repeats", errCursorLoop, kind)
		}
		seen[next] = true
		cursor = next
	}
}

// Request/response calls (tools/call, resources/read, prompts/get,
// completion/complete) take the raw path: see Call in raw.go.

// Probe checks that the backend answers, without user credentials, within
// timeout. A Legacy session is pinged; a Modern backend cannot be pinged,
// so it gets a fresh server/discover over the pooled connection. The
// outcome feeds the backend's health; on failure the session is dropped so
// that recovery starts from a clean connection.
func (c *Client) Probe(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	err := c.probeOnce(ctx)
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			err = fmt.Errorf("%w: no answer within %s", ErrTimeout, timeout)
		} else if refused := refusedRedirect(err); refused != nil {
			err = refused
		}
		c.health.failure(c.Redact(err.Error()), failureOf(err))
		c.mu.Lock()
		s := c.session
		c.mu.Unlock()
		if s != nil {
			c.drop(s)
		}
		return err
	}
	c.health.success(time.Since(start), nil)
	return nil
}

func (c *Client) probeOnce(ctx context.Context) error {
	c.mu.Lock()
	s := c.session
	c.mu.Unlock()
	if s == nil {
		_, err := c.current(ctx)
		return err
	}
	if s.InitializeResult().ProtocolVersion < ProtocolModern {
		return s.Ping(ctx, nil)
	}
	ps, err := c.connect(ctx, c.probe, false)
	if err != nil {
		return err
	}
	return ps.Close()
}
