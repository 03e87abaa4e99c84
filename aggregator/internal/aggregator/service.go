package aggregator

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// Service implements aggregatorv1.AggregatorServiceServer on an Engine.
// Every handler acts for svcauth.PrincipalFrom(ctx), which the auth
// interceptor has resolved from the caller's credential.
type Service struct {
	aggregatorv1.UnimplementedAggregatorServiceServer
	e   *Engine
	log *slog.Logger
}

// NewService serves e.
func NewService(e *Engine) *Service { return &Service{e: e, log: e.log} }

var _ aggregatorv1.AggregatorServiceServer = (*Service)(nil)

func (s *Service) fail(ctx context.Context, method string, err error) error {
	return toStatus(ctx, s.log, method, err)
}

// Discover summarises the principal's view.
func (s *Service) Discover(ctx context.Context, _ *aggregatorv1.DiscoverRequest) (*aggregatorv1.DiscoverResponse, error) {
	snap, _ := s.e.Snapshot()
	v := s.e.View(snap, svcauth.PrincipalFrom(ctx))
	resp := &aggregatorv1.DiscoverResponse{
		CatalogVersion:        snap.Version,
		ToolCount:             uint32(v.Len(catalog.KindTools)),
		ResourceCount:         uint32(v.Len(catalog.KindResources)),
		ResourceTemplateCount: uint32(v.Len(catalog.KindResourceTemplates)),
		PromptCount:           uint32(v.Len(catalog.KindPrompts)),
		ToolsDigest:           v.Digest(catalog.KindTools),
		Instructions:          s.e.opts.Instructions,
	}
	// Capabilities count only for backends the principal sees something of.
	for _, i := range v.Items(catalog.KindResources) {
		resp.ResourcesSubscribe = resp.ResourcesSubscribe || subscribes(snap.Capabilities[snap.Resources[i].Backend])
	}
	for _, i := range v.Items(catalog.KindResourceTemplates) {
		b := snap.Templates[i].Backend
		resp.ResourcesSubscribe = resp.ResourcesSubscribe || subscribes(snap.Capabilities[b])
		resp.Completions = resp.Completions || completes(snap.Capabilities[b])
	}
	for _, i := range v.Items(catalog.KindPrompts) {
		resp.Completions = resp.Completions || completes(snap.Capabilities[snap.Prompts[i].Backend])
	}
	return resp, nil
}

func subscribes(c *mcp.ServerCapabilities) bool {
	return c != nil && c.Resources != nil && c.Resources.Subscribe
}

func completes(c *mcp.ServerCapabilities) bool { return c != nil && c.Completions != nil }

// page serves one page of kind k of the caller's view.
func (s *Service) page(ctx context.Context, k catalog.Kind, cursor string, size uint32) (*catalog.View, []int32, string, error) {
	snap, _ := s.e.Snapshot()
	v := s.e.View(snap, svcauth.PrincipalFrom(ctx))
	n := s.e.opts.PageSize
	if size > 0 {
		n = int(min(size, uint32(s.e.opts.MaxPageSize)))
	}
	items := v.Items(k)
	start, end, next, err := catalog.Page(k, len(items), func(i int) string { return v.Key(k, i) }, cursor, n)
	if err != nil {
		return nil, nil, "", err
	}
	return v, items[start:end], next, nil
}

// ListTools serves one page of tools.
func (s *Service) ListTools(ctx context.Context, req *aggregatorv1.ListToolsRequest) (*aggregatorv1.ListToolsResponse, error) {
	v, idx, next, err := s.page(ctx, catalog.KindTools, req.GetCursor(), req.GetPageSize())
	if err != nil {
		return nil, s.fail(ctx, "ListTools", err)
	}
	out := &aggregatorv1.ListToolsResponse{NextCursor: next, CatalogVersion: v.Snapshot.Version, Tools: make([]*aggregatorv1.Tool, len(idx))}
	for j, i := range idx {
		out.Tools[j] = v.Snapshot.Tools[i].Msg
	}
	return out, nil
}

// ListResources serves one page of resources.
func (s *Service) ListResources(ctx context.Context, req *aggregatorv1.ListResourcesRequest) (*aggregatorv1.ListResourcesResponse, error) {
	v, idx, next, err := s.page(ctx, catalog.KindResources, req.GetCursor(), req.GetPageSize())
	if err != nil {
		return nil, s.fail(ctx, "ListResources", err)
	}
	out := &aggregatorv1.ListResourcesResponse{NextCursor: next, CatalogVersion: v.Snapshot.Version, Resources: make([]*aggregatorv1.Resource, len(idx))}
	for j, i := range idx {
		out.Resources[j] = v.Snapshot.Resources[i].Msg
	}
	return out, nil
}

// ListResourceTemplates serves one page of resource templates.
func (s *Service) ListResourceTemplates(ctx context.Context, req *aggregatorv1.ListResourceTemplatesRequest) (*aggregatorv1.ListResourceTemplatesResponse, error) {
	v, idx, next, err := s.page(ctx, catalog.KindResourceTemplates, req.GetCursor(), req.GetPageSize())
	if err != nil {
		return nil, s.fail(ctx, "ListResourceTemplates", err)
	}
	out := &aggregatorv1.ListResourceTemplatesResponse{NextCursor: next, CatalogVersion: v.Snapshot.Version, ResourceTemplates: make([]*aggregatorv1.ResourceTemplate, len(idx))}
	for j, i := range idx {
		out.ResourceTemplates[j] = v.Snapshot.Templates[i].Msg
	}
	return out, nil
}

// ListPrompts serves one page of prompts.
func (s *Service) ListPrompts(ctx context.Context, req *aggregatorv1.ListPromptsRequest) (*aggregatorv1.ListPromptsResponse, error) {
	v, idx, next, err := s.page(ctx, catalog.KindPrompts, req.GetCursor(), req.GetPageSize())
	if err != nil {
		return nil, s.fail(ctx, "ListPrompts", err)
	}
	out := &aggregatorv1.ListPromptsResponse{NextCursor: next, CatalogVersion: v.Snapshot.Version, Prompts: make([]*aggregatorv1.Prompt, len(idx))}
	for j, i := range idx {
		out.Prompts[j] = v.Snapshot.Prompts[i].Msg
	}
	return out, nil
}

// owner checks that the principal may use the item of kind k with key and
// returns its backend, failing fast when that backend is down. Denied and
// missing are the same errNotFound.
func (s *Service) owner(ctx context.Context, snap *catalog.Snapshot, k catalog.Kind, key, backendName string, found bool) (*backend.Client, error) {
	if !found || !s.e.principalAllowed(svcauth.PrincipalFrom(ctx), k, key, backendName) {
		return nil, errNotFound
	}
	b := s.e.byName[backendName]
	if b == nil {
		return nil, errNotFound
	}
	if snap.Down[backendName] || b.Status().State == backend.Unhealthy {
		return nil, errBackendDown
	}
	return b, nil
}

// resultJSON encodes a backend result for the API.
func resultJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

func resultType(needsInput bool) string {
	if needsInput {
		return "input_required"
	}
	return "complete"
}

// clientCapabilities declares the client's capabilities on a backend
// request, so that a Modern backend asks only for input the client can
// give (per-request _meta, which the SDK leaves in place of its own). The
// backend session is shared by every caller, so a Legacy backend still sees
// the capabilities the aggregator declared at initialize (none): it cannot
// send a caller a request the caller did not declare, because it can send
// none at all.
func clientCapabilities(rc *aggregatorv1.RequestContext) (mcp.Meta, error) {
	raw := rc.GetClientCapabilitiesJson()
	if raw == "" {
		return nil, nil
	}
	var caps map[string]json.RawMessage
	if err := json.Unmarshal([]byte(raw), &caps); err != nil || caps == nil {
		return nil, invalidArgument("client_capabilities_json must be a JSON object")
	}
	return mcp.Meta{mcp.MetaKeyClientCapabilities: json.RawMessage(raw)}, nil
}

func inputResponses(raw string) (mcp.InputResponseMap, error) {
	if raw == "" {
		return nil, nil
	}
	var m mcp.InputResponseMap
	if err := json.Unmarshal([]byte(raw), &m); err != nil {
		return nil, invalidArgument("input_responses_json is not a valid map of input responses")
	}
	return m, nil
}

// timed runs a backend request and records its metric.
func timed[T any](s *Service, b *backend.Client, method string, f func() (T, error)) (T, error) {
	start := time.Now()
	res, err := f()
	s.e.opts.Metrics.backendRequest(b.Name(), method, err, time.Since(start))
	return res, err
}

// CallTool calls a tool on its owning backend under its original name.
func (s *Service) CallTool(ctx context.Context, req *aggregatorv1.CallToolRequest) (*aggregatorv1.CallToolResponse, error) {
	resp, err := s.callTool(ctx, req)
	return resp, s.fail(ctx, "CallTool", err)
}

func (s *Service) callTool(ctx context.Context, req *aggregatorv1.CallToolRequest) (*aggregatorv1.CallToolResponse, error) {
	b, params, err := s.toolCall(ctx, req)
	if err != nil {
		return nil, err
	}
	call := func() (*mcp.CallToolResult, error) { return b.CallTool(ctx, params) }
	owner := svcauth.PrincipalFrom(ctx).GetSubject() + "\x00" + req.GetName()
	if state := req.GetRequestState(); strings.HasPrefix(state, backend.HeldStatePrefix) {
		var responses map[string]json.RawMessage
		if raw := req.GetInputResponsesJson(); raw != "" {
			if err := json.Unmarshal([]byte(raw), &responses); err != nil {
				return nil, invalidArgument("input_responses_json is not a valid map of input responses")
			}
		}
		call = func() (*mcp.CallToolResult, error) { return b.ResumeHeld(ctx, state, owner, responses) }
	} else if caps := askableCapabilities(req.GetContext()); caps != nil && b.IsLegacy() {
		// A Legacy backend asks for input mid-call; the call is held open
		// across the client's retry (see backend.CallToolAsking).
		call = func() (*mcp.CallToolResult, error) { return b.CallToolAsking(ctx, params, caps, owner) }
	}
	res, err := timed(s, b, "tools/call", call)
	if errors.Is(err, backend.ErrHeldCallGone) {
		return nil, invalidArgument("requestState names a call that is no longer held: it ended, its input did not come in time, or the retry reached another aggregator replica; call again without requestState")
	}
	if err != nil {
		return nil, err
	}
	return callToolResponse(b, res)
}

// askableCapabilities are the client's capabilities when they let a
// backend ask it for input (elicitation or sampling), else nil.
func askableCapabilities(rc *aggregatorv1.RequestContext) *mcp.ClientCapabilities {
	raw := rc.GetClientCapabilitiesJson()
	if raw == "" {
		return nil
	}
	var caps mcp.ClientCapabilities
	if json.Unmarshal([]byte(raw), &caps) != nil || (caps.Elicitation == nil && caps.Sampling == nil) {
		return nil
	}
	return &caps
}

// toolCall resolves a call's backend and builds its backend params.
func (s *Service) toolCall(ctx context.Context, req *aggregatorv1.CallToolRequest) (*backend.Client, *mcp.CallToolParams, error) {
	snap, _ := s.e.Snapshot()
	it, found := snap.Tool(req.GetName())
	var bname string
	if found {
		bname = it.Backend
	}
	b, err := s.owner(ctx, snap, catalog.KindTools, req.GetName(), bname, found)
	if err != nil {
		return nil, nil, err
	}
	params := &mcp.CallToolParams{Name: it.Original, RequestState: req.GetRequestState()}
	if params.Meta, err = clientCapabilities(req.GetContext()); err != nil {
		return nil, nil, err
	}
	if raw := req.GetArgumentsJson(); raw != "" {
		var args map[string]json.RawMessage
		if err := json.Unmarshal([]byte(raw), &args); err != nil || args == nil {
			return nil, nil, invalidArgument("arguments_json must be a JSON object")
		}
		params.Arguments = json.RawMessage(raw)
	}
	if params.InputResponses, err = inputResponses(req.GetInputResponsesJson()); err != nil {
		return nil, nil, err
	}
	return b, params, nil
}

func callToolResponse(b *backend.Client, res *mcp.CallToolResult) (*aggregatorv1.CallToolResponse, error) {
	text, err := resultJSON(res)
	if err != nil {
		return nil, err
	}
	// A held call's input_required result is made here, not decoded from a
	// backend's answer, so its input requests say what it is.
	needsInput := res.NeedsInput() || len(res.InputRequests) > 0
	return &aggregatorv1.CallToolResponse{ResultJson: text, IsError: res.IsError, ResultType: resultType(needsInput), Backend: b.Name()}, nil
}

// CallToolStream calls a tool like CallTool and streams the progress and
// log notifications the backend sends for that call before the result.
func (s *Service) CallToolStream(req *aggregatorv1.CallToolStreamRequest, stream grpc.ServerStreamingServer[aggregatorv1.CallToolStreamResponse]) error {
	ctx := stream.Context()
	resp, err := s.callToolStream(ctx, req.GetCall(), stream)
	if err != nil {
		return s.fail(ctx, "CallToolStream", err)
	}
	return stream.Send(&aggregatorv1.CallToolStreamResponse{Event: &aggregatorv1.CallToolStreamResponse_Result{Result: resp}})
}

func (s *Service) callToolStream(ctx context.Context, req *aggregatorv1.CallToolRequest, stream grpc.ServerStreamingServer[aggregatorv1.CallToolStreamResponse]) (*aggregatorv1.CallToolResponse, error) {
	rc := req.GetContext()
	token := rc.GetProgressTokenJson()
	if token != "" && !json.Valid([]byte(token)) {
		return nil, invalidArgument("progress_token_json is not JSON")
	}
	level := mcp.LoggingLevel(rc.GetLogLevel())
	if level != "" && !backend.ValidLevel(level) {
		return nil, invalidArgument("log_level is not an MCP log level")
	}
	b, params, err := s.toolCall(ctx, req)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(req.GetRequestState(), backend.HeldStatePrefix) || (askableCapabilities(rc) != nil && b.IsLegacy()) {
		// A call that may be held for the client's input runs as a plain
		// call; it relays no notifications.
		return s.callTool(ctx, req)
	}
	var sendErr error
	emit := func(method string, p any) {
		text, err := notificationParams(p, token)
		if err != nil || sendErr != nil {
			return
		}
		sendErr = stream.Send(&aggregatorv1.CallToolStreamResponse{Event: &aggregatorv1.CallToolStreamResponse_Notification{
			Notification: &aggregatorv1.Notification{Method: method, ParamsJson: text},
		}})
	}
	res, err := timed(s, b, "tools/call", func() (*mcp.CallToolResult, error) {
		return b.CallToolStreamed(ctx, params, token != "", level, emit)
	})
	if err != nil {
		return nil, err
	}
	if sendErr != nil {
		return nil, sendErr
	}
	return callToolResponse(b, res)
}

// notificationParams encodes a backend notification's params for the
// caller: without the backend's _meta, and with the caller's own progress
// token in place of the one the aggregator sent.
func notificationParams(p any, token string) (string, error) {
	raw, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return "", err
	}
	delete(fields, "_meta")
	if _, ok := fields["progressToken"]; ok {
		fields["progressToken"] = json.RawMessage(token)
	}
	out, err := json.Marshal(fields)
	return string(out), err
}

// resourceOwner routes a URI as ReadResource does: an exact URI first, then
// the first template (in sorted order) that matches. The caller's access is
// decided on the concrete URI, whichever way it was routed.
func (s *Service) resourceOwner(ctx context.Context, snap *catalog.Snapshot, uri string) (*backend.Client, error) {
	var bname string
	found := false
	if r, ok := snap.Resource(uri); ok {
		bname, found = r.Backend, true
	} else {
		snap.MatchTemplates(uri, func(t *catalog.Item[*aggregatorv1.ResourceTemplate]) bool {
			bname, found = t.Backend, true
			return false
		})
	}
	return s.owner(ctx, snap, catalog.KindResources, uri, bname, found)
}

// ReadResource reads a resource from its owning backend.
func (s *Service) ReadResource(ctx context.Context, req *aggregatorv1.ReadResourceRequest) (*aggregatorv1.ReadResourceResponse, error) {
	resp, err := s.readResource(ctx, req)
	return resp, s.fail(ctx, "ReadResource", err)
}

func (s *Service) readResource(ctx context.Context, req *aggregatorv1.ReadResourceRequest) (*aggregatorv1.ReadResourceResponse, error) {
	uri := req.GetUri()
	if uri == "" {
		return nil, invalidArgument("uri is required")
	}
	snap, _ := s.e.Snapshot()
	b, err := s.resourceOwner(ctx, snap, uri)
	if err != nil {
		return nil, err
	}
	params := &mcp.ReadResourceParams{URI: uri, RequestState: req.GetRequestState()}
	if params.Meta, err = clientCapabilities(req.GetContext()); err != nil {
		return nil, err
	}
	if params.InputResponses, err = inputResponses(req.GetInputResponsesJson()); err != nil {
		return nil, err
	}
	res, err := timed(s, b, "resources/read", func() (*mcp.ReadResourceResult, error) { return b.ReadResource(ctx, params) })
	if err != nil {
		return nil, err
	}
	text, err := resultJSON(res)
	if err != nil {
		return nil, err
	}
	return &aggregatorv1.ReadResourceResponse{ResultJson: text, ResultType: resultType(res.NeedsInput()), Backend: b.Name()}, nil
}

// GetPrompt renders a prompt on its owning backend.
func (s *Service) GetPrompt(ctx context.Context, req *aggregatorv1.GetPromptRequest) (*aggregatorv1.GetPromptResponse, error) {
	resp, err := s.getPrompt(ctx, req)
	return resp, s.fail(ctx, "GetPrompt", err)
}

func (s *Service) getPrompt(ctx context.Context, req *aggregatorv1.GetPromptRequest) (*aggregatorv1.GetPromptResponse, error) {
	snap, _ := s.e.Snapshot()
	it, found := snap.Prompt(req.GetName())
	var bname string
	if found {
		bname = it.Backend
	}
	b, err := s.owner(ctx, snap, catalog.KindPrompts, req.GetName(), bname, found)
	if err != nil {
		return nil, err
	}
	params := &mcp.GetPromptParams{Name: it.Original, Arguments: req.GetArguments(), RequestState: req.GetRequestState()}
	if params.Meta, err = clientCapabilities(req.GetContext()); err != nil {
		return nil, err
	}
	if params.InputResponses, err = inputResponses(req.GetInputResponsesJson()); err != nil {
		return nil, err
	}
	res, err := timed(s, b, "prompts/get", func() (*mcp.GetPromptResult, error) { return b.GetPrompt(ctx, params) })
	if err != nil {
		return nil, err
	}
	text, err := resultJSON(res)
	if err != nil {
		return nil, err
	}
	return &aggregatorv1.GetPromptResponse{ResultJson: text, ResultType: resultType(res.NeedsInput()), Backend: b.Name()}, nil
}

// Complete routes a completion request by its reference: a prompt by
// advertised name, or a resource template (or resource) by URI.
func (s *Service) Complete(ctx context.Context, req *aggregatorv1.CompleteRequest) (*aggregatorv1.CompleteResponse, error) {
	resp, err := s.complete(ctx, req)
	return resp, s.fail(ctx, "Complete", err)
}

func (s *Service) complete(ctx context.Context, req *aggregatorv1.CompleteRequest) (*aggregatorv1.CompleteResponse, error) {
	var params mcp.CompleteParams
	if err := json.Unmarshal([]byte(req.GetParamsJson()), &params); err != nil || params.Ref == nil {
		return nil, invalidArgument("params_json must be completion params with a ref")
	}
	params.Meta = nil
	snap, _ := s.e.Snapshot()
	var (
		b   *backend.Client
		err error
	)
	switch params.Ref.Type {
	case "ref/prompt":
		name := params.Ref.Name
		it, found := snap.Prompt(name)
		var bname string
		if found {
			bname = it.Backend
		}
		if b, err = s.owner(ctx, snap, catalog.KindPrompts, name, bname, found); err == nil {
			params.Ref.Name = it.Original
		}
	case "ref/resource":
		uri := params.Ref.URI
		if t, ok := snap.Template(uri); ok {
			b, err = s.owner(ctx, snap, catalog.KindResourceTemplates, uri, t.Backend, true)
		} else if r, ok := snap.Resource(uri); ok {
			b, err = s.owner(ctx, snap, catalog.KindResources, uri, r.Backend, true)
		} else {
			err = errNotFound
		}
	default:
		return nil, invalidArgument("ref.type must be ref/prompt or ref/resource")
	}
	if err != nil {
		return nil, err
	}
	res, err := timed(s, b, "completion/complete", func() (*mcp.CompleteResult, error) { return b.Complete(ctx, &params) })
	if err != nil {
		return nil, err
	}
	text, err := resultJSON(res)
	if err != nil {
		return nil, err
	}
	return &aggregatorv1.CompleteResponse{ResultJson: text}, nil
}

// WatchCatalog sends the current version, then an event whenever the
// caller's view changes.
func (s *Service) WatchCatalog(req *aggregatorv1.WatchCatalogRequest, stream grpc.ServerStreamingServer[aggregatorv1.WatchCatalogResponse]) error {
	ctx := stream.Context()
	p := svcauth.PrincipalFrom(ctx)
	if req.GetAllChanges() {
		if c, _ := svcauth.CallerFrom(ctx); !c.AssertPrincipals {
			return s.fail(ctx, "WatchCatalog", errAllChangesDenied)
		}
	}
	viewOf := func(snap *catalog.Snapshot) *catalog.View {
		if req.GetAllChanges() {
			return s.e.FullView(snap)
		}
		return s.e.View(snap, p)
	}
	snap, superseded := s.e.Snapshot()
	view := viewOf(snap)
	updated := make(chan string, updateBuffer)
	subscribed := s.subscribeResources(ctx, snap, req.GetResourceUris(), updated)
	defer func() {
		for _, unsubscribe := range subscribed {
			unsubscribe()
		}
	}()
	first := &aggregatorv1.WatchCatalogResponse{CatalogVersion: snap.Version, ToolsDigest: view.Digest(catalog.KindTools)}
	for _, uri := range req.GetResourceUris() {
		if _, ok := subscribed[uri]; ok && !slices.Contains(first.SubscribedResourceUris, uri) {
			first.SubscribedResourceUris = append(first.SubscribedResourceUris, uri)
		}
	}
	if err := stream.Send(first); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case uri := <-updated:
			if err := stream.Send(&aggregatorv1.WatchCatalogResponse{CatalogVersion: snap.Version, UpdatedResourceUris: []string{uri}}); err != nil {
				return err
			}
			continue
		case <-superseded:
		}
		snap, superseded = s.e.Snapshot()
		// A URI the caller may no longer read, or that is gone, stops
		// being delivered. A backend that is down keeps its subscriptions.
		for uri, unsubscribe := range subscribed {
			if _, err := s.resourceOwner(ctx, snap, uri); errors.Is(err, errNotFound) {
				unsubscribe()
				delete(subscribed, uri)
			}
		}
		next := viewOf(snap)
		ev := &aggregatorv1.WatchCatalogResponse{CatalogVersion: snap.Version, ToolsDigest: next.Digest(catalog.KindTools)}
		for _, k := range catalog.Kinds {
			if next.Digest(k) != view.Digest(k) {
				ev.Changed = append(ev.Changed, apiKind[k])
			}
		}
		view = next
		if len(ev.Changed) == 0 {
			continue
		}
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
}

// maxWatchedResources bounds the resource URIs one watch may subscribe to.
const maxWatchedResources = 256

// subscribeResources subscribes ch to every URI of uris that the caller may
// read and whose owner advertises resources.subscribe; the others are left
// out silently, so a denied URI cannot be told from an unknown one. It
// returns the unsubscribe function of each subscribed URI.
func (s *Service) subscribeResources(ctx context.Context, snap *catalog.Snapshot, uris []string, ch chan<- string) map[string]func() {
	subscribed := map[string]func(){}
	for _, uri := range uris {
		if _, dup := subscribed[uri]; dup || uri == "" || len(subscribed) == maxWatchedResources {
			continue
		}
		b, err := s.resourceOwner(ctx, snap, uri)
		if err != nil || !subscribes(snap.Capabilities[b.Name()]) {
			continue
		}
		unsubscribe, err := s.e.subscribe(ctx, b, uri, ch)
		if err != nil {
			s.log.Warn("backend subscribe failed", "backend", b.Name(), "err", b.Redact(err.Error()))
			continue
		}
		subscribed[uri] = unsubscribe
	}
	return subscribed
}

var apiKind = map[catalog.Kind]aggregatorv1.CatalogKind{
	catalog.KindTools:             aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS,
	catalog.KindResources:         aggregatorv1.CatalogKind_CATALOG_KIND_RESOURCES,
	catalog.KindResourceTemplates: aggregatorv1.CatalogKind_CATALOG_KIND_RESOURCE_TEMPLATES,
	catalog.KindPrompts:           aggregatorv1.CatalogKind_CATALOG_KIND_PROMPTS,
}

var apiHealth = map[backend.State]aggregatorv1.BackendHealth{
	backend.Unknown:   aggregatorv1.BackendHealth_BACKEND_HEALTH_UNKNOWN,
	backend.Healthy:   aggregatorv1.BackendHealth_BACKEND_HEALTH_HEALTHY,
	backend.Degraded:  aggregatorv1.BackendHealth_BACKEND_HEALTH_DEGRADED,
	backend.Unhealthy: aggregatorv1.BackendHealth_BACKEND_HEALTH_UNHEALTHY,
}

// ListBackends reports every backend in name order. With a principal in
// the request, or for a caller that may not assert principals, only the
// backends the principal sees something of are listed.
func (s *Service) ListBackends(ctx context.Context, req *aggregatorv1.ListBackendsRequest) (*aggregatorv1.ListBackendsResponse, error) {
	snap, _ := s.e.Snapshot()
	var visible map[string]bool
	if c, _ := svcauth.CallerFrom(ctx); req.GetPrincipal() != nil || !c.AssertPrincipals {
		visible = visibleBackends(s.e.View(snap, svcauth.PrincipalFrom(ctx)))
	}
	out := &aggregatorv1.ListBackendsResponse{CatalogVersion: snap.Version}
	for _, b := range s.e.Backends() {
		if visible != nil && !visible[b.Name()] {
			continue
		}
		st := b.Status()
		msg := &aggregatorv1.Backend{
			Name:                  b.Name(),
			Url:                   redactURL(b.URL()),
			Health:                apiHealth[st.State],
			ProtocolVersion:       st.ProtocolVersion,
			ToolCount:             uint32(st.Tools),
			ResourceCount:         uint32(st.Resources),
			ResourceTemplateCount: uint32(st.ResourceTemplates),
			PromptCount:           uint32(st.Prompts),
			LastError:             st.LastError,
		}
		if !st.LastCheck.IsZero() {
			msg.LastCheck = timestamppb.New(st.LastCheck)
		}
		out.Backends = append(out.Backends, msg)
	}
	return out, nil
}

func visibleBackends(v *catalog.View) map[string]bool {
	m := map[string]bool{}
	snap := v.Snapshot
	for _, i := range v.Items(catalog.KindTools) {
		m[snap.Tools[i].Backend] = true
	}
	for _, i := range v.Items(catalog.KindResources) {
		m[snap.Resources[i].Backend] = true
	}
	for _, i := range v.Items(catalog.KindResourceTemplates) {
		m[snap.Templates[i].Backend] = true
	}
	for _, i := range v.Items(catalog.KindPrompts) {
		m[snap.Prompts[i].Backend] = true
	}
	return m
}

// redactURL hides credentials a backend URL may carry (user info, query).
func redactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	u.User = nil
	if u.RawQuery != "" {
		u.RawQuery = "redacted"
	}
	return u.String()
}
