package methods

import (
	"context"
	"encoding/json"
	"math"

	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/gateway/internal/mcperr"
	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/rawjson"
	"github.com/switchboard-mcp/switchboard/services/telemetry"
)

// The optimizer view replaces a principal's tools with two meta-tools:
// find_tool searches the principal's own tools (the indexer's identity-keyed
// index) and call_tool calls one of them as the same principal, so
// authorization applies to the real tool exactly as in the raw view.
const (
	FindToolName = "find_tool"
	CallToolName = "call_tool"
)

var optimizerTools = []json.RawMessage{
	json.RawMessage(`{"name":"find_tool","title":"Find a tool","description":"Search the tools available to you by describing what you want to do. Returns the best matching tools with their input schemas; call one with call_tool.","inputSchema":{"type":"object","properties":{"tool_description":{"type":"string","description":"What you want to do, in natural language."},"tool_keywords":{"type":"array","items":{"type":"string"},"description":"Optional keywords that must weigh more, such as product or action names."}},"required":["tool_description"]},"annotations":{"readOnlyHint":true,"openWorldHint":false}}`),
	json.RawMessage(`{"name":"call_tool","title":"Call a tool","description":"Call a tool found with find_tool, by its exact name, with arguments matching its input schema.","inputSchema":{"type":"object","properties":{"tool_name":{"type":"string","description":"The tool's name as returned by find_tool."},"parameters":{"type":"object","description":"The tool's arguments."}},"required":["tool_name"]}}`),
}

func (s *Server) listOptimizerTools(ctx context.Context, req *Request) (json.RawMessage, *wire.Error) {
	cursor, rerr := req.Params.Cursor()
	if rerr != nil {
		return nil, rerr
	}
	if cursor != "" {
		// The list has one page, so no cursor can be valid.
		return nil, wire.InvalidParams("invalid cursor")
	}
	// find_tool and call_tool are listed whatever the aggregator's state,
	// as always; run_code only when it says the view offers it.
	if code, rerr := s.offersCode(ctx, req); rerr == nil && code {
		return s.page(req, "tools", append(optimizerTools[:len(optimizerTools):len(optimizerTools)], runCodeTool), "")
	}
	return s.page(req, "tools", optimizerTools, "")
}

func (s *Server) callOptimizerTool(ctx context.Context, req *Request, resp Responder) (json.RawMessage, *wire.Error) {
	name, raw, rerr := toolCallParams(req.Params)
	if rerr != nil {
		return nil, rerr
	}
	trace.SpanFromContext(ctx).SetAttributes(telemetry.TextAttribute("gen_ai.tool.name", name))
	args := wire.Object{}
	if raw != nil {
		_ = json.Unmarshal(raw, &args)
	}
	switch name {
	case FindToolName:
		return s.findTool(ctx, req, raw)
	case CallToolName:
		return s.callThrough(ctx, req, resp, args)
	case RunCodeName:
		return s.runCode(ctx, req, args)
	}
	return s.callNamedTool(ctx, req, resp, name, raw)
}

// toolError is a tool result with isError set: a failure the model should
// read, not a protocol error.
func (s *Server) toolError(req *Request, text string) (json.RawMessage, *wire.Error) {
	res := wire.Object{}
	res.Set("content", []map[string]string{{"type": "text", "text": text}})
	res.Set("isError", true)
	return s.shape(req, res.Encode(), false)
}

// refuseTool answers a meta-tool call the gateway refuses before asking
// any service: an error result with text, for the model to read, and the
// refusal as an error of code for the trail (Trail.Refused).
func (s *Server) refuseTool(req *Request, code int, text string) (json.RawMessage, *wire.Error) {
	req.Trail.Refused = wire.NewError(code, text)
	return s.toolError(req, text)
}

// FoundTool is one find_tool hit: the tool as tools/list shows the caller.
type FoundTool struct {
	Name         string          `json:"name"`
	Title        string          `json:"title,omitempty"`
	Description  string          `json:"description,omitempty"`
	InputSchema  json.RawMessage `json:"inputSchema"`
	OutputSchema json.RawMessage `json:"outputSchema,omitempty"`
	Annotations  json.RawMessage `json:"annotations,omitempty"`
	// Meta is the tool's _meta (an MCP App's page among others).
	Meta json.RawMessage `json:"_meta,omitempty"`
}

// FindResult is find_tool's result, as structuredContent and as the text
// of its one content block.
type FindResult struct {
	Tools          []FoundTool `json:"tools"`
	BaselineTokens uint64      `json:"baseline_tokens"`
	ReturnedTokens uint64      `json:"returned_tokens"`
	SavingsPercent float64     `json:"savings_percent"`
}

func (s *Server) findTool(ctx context.Context, req *Request, args json.RawMessage) (json.RawMessage, *wire.Error) {
	var in struct {
		Description *string  `json:"tool_description"`
		Keywords    []string `json:"tool_keywords"`
	}
	const usage = "find_tool needs tool_description (a non-empty string) and optionally tool_keywords (an array of strings)"
	malformed := json.Unmarshal(args, &in) != nil || in.Description == nil || *in.Description == ""
	if malformed {
		// Asked of the indexer all the same, as a search of nothing: it
		// refuses it as it stands, records it and takes its token from
		// the principal's limits, as it does every search it refuses, so
		// a client sending these is held to its limit too.
		in.Description, in.Keywords = new(string), nil
	}
	if s.idx == nil {
		if malformed {
			return s.refuseTool(req, wire.CodeInvalidParams, usage)
		}
		return s.refuseTool(req, wire.CodeInternalError, "tool search is not available on this gateway; call_tool still works with a known tool name")
	}
	// tools/call waits for clients (Serve), so the search is bounded here.
	searchCtx, cancel := s.serviceCall(ctx)
	defer cancel()
	req.Trail.Asked = true
	resp, err := s.idx.Search(searchCtx, &indexerv1.SearchRequest{Principal: req.Principal, Server: req.Server, Query: *in.Description, Keywords: in.Keywords, Limit: s.cfg.SearchLimit})
	if err != nil {
		rerr := mcperr.FromError(ctx, s.log, err, req.Era, req.Method)
		switch {
		case rerr.Code == wire.CodeRateLimited:
			// As call_tool's and every tools/call's: the client, not the
			// model, must wait (429, Retry-After); a tool error would
			// invite the model to search again at once.
			return nil, rerr
		case status.Code(err) == codes.InvalidArgument && malformed:
			return s.toolError(req, usage)
		case status.Code(err) == codes.InvalidArgument:
			// The search itself was refused (its bounds): the same one
			// later would be too. A server the indexer cannot find (also
			// -32602) is its state, which a retry may find changed.
			return s.toolError(req, "find_tool: "+rerr.Message)
		}
		return s.toolError(req, "tool search failed: "+rerr.Message+". Other tools keep working; retry find_tool later.")
	}
	if malformed {
		// The indexer refuses a search of nothing; an indexer that did
		// not is answered as one that did.
		return s.toolError(req, usage)
	}
	out := FindResult{Tools: make([]FoundTool, 0, len(resp.GetHits())), BaselineTokens: resp.GetBaselineTokens()}
	for _, h := range resp.GetHits() {
		schema := json.RawMessage(`{"type":"object"}`)
		if json.Valid([]byte(h.GetInputSchemaJson())) && h.GetInputSchemaJson() != "" {
			schema = json.RawMessage(h.GetInputSchemaJson())
		}
		hit := FoundTool{Name: h.GetName(), Title: h.GetTitle(), Description: h.GetDescription(), InputSchema: schema,
			OutputSchema: listedObject(h.GetOutputSchemaJson()), Annotations: listedObject(h.GetAnnotationsJson()), Meta: listedObject(h.GetMetaJson())}
		out.Tools = append(out.Tools, hit)
	}
	toolsJSON, _ := json.Marshal(out.Tools)
	// Same estimate as the indexer's baseline: JSON bytes / 4.
	out.ReturnedTokens = uint64(len(toolsJSON)) / 4
	if out.BaselineTokens > 0 && out.ReturnedTokens <= out.BaselineTokens {
		saved := 100 * (1 - float64(out.ReturnedTokens)/float64(out.BaselineTokens))
		out.SavingsPercent = math.Round(saved*10) / 10
	}
	text, _ := json.Marshal(out)
	res := wire.Object{}
	res.Set("content", []map[string]string{{"type": "text", "text": string(text)}})
	res["structuredContent"] = text
	return s.shape(req, res.Encode(), false)
}

// listedObject is a hit's JSON object member, nil (left out) for none or
// for text that is not one.
func listedObject(text string) json.RawMessage {
	if text == "" || !rawjson.StartsObject([]byte(text)) || !json.Valid([]byte(text)) {
		return nil
	}
	return json.RawMessage(text)
}

// callThrough serves call_tool. tool_name is also accepted inside
// parameters, where models sometimes put it.
func (s *Server) callThrough(ctx context.Context, req *Request, resp Responder, args wire.Object) (json.RawMessage, *wire.Error) {
	params := wire.Object{}
	if raw, ok := args["parameters"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &params) != nil || params == nil {
			return s.refuseTool(req, wire.CodeInvalidParams, "call_tool: parameters must be an object")
		}
	}
	name, ok := args.String("tool_name")
	if !ok || name == "" {
		if name, ok = params.String("tool_name"); ok {
			delete(params, "tool_name")
		}
	}
	if name == "" {
		return s.refuseTool(req, wire.CodeInvalidParams, "call_tool needs tool_name: the name of a tool returned by find_tool")
	}
	req.Trail.Tool = name
	trace.SpanFromContext(ctx).SetAttributes(telemetry.TextAttribute("gen_ai.tool.name", name))
	call := toolCall{name: name, args: params.Encode(), forModel: true}
	// The task request is the client's, not the model's: one it cannot
	// read is a protocol error, and one it makes lets the called tool
	// become a task as in the raw view.
	task, rerr := taskRequest(req)
	if rerr != nil {
		return nil, rerr
	}
	call.task = task
	// A retry's state is bound to the tool call_tool called and its
	// parameters, so it cannot be carried over to another call.
	rt, rerr := s.roundTripParams(ctx, req, "tools/call", name, call.args)
	if rerr != nil {
		return nil, rerr
	}
	result, rerr := s.callAggregatorTool(ctx, req, resp, call, rt)
	if rerr != nil && (rerr.Code == wire.CodeInvalidParams || rerr.Code == wire.CodeResourceNotFound) {
		// Unknown and forbidden tools look alike here too. A backend's
		// own "resource not found" is -32602 to a Modern client and
		// -32002 to a Legacy one: the same answer, a failed call, in both.
		return s.toolError(req, "call_tool: "+rerr.Message+"; use find_tool to look up available tools")
	}
	return result, rerr
}
