package methods

import (
	"context"
	"encoding/json"

	"github.com/switchboard-mcp/switchboard/gateway/internal/mcperr"
	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// capabilities describes what this principal can use. The list kinds
// follow what the gateway serves, not what the principal's view holds at
// this moment: tools, resources and prompts are always announced, with
// listChanged because the listen and GET streams deliver those
// notifications, so a client that connected while a backend was down (an
// empty view) still listens and learns of its items when it is back.
// subscribe and completions describe the backends behind the view, so
// they follow the view: some backend the principal sees something of
// supports them.
//
// extensions are those the view's backends advertise and the catalog
// carries through (MCP Apps), plus the gateway's own in Modern (tasks).
func (s *Server) capabilities(ctx context.Context, req *Request) (wire.Object, string, *wire.Error) {
	d, err := s.agg.Discover(ctx, &aggregatorv1.DiscoverRequest{Principal: req.Principal, Server: req.Server})
	if err != nil {
		return nil, "", mcperr.FromError(ctx, s.log, err, req.Era, req.Method)
	}
	// In either view: the optimizer's tools change when a reload changes
	// the view an endpoint serves (listen.go).
	listChanged := map[string]bool{"listChanged": true}
	caps := wire.Object{}
	caps.Set("tools", listChanged)
	resources := map[string]bool{"listChanged": true}
	// Updates are delivered (on a listen or GET stream) only where some
	// backend of the principal's view supports subscribe.
	if d.GetResourcesSubscribe() {
		resources["subscribe"] = true
	}
	caps.Set("resources", resources)
	caps.Set("prompts", listChanged)
	if d.GetCompletions() {
		caps.Set("completions", struct{}{})
	}
	extensions := map[string]struct{}{}
	for _, name := range d.GetExtensions() {
		extensions[name] = struct{}{}
	}
	// Tasks are the aggregator's, for any tool it runs as one, in every
	// view (the optimizer's call_tool too); 2025-11-25 has tasks of its
	// own (Initialize).
	if req.Era == mcpspec.EraModern {
		extensions[wire.TasksExtension] = struct{}{}
	}
	if len(extensions) > 0 {
		caps.Set("extensions", extensions)
	}
	instructions := d.GetInstructions()
	if instructions == "" {
		instructions = s.cfg.Instructions
	}
	return caps, instructions, nil
}

func (s *Server) discover(ctx context.Context, req *Request, _ Responder) (json.RawMessage, *wire.Error) {
	caps, instructions, rerr := s.capabilities(ctx, req)
	if rerr != nil {
		return nil, rerr
	}
	res := wire.Object{}
	res.Set("supportedVersions", mcpspec.SupportedVersions)
	res.Set("capabilities", caps)
	if instructions != "" {
		res.Set("instructions", instructions)
	}
	return s.shape(req, res.Encode(), true)
}

var legacyTasksCapability = map[string]any{"list": struct{}{}, "cancel": struct{}{}, "requests": map[string]any{"tools": map[string]any{"call": struct{}{}}}}

// maxSessionCapabilities bounds the capabilities sealed into a session id,
// which travels in a header on every request.
const maxSessionCapabilities = 1024

// sessionCapabilities keeps what the gateway consults of a Legacy client's
// capabilities: the ones input requests need. Oversized, each shrinks to
// what it declares: every member is kept, null as null, flags as they
// are, any other value as an empty object, so that "elicitation":
// {"url": {...}} stays URL elicitation only (an empty elicitation object
// would declare form elicitation too), and a capability that is null or
// no object declares nothing. A client whose declarations alone are past
// the bound keeps none.
func sessionCapabilities(declared wire.Object) json.RawMessage {
	kept := wire.Object{}
	for _, name := range mcpspec.InputCapability {
		if v, ok := declared[name]; ok {
			kept[name] = v
		}
	}
	if out := kept.Encode(); len(out) <= maxSessionCapabilities {
		return out
	}
	for name, v := range kept {
		var members wire.Object
		if json.Unmarshal(v, &members) != nil || members == nil {
			delete(kept, name)
			continue
		}
		bare := wire.Object{}
		for k, mv := range members {
			switch string(mv) {
			case "null", "true", "false":
				bare[k] = mv
			default:
				bare[k] = json.RawMessage(`{}`)
			}
		}
		kept[name] = bare.Encode()
	}
	if out := kept.Encode(); len(out) <= maxSessionCapabilities {
		return out
	}
	return json.RawMessage(`{}`)
}

// Initialize negotiates the Legacy version and mints a sealed session id
// for the principal; only 2025-11-25 is served under Legacy, so it is
// echoed or offered.
func (s *Server) Initialize(ctx context.Context, req *Request) (result json.RawMessage, sessionID string, rerr *wire.Error) {
	requested, ok := req.Params.String("protocolVersion")
	if !ok || requested == "" {
		return nil, "", wire.InvalidParams("protocolVersion is required")
	}
	declared := wire.Object{}
	if raw, ok := req.Params["capabilities"]; ok && json.Unmarshal(raw, &declared) != nil {
		return nil, "", wire.InvalidParams("capabilities must be an object")
	}
	ctx, cancel := context.WithTimeout(ctx, s.cfg.RequestTimeout)
	defer cancel()
	caps, instructions, rerr := s.capabilities(ctx, req)
	if rerr != nil {
		return nil, "", rerr
	}
	caps.Set("logging", struct{}{})
	// 2025-11-25's experimental tasks: task-augmented tools/call, tasks/list
	// and tasks/cancel (tasks/get and tasks/result come with them).
	caps.Set("tasks", legacyTasksCapability)
	id, _, err := s.sealer.Mint(req.Principal, req.Server, mcpspec.Legacy, sessionCapabilities(declared))
	if err != nil {
		s.log.ErrorContext(ctx, "mint session", "err", err)
		return nil, "", wire.NewError(wire.CodeInternalError, "internal error")
	}
	res := wire.Object{}
	res.Set("protocolVersion", mcpspec.Legacy)
	res.Set("capabilities", caps)
	res["serverInfo"] = s.cfg.ServerInfo
	if instructions != "" {
		res.Set("instructions", instructions)
	}
	return res.Encode(), id, nil
}
