package edge

import (
	"context"
	"encoding/json"
	"math"

	"go.opentelemetry.io/otel/attribute"

	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// The optimizer view replaces a principal's tools with two meta-tools:
// find_tool searches the principal's own tools (the indexer's identity-keyed
// index) and call_tool calls one of them as the same principal, so
// authorization applies to the real tool exactly as in the raw view.
const (
	findToolName = "find_tool"
	callToolName = "call_tool"
)

var optimizerTools = []json.RawMessage{
	json.RawMessage(`{"name":"find_tool","title":"Find a tool","description":"Search the tools available to you by describing what you want to do. Returns the best matching tools with their input schemas; call one with call_tool.","inputSchema":{"type":"object","properties":{"tool_description":{"type":"string","description":"What you want to do, in natural language."},"tool_keywords":{"type":"array","items":{"type":"string"},"description":"Optional keywords that must weigh more, such as product or action names."}},"required":["tool_description"]},"annotations":{"readOnlyHint":true,"openWorldHint":false}}`),
	json.RawMessage(`{"name":"call_tool","title":"Call a tool","description":"Call a tool found with find_tool, by its exact name, with arguments matching its input schema.","inputSchema":{"type":"object","properties":{"tool_name":{"type":"string","description":"The tool's name as returned by find_tool."},"parameters":{"type":"object","description":"The tool's arguments."}},"required":["tool_name"]}}`),
}

func (g *Gateway) listOptimizerTools(c *call) (json.RawMessage, *rpcError) {
	cursor, rerr := cursorParam(c.params)
	if rerr != nil {
		return nil, rerr
	}
	if cursor != "" {
		// The list has one page, so no cursor can be valid.
		return nil, newError(codeInvalidParams, "invalid params: invalid cursor")
	}
	return g.page(c, "tools", optimizerTools, ""), nil
}

func (g *Gateway) callOptimizerTool(ctx context.Context, c *call) (json.RawMessage, *rpcError) {
	name, args, rerr := toolCallParams(c.params)
	if rerr != nil {
		return nil, rerr
	}
	spanFrom(ctx).SetAttributes(attribute.String("gen_ai.tool.name", name))
	switch name {
	case findToolName:
		return g.findTool(ctx, c, args)
	case callToolName:
		return g.callThrough(ctx, c, args)
	}
	return nil, newError(codeInvalidParams, "unknown tool: "+name)
}

// toolError is a tool result with isError set: a failure the model should
// read, not a protocol error.
func (g *Gateway) toolError(c *call, text string) json.RawMessage {
	res := object{}
	res.set("content", []map[string]string{{"type": "text", "text": text}})
	res.set("isError", true)
	return g.shape(c, res, false)
}

type foundTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"inputSchema"`
}

type findResult struct {
	Tools          []foundTool `json:"tools"`
	BaselineTokens uint64      `json:"baseline_tokens"`
	ReturnedTokens uint64      `json:"returned_tokens"`
	SavingsPercent float64     `json:"savings_percent"`
}

func (g *Gateway) findTool(ctx context.Context, c *call, args object) (json.RawMessage, *rpcError) {
	var in struct {
		Description *string  `json:"tool_description"`
		Keywords    []string `json:"tool_keywords"`
	}
	if json.Unmarshal(args.encode(), &in) != nil || in.Description == nil || *in.Description == "" {
		return g.toolError(c, "find_tool needs tool_description (a non-empty string) and optionally tool_keywords (an array of strings)"), nil
	}
	if g.idx == nil {
		return g.toolError(c, "tool search is not available on this gateway; call_tool still works with a known tool name"), nil
	}
	resp, err := g.idx.Search(ctx, &indexerv1.SearchRequest{Principal: c.principal, Query: *in.Description, Keywords: in.Keywords, Limit: g.searchLimit})
	if err != nil {
		rerr := grpcError(ctx, g.log, err, c.era, c.method)
		return g.toolError(c, "tool search failed: "+rerr.Message+". Other tools keep working; retry find_tool later."), nil
	}
	out := findResult{Tools: make([]foundTool, 0, len(resp.GetHits())), BaselineTokens: resp.GetBaselineTokens()}
	for _, h := range resp.GetHits() {
		schema := json.RawMessage(`{"type":"object"}`)
		if json.Valid([]byte(h.GetInputSchemaJson())) && h.GetInputSchemaJson() != "" {
			schema = json.RawMessage(h.GetInputSchemaJson())
		}
		out.Tools = append(out.Tools, foundTool{Name: h.GetName(), Description: h.GetDescription(), InputSchema: schema})
	}
	toolsJSON, _ := json.Marshal(out.Tools)
	// Same estimate as the indexer's baseline: JSON bytes / 4.
	out.ReturnedTokens = uint64(len(toolsJSON)) / 4
	if out.BaselineTokens > 0 && out.ReturnedTokens <= out.BaselineTokens {
		saved := 100 * (1 - float64(out.ReturnedTokens)/float64(out.BaselineTokens))
		out.SavingsPercent = math.Round(saved*10) / 10
	}
	text, _ := json.Marshal(out)
	res := object{}
	res.set("content", []map[string]string{{"type": "text", "text": string(text)}})
	res["structuredContent"] = text
	return g.shape(c, res, false), nil
}

// callThrough serves call_tool. tool_name is also accepted inside
// parameters, where models sometimes put it.
func (g *Gateway) callThrough(ctx context.Context, c *call, args object) (json.RawMessage, *rpcError) {
	params := object{}
	if raw, ok := args["parameters"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &params) != nil || params == nil {
			return g.toolError(c, "call_tool: parameters must be an object"), nil
		}
	}
	name, ok := stringParam(args, "tool_name")
	if !ok || name == "" {
		if name, ok = stringParam(params, "tool_name"); ok {
			delete(params, "tool_name")
		}
	}
	if name == "" {
		return g.toolError(c, "call_tool needs tool_name: the name of a tool returned by find_tool"), nil
	}
	spanFrom(ctx).SetAttributes(attribute.String("gen_ai.tool.name", name))
	// A retry's state is bound to the tool call_tool called, so it cannot
	// be carried over to another tool.
	rt, rerr := g.roundTripParams(c, "tools/call", name)
	if rerr != nil {
		return nil, rerr
	}
	result, rerr := g.callAggregatorTool(ctx, c, name, params, rt)
	if rerr != nil && rerr.Code == codeInvalidParams {
		// Unknown and forbidden tools look alike here too.
		return g.toolError(c, "call_tool: "+rerr.Message+"; use find_tool to look up available tools"), nil
	}
	return result, rerr
}
