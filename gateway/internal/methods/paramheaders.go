package methods

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/gateway/internal/mcperr"
	"github.com/switchboard-mcp/switchboard/gateway/internal/session"
	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
)

// headerSpecs remembers, per advertised tool name, which arguments a tool's
// inputSchema mirrors into Mcp-Param-* headers (the x-mcp-header
// annotation). Advertised names and definitions are the same for every
// principal (only visibility differs), so one process-wide table serves
// everyone. It is filled from tool listings and refreshed when it is older
// than ttl or a listing shows a newer catalog version, so a tools/call
// normally costs a map lookup, not an extra RPC.
// headerSpecTTL bounds how long a tool's x-mcp-header declarations are
// trusted without re-reading them from the aggregator.
const headerSpecTTL = 30 * time.Second

type headerSpecs struct {
	agg aggregatorv1.AggregatorServiceClient
	ttl time.Duration

	mu      sync.Mutex
	version uint64
	tools   map[string]headerSpec
	// misses remembers (principal, tool) pairs a listing did not contain,
	// so repeated calls of unknown tools cost no repeated listings.
	misses map[string]time.Time
}

// maxMisses bounds the miss table; it is simply emptied when full.
const maxMisses = 10000

type headerSpec struct {
	// params maps a canonical header name suffix to the argument it mirrors.
	params  map[string]string
	learned time.Time
}

func newHeaderSpecs(agg aggregatorv1.AggregatorServiceClient, ttl time.Duration) *headerSpecs {
	return &headerSpecs{agg: agg, ttl: ttl, tools: map[string]headerSpec{}, misses: map[string]time.Time{}}
}

// learn records the tools of one listing page.
func (h *headerSpecs) learn(tools []*aggregatorv1.Tool, version uint64) {
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	if version > h.version {
		h.version = version
		clear(h.tools)
		clear(h.misses)
	}
	for _, t := range tools {
		h.tools[t.GetName()] = headerSpec{params: headerParams(t.GetInputSchemaJson()), learned: now}
	}
}

// lookup returns the spec of tool, listing the principal's tools when the
// table has no fresh entry. A tool not in the principal's view is not found:
// the call will fail as unknown anyway.
func (h *headerSpecs) lookup(ctx context.Context, req *Request, tool string) (headerSpec, bool, error) {
	missKey := session.PrincipalDigest(req.Principal) + "\x00" + tool
	h.mu.Lock()
	spec, ok := h.tools[tool]
	missed, isMiss := h.misses[missKey]
	h.mu.Unlock()
	if ok && time.Since(spec.learned) < h.ttl {
		return spec, true, nil
	}
	if isMiss && time.Since(missed) < h.ttl {
		return headerSpec{}, false, nil
	}
	cursor := ""
	for {
		resp, err := h.agg.ListTools(ctx, &aggregatorv1.ListToolsRequest{Principal: req.Principal, Cursor: cursor})
		if err != nil {
			return headerSpec{}, false, err
		}
		h.learn(resp.GetTools(), resp.GetCatalogVersion())
		for _, t := range resp.GetTools() {
			if t.GetName() == tool {
				return headerSpec{params: headerParams(t.GetInputSchemaJson())}, true, nil
			}
		}
		if resp.GetNextCursor() == "" {
			h.mu.Lock()
			if len(h.misses) >= maxMisses {
				clear(h.misses)
			}
			h.misses[missKey] = time.Now()
			h.mu.Unlock()
			return headerSpec{}, false, nil
		}
		cursor = resp.GetNextCursor()
	}
}

// headerParams extracts x-mcp-header annotations from an input schema.
func headerParams(schemaJSON string) map[string]string {
	var schema struct {
		Properties map[string]struct {
			Header string `json:"x-mcp-header"`
		} `json:"properties"`
	}
	if json.Unmarshal([]byte(schemaJSON), &schema) != nil {
		return nil
	}
	var out map[string]string
	for prop, p := range schema.Properties {
		if p.Header == "" {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[http.CanonicalHeaderKey("Mcp-Param-"+p.Header)] = prop
	}
	return out
}

// checkParamHeaders validates Mcp-Param-* headers against the arguments of
// a Modern tools/call: each annotated argument with a value must be
// mirrored exactly, and an absent one must not be.
func (s *Server) checkParamHeaders(ctx context.Context, req *Request, tool string, rawArgs json.RawMessage) *wire.Error {
	spec, found, err := s.specs.lookup(ctx, req, tool)
	if err != nil {
		return mcperr.FromError(ctx, s.log, err, req.Era, req.Method)
	}
	if !found || len(spec.params) == 0 {
		return nil
	}
	args := wire.Object{}
	if len(rawArgs) > 0 && json.Unmarshal(rawArgs, &args) != nil {
		return wire.InvalidParams("arguments must be an object")
	}
	for header, prop := range spec.params {
		raw, present := args[prop]
		if !present || string(raw) == "null" {
			if len(req.Header.Values(header)) > 0 {
				return wire.NewError(wire.CodeHeaderMismatch, "header mismatch: "+header+" sent for an absent argument")
			}
			continue
		}
		want, ok := headerValue(raw)
		if !ok {
			// Not a primitive: clients drop such tools, nothing to mirror.
			continue
		}
		if rerr := wire.CheckHeader(req.Header, header, want); rerr != nil {
			return rerr
		}
	}
	return nil
}

// headerValue renders a primitive argument the way clients mirror it.
func headerValue(raw json.RawMessage) (string, bool) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return "", false
	}
	switch v := v.(type) {
	case string:
		return v, true
	case bool:
		return strconv.FormatBool(v), true
	case json.Number:
		return v.String(), true
	}
	return "", false
}
