package edge

import (
	"context"
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/grpc"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
)

// dispatch serves the methods both eras share (and server/discover) by
// calling the aggregator, and shapes the result for the request's era.
func (g *Gateway) dispatch(c *call) (json.RawMessage, *rpcError) {
	ctx, cancel := context.WithTimeout(c.r.Context(), g.requestTimeout)
	defer cancel()
	switch c.method {
	case "server/discover":
		return g.discover(ctx, c)
	case "tools/list":
		if c.view == viewOptimized {
			return g.listOptimizerTools(c)
		}
		return g.listTools(ctx, c)
	case "tools/call":
		if c.view == viewOptimized {
			return g.callOptimizerTool(ctx, c)
		}
		return g.callTool(ctx, c)
	case "resources/list":
		return g.listResources(ctx, c)
	case "resources/templates/list":
		return g.listResourceTemplates(ctx, c)
	case "prompts/list":
		return g.listPrompts(ctx, c)
	case "resources/read":
		return g.readResource(ctx, c)
	case "prompts/get":
		return g.getPrompt(ctx, c)
	case "completion/complete":
		return g.complete(ctx, c)
	}
	return nil, newError(codeMethodNotFound, "method not found: "+c.method)
}

// capabilities describes what this principal can use: a kind is present
// only when the principal's view has some of it, and listChanged is set
// because the listen and GET streams deliver those notifications.
func (g *Gateway) capabilities(ctx context.Context, c *call) (object, string, *rpcError) {
	d, err := g.agg.Discover(ctx, &aggregatorv1.DiscoverRequest{Principal: c.principal})
	if err != nil {
		return nil, "", grpcError(ctx, g.log, err, c.era, c.method)
	}
	listChanged := map[string]bool{"listChanged": true}
	caps := object{}
	switch {
	case c.view == viewOptimized:
		// find_tool and call_tool never change.
		caps.set("tools", struct{}{})
	case d.GetToolCount() > 0:
		caps.set("tools", listChanged)
	}
	if d.GetResourceCount()+d.GetResourceTemplateCount() > 0 {
		resources := map[string]bool{"listChanged": true}
		// Updates are delivered (on a listen or GET stream) only where
		// some backend of the principal's view supports subscribe.
		if d.GetResourcesSubscribe() {
			resources["subscribe"] = true
		}
		caps.set("resources", resources)
	}
	if d.GetPromptCount() > 0 {
		caps.set("prompts", listChanged)
	}
	if d.GetCompletions() {
		caps.set("completions", struct{}{})
	}
	instructions := d.GetInstructions()
	if instructions == "" {
		instructions = g.cfg.ServerInfo.Instructions
	}
	return caps, instructions, nil
}

func (g *Gateway) discover(ctx context.Context, c *call) (json.RawMessage, *rpcError) {
	caps, instructions, rerr := g.capabilities(ctx, c)
	if rerr != nil {
		return nil, rerr
	}
	res := object{}
	res.set("supportedVersions", supportedVersions)
	res.set("capabilities", caps)
	if instructions != "" {
		res.set("instructions", instructions)
	}
	return g.shape(c, res, true), nil
}

// shape adds what the era requires to a result: under Modern resultType,
// serverInfo in _meta and, for cacheable results, ttlMs and a private
// cacheScope (every list is filtered per principal); under Legacy it drops
// those Modern-only members a Modern backend may have sent.
func (g *Gateway) shape(c *call, res object, cacheable bool) json.RawMessage {
	meta := object{}
	if raw, ok := res["_meta"]; ok {
		_ = json.Unmarshal(raw, &meta)
		if meta == nil {
			meta = object{}
		}
	}
	if c.era == eraLegacy {
		delete(res, "resultType")
		delete(res, "ttlMs")
		delete(res, "cacheScope")
		// A Modern backend's serverInfo names the backend, not this server.
		if _, ok := meta[metaServerInfo]; ok {
			delete(meta, metaServerInfo)
			if len(meta) == 0 {
				delete(res, "_meta")
			} else {
				res.set("_meta", meta)
			}
		}
		return res.encode()
	}
	if _, ok := res["resultType"]; !ok {
		res.set("resultType", "complete")
	}
	meta[metaServerInfo] = g.serverInfo
	res.set("_meta", meta)
	if cacheable {
		res.set("ttlMs", g.cacheTTLms)
		res.set("cacheScope", "private")
	} else {
		delete(res, "ttlMs")
		delete(res, "cacheScope")
	}
	return res.encode()
}

// cursorParam reads params.cursor: absent, null and "" all mean the first
// page; anything but a string is invalid.
func cursorParam(params object) (string, *rpcError) {
	raw, ok := params["cursor"]
	if !ok || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", newError(codeInvalidParams, "invalid params: cursor must be a string")
	}
	return s, nil
}

// page renders one list page; the last page has no nextCursor member.
func (g *Gateway) page(c *call, key string, items []json.RawMessage, next string) json.RawMessage {
	res := object{}
	res.set(key, items)
	if next != "" {
		res.set("nextCursor", next)
	}
	return g.shape(c, res, true)
}

// definition returns an item's MCP object as sent by the aggregator, or a
// minimal one built from the typed fields if the JSON is missing or broken.
func definition(defJSON string, fallback map[string]any) json.RawMessage {
	if defJSON != "" && json.Valid([]byte(defJSON)) {
		return json.RawMessage(defJSON)
	}
	for k, v := range fallback {
		if s, ok := v.(string); ok && s == "" {
			delete(fallback, k)
		}
	}
	b, _ := json.Marshal(fallback)
	return b
}

func (g *Gateway) listTools(ctx context.Context, c *call) (json.RawMessage, *rpcError) {
	cursor, rerr := cursorParam(c.params)
	if rerr != nil {
		return nil, rerr
	}
	resp, err := g.agg.ListTools(ctx, &aggregatorv1.ListToolsRequest{Principal: c.principal, Cursor: cursor})
	if err != nil {
		return nil, grpcError(ctx, g.log, err, c.era, c.method)
	}
	items := make([]json.RawMessage, 0, len(resp.GetTools()))
	for _, t := range resp.GetTools() {
		schema := json.RawMessage(`{"type":"object"}`)
		if json.Valid([]byte(t.GetInputSchemaJson())) {
			schema = json.RawMessage(t.GetInputSchemaJson())
		}
		items = append(items, definition(t.GetDefinitionJson(), map[string]any{
			"name": t.GetName(), "title": t.GetTitle(), "description": t.GetDescription(), "inputSchema": schema,
		}))
	}
	g.headerSpecs.learn(resp.GetTools(), resp.GetCatalogVersion())
	return g.page(c, "tools", items, resp.GetNextCursor()), nil
}

func (g *Gateway) listResources(ctx context.Context, c *call) (json.RawMessage, *rpcError) {
	cursor, rerr := cursorParam(c.params)
	if rerr != nil {
		return nil, rerr
	}
	resp, err := g.agg.ListResources(ctx, &aggregatorv1.ListResourcesRequest{Principal: c.principal, Cursor: cursor})
	if err != nil {
		return nil, grpcError(ctx, g.log, err, c.era, c.method)
	}
	items := make([]json.RawMessage, 0, len(resp.GetResources()))
	for _, r := range resp.GetResources() {
		items = append(items, definition(r.GetDefinitionJson(), map[string]any{
			"uri": r.GetUri(), "name": r.GetName(), "title": r.GetTitle(), "description": r.GetDescription(), "mimeType": r.GetMimeType(),
		}))
	}
	return g.page(c, "resources", items, resp.GetNextCursor()), nil
}

func (g *Gateway) listResourceTemplates(ctx context.Context, c *call) (json.RawMessage, *rpcError) {
	cursor, rerr := cursorParam(c.params)
	if rerr != nil {
		return nil, rerr
	}
	resp, err := g.agg.ListResourceTemplates(ctx, &aggregatorv1.ListResourceTemplatesRequest{Principal: c.principal, Cursor: cursor})
	if err != nil {
		return nil, grpcError(ctx, g.log, err, c.era, c.method)
	}
	items := make([]json.RawMessage, 0, len(resp.GetResourceTemplates()))
	for _, t := range resp.GetResourceTemplates() {
		items = append(items, definition(t.GetDefinitionJson(), map[string]any{
			"uriTemplate": t.GetUriTemplate(), "name": t.GetName(), "title": t.GetTitle(), "description": t.GetDescription(), "mimeType": t.GetMimeType(),
		}))
	}
	return g.page(c, "resourceTemplates", items, resp.GetNextCursor()), nil
}

func (g *Gateway) listPrompts(ctx context.Context, c *call) (json.RawMessage, *rpcError) {
	cursor, rerr := cursorParam(c.params)
	if rerr != nil {
		return nil, rerr
	}
	resp, err := g.agg.ListPrompts(ctx, &aggregatorv1.ListPromptsRequest{Principal: c.principal, Cursor: cursor})
	if err != nil {
		return nil, grpcError(ctx, g.log, err, c.era, c.method)
	}
	items := make([]json.RawMessage, 0, len(resp.GetPrompts()))
	for _, p := range resp.GetPrompts() {
		items = append(items, definition(p.GetDefinitionJson(), map[string]any{
			"name": p.GetName(), "title": p.GetTitle(), "description": p.GetDescription(),
		}))
	}
	return g.page(c, "prompts", items, resp.GetNextCursor()), nil
}

// requestStateTTL bounds how long a client may take to answer an
// input_required result.
const requestStateTTL = 10 * time.Minute

// roundTrip holds the members shared by tools/call, resources/read and
// prompts/get: the multi-round-trip retry fields and the progress token.
type roundTrip struct {
	// binding names the request ("tools/call\x00<tool>"): a sealed request
	// state is only valid for the request that produced it.
	binding        string
	inputResponses string
	// requestState is the backend's own state, unsealed.
	requestState string
	context      *aggregatorv1.RequestContext
}

func (g *Gateway) roundTripParams(c *call, method, target string) (roundTrip, *rpcError) {
	params := c.params
	rt := roundTrip{binding: method + "\x00" + target}
	if raw, ok := params["inputResponses"]; ok && string(raw) != "null" {
		var o object
		if json.Unmarshal(raw, &o) != nil {
			return rt, newError(codeInvalidParams, "invalid params: inputResponses must be an object")
		}
		rt.inputResponses = string(raw)
	}
	if raw, ok := params["requestState"]; ok && string(raw) != "null" {
		var sealed string
		if json.Unmarshal(raw, &sealed) != nil {
			return rt, newError(codeInvalidParams, "invalid params: requestState must be a string")
		}
		state, err := g.sealer.OpenState(c.principal, rt.binding, sealed)
		if err != nil {
			return rt, newError(codeInvalidParams, "invalid params: requestState is invalid or expired; retry the request without it")
		}
		rt.requestState = state
	}
	rt.context = &aggregatorv1.RequestContext{}
	if len(c.clientCaps) > 0 {
		rt.context.ClientCapabilitiesJson = string(c.clientCaps.encode())
	}
	meta, _ := metaObject(params)
	if tok, ok := meta["progressToken"]; ok && string(tok) != "null" {
		rt.context.ProgressTokenJson = string(tok)
	}
	switch c.era {
	case eraModern:
		// Without a log level in _meta a Modern server must not send
		// notifications/message.
		if raw, ok := meta[metaLogLevel]; ok {
			var level string
			if json.Unmarshal(raw, &level) != nil || !logLevels[level] {
				return rt, newError(codeInvalidParams, `invalid params: _meta "`+metaLogLevel+`" must be an MCP log level`)
			}
			rt.context.LogLevel = level
		}
	case eraLegacy:
		rt.context.LogLevel = g.logLevels.get(c.sessionKey)
	}
	return rt, nil
}

// toolCallParams reads and checks tools/call params.
func toolCallParams(params object) (name string, args object, rerr *rpcError) {
	name, ok := stringParam(params, "name")
	if !ok || name == "" {
		return "", nil, newError(codeInvalidParams, "invalid params: name is required")
	}
	args = object{}
	if raw, ok := params["arguments"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &args) != nil || args == nil {
			return "", nil, newError(codeInvalidParams, "invalid params: arguments must be an object")
		}
	}
	return name, args, nil
}

func (g *Gateway) callTool(ctx context.Context, c *call) (json.RawMessage, *rpcError) {
	name, args, rerr := toolCallParams(c.params)
	if rerr != nil {
		return nil, rerr
	}
	spanFrom(ctx).SetAttributes(attribute.String("gen_ai.tool.name", name))
	rt, rerr := g.roundTripParams(c, "tools/call", name)
	if rerr != nil {
		return nil, rerr
	}
	if c.era == eraModern {
		if rerr := g.checkParamHeaders(ctx, c, name, args); rerr != nil {
			return nil, rerr
		}
	}
	return g.callAggregatorTool(ctx, c, name, args, rt)
}

// callAggregatorTool calls a tool as the request's principal; it serves
// tools/call and the optimizer's call_tool.
func (g *Gateway) callAggregatorTool(ctx context.Context, c *call, name string, args object, rt roundTrip) (json.RawMessage, *rpcError) {
	return g.roundTrips(ctx, c, rt, false, func(ctx context.Context, rt roundTrip) (string, string, error) {
		req := &aggregatorv1.CallToolRequest{
			Principal: c.principal, Name: name, ArgumentsJson: string(args.encode()), Context: rt.context,
			InputResponsesJson: rt.inputResponses, RequestState: rt.requestState,
		}
		call := g.agg.CallTool
		if wantsNotifications(rt.context) {
			call = func(ctx context.Context, req *aggregatorv1.CallToolRequest, _ ...grpc.CallOption) (*aggregatorv1.CallToolResponse, error) {
				return g.callToolStreaming(ctx, c, req)
			}
		}
		resp, err := call(ctx, req)
		return resp.GetResultJson(), resp.GetResultType(), err
	})
}

func (g *Gateway) readResource(ctx context.Context, c *call) (json.RawMessage, *rpcError) {
	uri, ok := stringParam(c.params, "uri")
	if !ok || uri == "" {
		return nil, newError(codeInvalidParams, "invalid params: uri is required")
	}
	rt, rerr := g.roundTripParams(c, "resources/read", uri)
	if rerr != nil {
		return nil, rerr
	}
	result, rerr := g.roundTrips(ctx, c, rt, true, func(ctx context.Context, rt roundTrip) (string, string, error) {
		resp, err := g.agg.ReadResource(ctx, &aggregatorv1.ReadResourceRequest{
			Principal: c.principal, Uri: uri, Context: rt.context,
			InputResponsesJson: rt.inputResponses, RequestState: rt.requestState,
		})
		return resp.GetResultJson(), resp.GetResultType(), err
	})
	if rerr != nil && (rerr.Code == codeInvalidParams || rerr.Code == codeResourceNotFound) && rerr.Data == nil {
		rerr.Data = map[string]string{"uri": uri}
	}
	return result, rerr
}

func (g *Gateway) getPrompt(ctx context.Context, c *call) (json.RawMessage, *rpcError) {
	name, ok := stringParam(c.params, "name")
	if !ok || name == "" {
		return nil, newError(codeInvalidParams, "invalid params: name is required")
	}
	var args map[string]string
	if raw, ok := c.params["arguments"]; ok && string(raw) != "null" {
		if json.Unmarshal(raw, &args) != nil {
			return nil, newError(codeInvalidParams, "invalid params: prompt arguments must map names to strings")
		}
	}
	rt, rerr := g.roundTripParams(c, "prompts/get", name)
	if rerr != nil {
		return nil, rerr
	}
	return g.roundTrips(ctx, c, rt, false, func(ctx context.Context, rt roundTrip) (string, string, error) {
		resp, err := g.agg.GetPrompt(ctx, &aggregatorv1.GetPromptRequest{
			Principal: c.principal, Name: name, Arguments: args, Context: rt.context,
			InputResponsesJson: rt.inputResponses, RequestState: rt.requestState,
		})
		return resp.GetResultJson(), resp.GetResultType(), err
	})
}

func (g *Gateway) complete(ctx context.Context, c *call) (json.RawMessage, *rpcError) {
	if _, ok := c.params["ref"]; !ok {
		return nil, newError(codeInvalidParams, "invalid params: ref is required")
	}
	if _, ok := c.params["argument"]; !ok {
		return nil, newError(codeInvalidParams, "invalid params: argument is required")
	}
	params := object{}
	for k, v := range c.params {
		if k != "_meta" {
			params[k] = v
		}
	}
	resp, err := g.agg.Complete(ctx, &aggregatorv1.CompleteRequest{Principal: c.principal, ParamsJson: string(params.encode())})
	if err != nil {
		return nil, grpcError(ctx, g.log, err, c.era, c.method)
	}
	res, err := decodeObject(resp.GetResultJson())
	if err != nil {
		return nil, grpcError(ctx, g.log, err, c.era, c.method)
	}
	return g.shape(c, res, false), nil
}

// backendResult passes a backend's result through. An input_required
// (multi-round-trip) result is only for Modern clients that declared what
// it asks of them, and its requestState is sealed for this principal and
// request (see session.Sealer.SealState).
func (g *Gateway) backendResult(ctx context.Context, c *call, rt roundTrip, resultJSON, resultType string, cacheable bool) (json.RawMessage, *rpcError) {
	res, err := decodeObject(resultJSON)
	if err != nil {
		return nil, grpcError(ctx, g.log, err, c.era, c.method)
	}
	if resultType == "" {
		_ = json.Unmarshal(res["resultType"], &resultType)
	}
	if resultType == "input_required" {
		if c.era == eraLegacy {
			// roundTrips gave up after maxInputRounds.
			return nil, newError(codeInternalError, "the server kept asking the client for input; giving up")
		}
		if rerr := checkInputCapabilities(res, c.clientCaps); rerr != nil {
			return nil, rerr
		}
		if string(res["content"]) == "null" {
			delete(res, "content")
		}
		if raw, ok := res["requestState"]; ok {
			var state string
			if json.Unmarshal(raw, &state) != nil {
				return nil, newError(codeInternalError, "internal error: malformed request state from the server")
			}
			sealed, err := g.sealer.SealState(c.principal, rt.binding, state, requestStateTTL)
			if err != nil {
				return nil, grpcError(ctx, g.log, err, c.era, c.method)
			}
			res.set("requestState", sealed)
		}
		res.set("resultType", "input_required")
		return g.shape(c, res, false), nil
	}
	return g.shape(c, res, cacheable), nil
}

// inputCapability names the client capability each kind of input request
// needs.
var inputCapability = map[string]string{
	"elicitation/create":     "elicitation",
	"sampling/createMessage": "sampling",
	"roots/list":             "roots",
}

// checkInputCapabilities refuses an input_required result that asks the
// client for something it did not declare (-32021).
func checkInputCapabilities(res object, caps object) *rpcError {
	var requests map[string]struct {
		Method string `json:"method"`
	}
	if raw, ok := res["inputRequests"]; ok {
		if json.Unmarshal(raw, &requests) != nil {
			return newError(codeInternalError, "internal error: malformed input requests from the server")
		}
	}
	missing := map[string]struct{}{}
	for _, req := range requests {
		capName, known := inputCapability[req.Method]
		if !known {
			return newError(codeInternalError, "internal error: unsupported input request from the server")
		}
		if _, declared := caps[capName]; !declared {
			missing[capName] = struct{}{}
		}
	}
	if len(missing) == 0 {
		return nil
	}
	e := newError(codeMissingCapability, "missing required client capability")
	e.Data = map[string]any{"requiredCapabilities": missing}
	return e
}
