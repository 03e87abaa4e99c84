package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	sdkjson "github.com/segmentio/encoding/json"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/listing"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/paramheader"
	"github.com/switchboard-mcp/switchboard/services/rawjson"
)

// Lists is everything a backend offers.
type Lists struct {
	Tools             []*mcp.Tool
	Resources         []*mcp.Resource
	ResourceTemplates []*mcp.ResourceTemplate
	Prompts           []*mcp.Prompt
	// Definitions are the items exactly as the backend listed them.
	Definitions Definitions
	// Capabilities the backend announced when the lists were taken.
	Capabilities *mcp.ServerCapabilities
	// ProtocolVersion negotiated with the backend.
	ProtocolVersion string
	// Undecodable are the listed items left out of the lists above:
	// each is refused by the catalog's screen like a definition it
	// reads itself, so that the backend's other items stay listed.
	Undecodable []Undecodable
}

// Undecodable is a listed item that does not decode into its go-sdk type
// (a member of the wrong type, a number no float64 holds), which go-sdk's
// client would refuse along with the whole listing.
type Undecodable struct {
	// Member is the list it came in: tools, resources,
	// resourceTemplates or prompts.
	Member string
	Raw    []byte
	Err    error
}

// Definitions holds each listed item's JSON object as the backend wrote
// it, index for index with the typed lists of Lists, so that the catalog
// advertises fields go-sdk does not model (vendor extensions, newer
// revisions' members) intact. A nil slice means the lists were made in
// code, not listed (tests); the catalog encodes the typed items then.
type Definitions struct {
	Tools, Resources, ResourceTemplates, Prompts [][]byte
}

// Same reports whether l and m hold the same items (the same pointers, in
// the same order, as listKind keeps them for unchanged bytes), the same
// bytes for each, and the same capabilities and protocol version: a
// listing that changed nothing.
func (l *Lists) Same(m *Lists) bool {
	if l == nil || m == nil {
		return l == m
	}
	return l.ProtocolVersion == m.ProtocolVersion &&
		slices.Equal(l.Tools, m.Tools) && slices.Equal(l.Resources, m.Resources) &&
		slices.Equal(l.ResourceTemplates, m.ResourceTemplates) && slices.Equal(l.Prompts, m.Prompts) &&
		slices.EqualFunc(l.Definitions.Tools, m.Definitions.Tools, bytes.Equal) &&
		slices.EqualFunc(l.Definitions.Resources, m.Definitions.Resources, bytes.Equal) &&
		slices.EqualFunc(l.Definitions.ResourceTemplates, m.Definitions.ResourceTemplates, bytes.Equal) &&
		slices.EqualFunc(l.Definitions.Prompts, m.Definitions.Prompts, bytes.Equal) &&
		slices.EqualFunc(l.Undecodable, m.Undecodable, func(a, b Undecodable) bool { return a.Member == b.Member && bytes.Equal(a.Raw, b.Raw) }) &&
		reflect.DeepEqual(l.Capabilities, m.Capabilities)
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

// listAll lists on the raw path (raw.go), as calls go: the aggregator
// writes each */list request itself in session s's era and keeps every
// item's bytes, decoding a typed copy of the members it reads. go-sdk's
// session still does the handshake and list_changed.
func (c *Client) listAll(ctx context.Context, s *mcp.ClientSession) (*Lists, error) {
	init := s.InitializeResult()
	caps := init.Capabilities
	if caps == nil {
		caps = &mcp.ServerCapabilities{}
	}
	out := &Lists{Capabilities: caps, ProtocolVersion: init.ProtocolVersion}
	var err error
	if caps.Tools != nil {
		if out.Tools, out.Definitions.Tools, err = listKind[mcp.Tool](ctx, c, s, "tools/list", "tools", &out.Undecodable); err != nil {
			return nil, err
		}
		out.Tools, out.Definitions.Tools = c.validTools(out.Tools, out.Definitions.Tools)
	}
	if caps.Resources != nil {
		if out.Resources, out.Definitions.Resources, err = listKind[mcp.Resource](ctx, c, s, "resources/list", "resources", &out.Undecodable); err != nil {
			return nil, err
		}
		out.ResourceTemplates, out.Definitions.ResourceTemplates, err = listKind[mcp.ResourceTemplate](ctx, c, s, "resources/templates/list", "resourceTemplates", &out.Undecodable)
		var wire *jsonrpc.Error
		if errors.As(err, &wire) && wire.Code == jsonrpc.CodeMethodNotFound {
			// One capability names resources and their templates; a
			// server that lists resources and implements no templates
			// (many do) has none, and its resources are listed.
			out.ResourceTemplates, out.Definitions.ResourceTemplates, err = nil, nil, nil
		}
		if err != nil {
			return nil, err
		}
	}
	if caps.Prompts != nil {
		if out.Prompts, out.Definitions.Prompts, err = listKind[mcp.Prompt](ctx, c, s, "prompts/list", "prompts", &out.Undecodable); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// listed is one listed item: its typed copy and its bytes, or, for an
// item that does not decode, why (item nil).
type listed[T any] struct {
	item *T
	raw  []byte
	err  error
}

// listKind follows one list's cursors to the end. An item that does not
// decode into its go-sdk type is left out and added to undecodable (go-sdk's
// client refuses the whole listing for it; the screen refuses the one
// item); null items are skipped, as go-sdk skips them.
//
// An item whose bytes are those of an item of the previous listing is not
// decoded again: it is the same *T, so an unchanged listing is made of the
// same pointers and everything keyed on them (the catalog builder, the
// pinning guard) sees nothing new. The periodic relisting of a 10,000-tool
// catalog decoded every tool for nothing: most of its CPU, every
// catalogTTL. Listed items are shared and never modified.
func listKind[T any](ctx context.Context, c *Client, s *mcp.ClientSession, method, member string, undecodable *[]Undecodable) ([]*T, [][]byte, error) {
	prev := c.decoded.previous(member)
	next := make(map[string]any, len(prev))
	all, err := listing.Collect(ctx, method, func(ctx context.Context, cur string) ([]listed[T], string, int, error) {
		var p ParamsBuilder
		if cur != "" {
			p.String("cursor", cur)
		}
		res, err := bounded(ctx, c, func(ctx context.Context) (*Result, error) {
			return c.exchange(ctx, s, &Call{Method: method, Params: p.Bytes()})
		})
		if err != nil {
			return nil, "", 0, err
		}
		// A listing is sent back as a result is, and goes further: to
		// every client, the indexer and the pinning digests. It loses
		// what a result loses (a server may quote its key in a
		// description), here, before any of it is decoded or kept.
		res = c.redactResult(ctx, res)
		items, nextCursor, err := decodePage[T](method, member, []byte(res.JSON), prev, next)
		return items, nextCursor, len(res.JSON), err
	})
	if err != nil {
		return nil, nil, err
	}
	c.decoded.keep(member, next)
	items, raws := make([]*T, 0, len(all)), make([][]byte, 0, len(all))
	for _, l := range all {
		if l.err != nil {
			*undecodable = append(*undecodable, Undecodable{Member: member, Raw: l.raw, Err: l.err})
			continue
		}
		items, raws = append(items, l.item), append(raws, l.raw)
	}
	return items, raws, nil
}

// decodePage reads one */list result: its items (under member) and its
// nextCursor. An item found in prev by its bytes is taken from there; every
// item that decodes goes into seen.
func decodePage[T any](method, member string, result []byte, prev, seen map[string]any) ([]listed[T], string, error) {
	fields, err := rawjson.Object(result)
	if err != nil {
		return nil, "", fmt.Errorf("%w: %s result is not an object", ErrProtocolViolation, method)
	}
	var next string
	if v, ok := fields["nextCursor"]; ok && string(v) != "null" {
		if err := json.Unmarshal(v, &next); err != nil {
			return nil, "", fmt.Errorf("%w: %s nextCursor is not a string", ErrProtocolViolation, method)
		}
	}
	var out []listed[T]
	arr, ok := fields[member]
	if !ok || string(arr) == "null" {
		return nil, next, nil
	}
	if !rawjson.Elements(arr, func(v []byte) bool {
		if string(v) == "null" {
			return true
		}
		item, ok := prev[string(v)].(*T)
		if !ok {
			item = new(T)
			if err := DecodeAsSDK(v, item); err != nil {
				out = append(out, listed[T]{raw: v, err: fmt.Errorf("an item of %s does not decode: %w", member, err)})
				return true
			}
		}
		if seen != nil {
			seen[string(v)] = item
		}
		out = append(out, listed[T]{item: item, raw: v})
		return true
	}) {
		return nil, "", fmt.Errorf("%w: %s %s is not an array", ErrProtocolViolation, method, member)
	}
	return out, next, nil
}

// DecodeAsSDK decodes JSON as go-sdk does: member names match
// case-sensitively, so a "Name" is not a "name".
func DecodeAsSDK(data []byte, v any) error {
	dec := sdkjson.NewDecoder(bytes.NewReader(data))
	dec.DontMatchCaseInsensitiveStructFields()
	return dec.Decode(v)
}

// validTools drops the tools go-sdk v1.8.0's client drops from a listing:
// those whose x-mcp-header annotations break the 2026-07-28 rules (a
// client could never call them correctly).
func (c *Client) validTools(tools []*mcp.Tool, raws [][]byte) ([]*mcp.Tool, [][]byte) {
	keptTools, keptRaws := tools[:0], raws[:0]
	for i, t := range tools {
		schema, _ := rawjson.Get(raws[i], "inputSchema")
		if err := paramheader.Validate(schema); err != nil {
			c.log.Warn("excluding a tool whose x-mcp-header annotations are invalid", "backend", c.cfg.Name, "tool", t.Name, "error", err)
			continue
		}
		keptTools, keptRaws = append(keptTools, t), append(keptRaws, raws[i])
	}
	return keptTools, keptRaws
}

// decodedItems holds, per list kind, the items of the last complete
// listing by their bytes (listKind).
type decodedItems struct {
	mu     sync.Mutex
	byKind map[string]map[string]any
}

// previous is the last complete listing of kind; callers only read it.
func (d *decodedItems) previous(kind string) map[string]any {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.byKind[kind]
}

func (d *decodedItems) keep(kind string, items map[string]any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.byKind == nil {
		d.byKind = map[string]map[string]any{}
	}
	d.byKind[kind] = items
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
