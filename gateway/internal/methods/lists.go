package methods

import (
	"context"
	"encoding/json"

	"github.com/switchboard-mcp/switchboard/gateway/internal/mcperr"
	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
)

// A list kind is all that differs between tools/list, resources/list,
// resources/templates/list and prompts/list: the result member, the
// aggregator RPC, and how one item renders. Everything else (cursor,
// paging, shaping, errors) is listOf, once.
type listKind[T any] struct {
	member string
	page   func(s *Server, ctx context.Context, req *Request, cursor string) (items []T, next string, err error)
	// definition is the item's MCP object as the aggregator sent it;
	// fallback renders a minimal one from the typed fields for an item
	// without it (an aggregator API client that fills only those).
	definition func(T) string
	fallback   func(T) map[string]any
}

var toolsList = listKind[*aggregatorv1.Tool]{
	member: "tools",
	page: func(s *Server, ctx context.Context, req *Request, cursor string) ([]*aggregatorv1.Tool, string, error) {
		resp, err := s.agg.ListTools(ctx, &aggregatorv1.ListToolsRequest{Principal: req.Principal, Server: req.Server, Cursor: cursor})
		return resp.GetTools(), resp.GetNextCursor(), err
	},
	definition: (*aggregatorv1.Tool).GetDefinitionJson,
	fallback: func(t *aggregatorv1.Tool) map[string]any {
		schema := json.RawMessage(`{"type":"object"}`)
		if json.Valid([]byte(t.GetInputSchemaJson())) {
			schema = json.RawMessage(t.GetInputSchemaJson())
		}
		return map[string]any{"name": t.GetName(), "title": t.GetTitle(), "description": t.GetDescription(), "inputSchema": schema}
	},
}

var resourcesList = listKind[*aggregatorv1.Resource]{
	member: "resources",
	page: func(s *Server, ctx context.Context, req *Request, cursor string) ([]*aggregatorv1.Resource, string, error) {
		resp, err := s.agg.ListResources(ctx, &aggregatorv1.ListResourcesRequest{Principal: req.Principal, Server: req.Server, Cursor: cursor})
		return resp.GetResources(), resp.GetNextCursor(), err
	},
	definition: (*aggregatorv1.Resource).GetDefinitionJson,
	fallback: func(r *aggregatorv1.Resource) map[string]any {
		return map[string]any{"uri": r.GetUri(), "name": r.GetName(), "title": r.GetTitle(), "description": r.GetDescription(), "mimeType": r.GetMimeType()}
	},
}

var templatesList = listKind[*aggregatorv1.ResourceTemplate]{
	member: "resourceTemplates",
	page: func(s *Server, ctx context.Context, req *Request, cursor string) ([]*aggregatorv1.ResourceTemplate, string, error) {
		resp, err := s.agg.ListResourceTemplates(ctx, &aggregatorv1.ListResourceTemplatesRequest{Principal: req.Principal, Server: req.Server, Cursor: cursor})
		return resp.GetResourceTemplates(), resp.GetNextCursor(), err
	},
	definition: (*aggregatorv1.ResourceTemplate).GetDefinitionJson,
	fallback: func(t *aggregatorv1.ResourceTemplate) map[string]any {
		return map[string]any{"uriTemplate": t.GetUriTemplate(), "name": t.GetName(), "title": t.GetTitle(), "description": t.GetDescription(), "mimeType": t.GetMimeType()}
	},
}

var promptsList = listKind[*aggregatorv1.Prompt]{
	member: "prompts",
	page: func(s *Server, ctx context.Context, req *Request, cursor string) ([]*aggregatorv1.Prompt, string, error) {
		resp, err := s.agg.ListPrompts(ctx, &aggregatorv1.ListPromptsRequest{Principal: req.Principal, Server: req.Server, Cursor: cursor})
		return resp.GetPrompts(), resp.GetNextCursor(), err
	},
	definition: (*aggregatorv1.Prompt).GetDefinitionJson,
	fallback: func(p *aggregatorv1.Prompt) map[string]any {
		return map[string]any{"name": p.GetName(), "title": p.GetTitle(), "description": p.GetDescription()}
	},
}

// listOf serves one page of a list kind. Item definitions are spliced in
// as the aggregator rendered them (it encodes every definition it serves).
func listOf[T any](k listKind[T]) handler {
	return func(s *Server, ctx context.Context, req *Request, _ Responder) (json.RawMessage, *wire.Error) {
		cursor, rerr := req.Params.Cursor()
		if rerr != nil {
			return nil, rerr
		}
		items, next, err := k.page(s, ctx, req, cursor)
		if err != nil {
			return nil, mcperr.FromError(ctx, s.log, err, req.Era, req.Method)
		}
		defs := make([]json.RawMessage, 0, len(items))
		for _, it := range items {
			if def := k.definition(it); def != "" {
				defs = append(defs, json.RawMessage(def))
				continue
			}
			fields := k.fallback(it)
			for name, v := range fields {
				if text, ok := v.(string); ok && text == "" {
					delete(fields, name)
				}
			}
			def, _ := json.Marshal(fields)
			defs = append(defs, def)
		}
		return s.page(req, k.member, defs, next)
	}
}

// page renders one list page; the last page has no nextCursor member.
func (s *Server) page(req *Request, member string, items []json.RawMessage, next string) (json.RawMessage, *wire.Error) {
	return wire.Page(member, items, next, s.shaping(req, true)), nil
}

// listTools serves the raw view's tools, or the optimizer's two.
func (s *Server) listTools(ctx context.Context, req *Request, resp Responder) (json.RawMessage, *wire.Error) {
	if req.View == ViewOptimized {
		return s.listOptimizerTools(ctx, req)
	}
	return listOf(toolsList)(s, ctx, req, resp)
}
