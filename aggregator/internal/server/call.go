package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/paramheader"
	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
	"github.com/switchboard-mcp/switchboard/services/rawjson"
)

// A tools/call is admitted like every request to a backend (admit.go):
// its own step checks the arguments against the tool's override and the
// Modern client's Mcp-Param-* headers, and builds the backend's params.
// The call is then passed through raw (backend.Client.Call): the client's
// arguments bytes go to the backend untouched and the backend's result
// bytes come back untouched. Only a call a Legacy backend may hold for the
// client's input (elicitation, sampling) goes through go-sdk (route.go,
// backend/held.go).

// maxParamHeaders bounds CallToolRequest.param_headers.
const maxParamHeaders = 64

// CallTool calls a tool on its owning backend under its original name.
func (s *Server) CallTool(ctx context.Context, req *aggregatorv1.CallToolRequest) (*aggregatorv1.CallToolResponse, error) {
	resp, err := s.callTool(ctx, req, nil, false)
	return resp, s.fail(ctx, "CallTool", err)
}

// toolCall is a resolved, checked call.
type toolCall struct {
	b    *backend.Client
	tool *catalog.Item[*aggregatorv1.Tool]
	call backend.Call
	// args are the arguments the backend gets: the client's, with the
	// tool override's fixed and default values in.
	args []byte
	// plain sends the call on the plain route whatever the client could
	// answer: its params carry what go-sdk's calls cannot (a 2025-11-25
	// task request).
	plain bool
}

// maxArgumentsDepth is how deeply a call's arguments may nest: deeper
// than the gateway lets a whole request (512) or code mode builds them,
// as deep as go-sdk backends read.
const maxArgumentsDepth = 1000

// toolCallAdmission is the admission of req; tc receives the call that
// its prepare step builds.
func toolCallAdmission(req *aggregatorv1.CallToolRequest, tc *toolCall, forwarded bool) admission {
	return admission{
		method: config.RateMethodToolsCall, trail: audit.KindToolCall, server: req.GetServer(),
		kind: catalog.KindTools, key: req.GetName(), subjectToken: req.GetContext().GetSubjectToken(),
		args: req.GetArgumentsJson(), accounted: forwarded, ending: req.GetReleaseHeld(), forModel: req.GetForModel(),
		prepare: func(a *admitted) error { return prepareToolCall(req, a, tc) },
	}
}

// prepareToolCall checks the request against the admitted tool and builds
// the backend call into tc.
func prepareToolCall(req *aggregatorv1.CallToolRequest, a *admitted, tc *toolCall) error {
	if req.GetReleaseHeld() && (!strings.HasPrefix(req.GetRequestState(), backend.HeldStatePrefix) || req.GetTask() != nil) {
		// Never a call of its own: only the end of one held.
		return invalidArgument("release_held needs the request_state of a call held for input, and no task")
	}
	it := a.tool
	clientArgs := []byte(req.GetArgumentsJson())
	if err := rawjson.Unique(clientArgs, maxArgumentsDepth); errors.Is(err, rawjson.ErrDuplicateMember) || errors.Is(err, rawjson.ErrTooDeep) {
		// Read two ways (the backend's decoder may keep the first, a
		// retry's binding keeps the last), so read by none; and too deep
		// to be looked through for that.
		return invalidArgument("arguments_json: " + err.Error())
	}
	// Refuses non-objects, and a hidden argument the client set.
	args, err := it.Override.Arguments(clientArgs)
	if err != nil {
		return err
	}
	if it.Override.TaskSupport() == config.TaskSupportRequired && req.GetTask() == nil {
		return errTaskRequired
	}
	if req.GetCheckParamHeaders() {
		if len(req.GetParamHeaders()) > maxParamHeaders {
			return invalidArgument("too many param_headers")
		}
		// The client mirrors what it sent; the backend gets headers for
		// what it receives (below).
		if err := paramheader.Check(it.ParamHeaders, clientArgs, req.GetParamHeaders()); err != nil {
			return err
		}
	}
	caps, err := capabilities(req.GetContext())
	if err != nil {
		return err
	}
	var p backend.ParamsBuilder
	p.String("name", it.Original)
	if len(args) > 0 {
		p.Raw("arguments", args)
	}
	if err := mrtrParams(&p, req.GetInputResponsesJson(), req.GetRequestState()); err != nil {
		return err
	}
	*tc = toolCall{b: a.b, tool: it, args: args, call: backend.Call{Method: "tools/call", Name: it.Original, Params: p.Bytes(), ClientCapabilities: caps}}
	if len(it.ParamHeaders) > 0 {
		tc.call.ParamHeaders = paramheader.Headers(it.ParamHeaders, args)
	}
	return nil
}

// callTool admits req and runs it; stream, if not nil, receives the
// notifications a streamed call relays. forwarded marks a held call's
// retry a peer forwarded (ResumeHeldCall).
func (s *Server) callTool(ctx context.Context, req *aggregatorv1.CallToolRequest, stream *notifier, forwarded bool) (*aggregatorv1.CallToolResponse, error) {
	var tc toolCall
	r := toolCallAdmission(req, &tc, forwarded)
	r.refusal = malformedContext(req.GetContext())
	return serve(ctx, s, r, func(a *admitted) (*aggregatorv1.CallToolResponse, error) {
		switch s.taskRouteOf(a, req, &tc, forwarded) {
		case switchboardTask:
			return s.startTask(ctx, a, req, &tc)
		case backendTask:
			return s.proxyTask(ctx, a, req, &tc)
		}
		if s.tasks != nil && req.GetTask().GetExplicit() && !forwarded {
			// 2025-11-25: a server that keeps tasks answers a task asked
			// of a tool that does not run as one with an error, and does
			// not run it (one that keeps none ignores the request's task).
			return nil, errTaskNotSupported
		}
		return s.runToolCall(a.ctx, req, &tc, stream)
	})
}

// runToolCall runs an admitted call within its tool's timeout, if the
// tool's override sets one: on every route, that timeout bounds the call
// instead of the backend's, longer or shorter.
func (s *Server) runToolCall(ctx context.Context, req *aggregatorv1.CallToolRequest, tc *toolCall, stream *notifier) (*aggregatorv1.CallToolResponse, error) {
	limit := tc.tool.Override.Timeout()
	if limit <= 0 {
		return s.routeToolCall(ctx, req, tc, stream)
	}
	ctx = backend.WithCallTimeout(ctx, limit)
	ctx, cancel := context.WithTimeoutCause(ctx, limit, errToolTimeout)
	defer cancel()
	resp, err := s.routeToolCall(ctx, req, tc, stream)
	if err != nil {
		if d, _ := ctx.Deadline(); time.Until(d) < deadlineSkew {
			// The call ended at the deadline it shares with whoever ended
			// it (a peer ends a forwarded call at its own copy of it, a
			// hair before this replica's timer): let that timer say
			// whether it was the tool's timeout.
			<-ctx.Done()
		}
		if errors.Is(context.Cause(ctx), errToolTimeout) {
			err = fmt.Errorf("%w after %s (the tool's configured timeout)", backend.ErrTimeout, limit)
		}
	}
	return resp, err
}

// deadlineSkew is how close to its deadline a failed call is taken to
// have ended at it.
const deadlineSkew = 50 * time.Millisecond

// errToolTimeout is the cause of a call's context that ran out of its
// tool's configured timeout (a tool override).
var errToolTimeout = errors.New("tool timeout")

// errHeldCallGone answers a retry whose held call is gone, wherever it
// was held.
var errHeldCallGone = invalidArgument("requestState names a call that is no longer held: it ended, its input did not come in time, or the aggregator replica holding it is gone; call again without requestState")

// heldResponse encodes a go-sdk result of the held path, made by b; a
// held call's input_required result is made by the aggregator, so its
// input requests say what it is, and how long b holds it.
func heldResponse(b *backend.Client, res *mcp.CallToolResult, err error) (*aggregatorv1.CallToolResponse, error) {
	if errors.Is(err, backend.ErrHeldCallGone) {
		return nil, errHeldCallGone
	}
	if err != nil {
		return nil, err
	}
	text, err := json.Marshal(res)
	if err != nil {
		return nil, err
	}
	rt := "complete"
	if res.NeedsInput() || len(res.InputRequests) > 0 {
		rt = "input_required"
	}
	resp := &aggregatorv1.CallToolResponse{ResultJson: string(text), IsError: res.IsError, ResultType: rt, Backend: b.Name(),
		Held: rt == "input_required" && strings.HasPrefix(res.RequestState, backend.HeldStatePrefix)}
	if resp.Held {
		resp.HeldForMs = b.InputWait().Milliseconds()
	}
	return resp, nil
}

// sdkParams are the go-sdk params of a call that takes the go-sdk path.
func sdkParams(tc *toolCall, req *aggregatorv1.CallToolRequest) (*mcp.CallToolParams, error) {
	params := &mcp.CallToolParams{Name: tc.tool.Original, RequestState: req.GetRequestState()}
	if len(tc.args) > 0 {
		params.Arguments = json.RawMessage(tc.args)
	}
	if raw := req.GetInputResponsesJson(); raw != "" {
		if err := json.Unmarshal([]byte(raw), &params.InputResponses); err != nil {
			return nil, invalidArgument("input_responses_json is not a valid map of input responses")
		}
	}
	if caps := req.GetContext().GetClientCapabilitiesJson(); caps != "" {
		params.Meta = mcp.Meta{mcp.MetaKeyClientCapabilities: json.RawMessage(caps)}
	}
	return params, nil
}

// askableCapabilities are the client's capabilities when they let a
// backend ask it for input (elicitation or sampling), else nil. A backend
// holding such a call may ask for the client's roots too, when it
// declared them.
func askableCapabilities(rc *aggregatorv1.RequestContext) *mcp.ClientCapabilities {
	raw := rc.GetClientCapabilitiesJson()
	if raw == "" || (!strings.Contains(raw, "elicitation") && !strings.Contains(raw, "sampling")) {
		return nil
	}
	var caps mcp.ClientCapabilities
	if json.Unmarshal([]byte(raw), &caps) != nil || (caps.Elicitation == nil && caps.Sampling == nil) {
		return nil
	}
	// go-sdk reads "roots" into a member that cannot tell whether it was
	// there (its #607); RootsV2 declares roots to the backend, and has the
	// held call ask the client for them. Without listChanged: the
	// client's changes are not passed on to the held session.
	if mcpspec.Declares(json.RawMessage(raw), "roots") {
		caps.RootsV2 = &mcp.RootCapabilities{}
	}
	return &caps
}

// capabilities are the client's declared capabilities, which a Modern
// backend gets in _meta so that it asks only for input the client can
// give. A Legacy backend's shared session declared none at initialize, so
// it cannot send any caller a request the caller did not declare.
func capabilities(rc *aggregatorv1.RequestContext) ([]byte, error) {
	raw := rc.GetClientCapabilitiesJson()
	if raw == "" {
		return nil, nil
	}
	if !isObject([]byte(raw)) {
		return nil, invalidArgument("client_capabilities_json must be a JSON object")
	}
	if err := rawjson.Unique([]byte(raw), maxArgumentsDepth); err != nil {
		// Read two ways (withoutUnsupportedExtensions reads the first
		// member, the backend's decoder the last: a tasks extension
		// would reach it), so read by none, as arguments are. The
		// gateway refuses such requests too; internal clients do not
		// pass through it.
		return nil, invalidArgument("client_capabilities_json: " + err.Error())
	}
	return withoutUnsupportedExtensions([]byte(raw)), nil
}

// unsupportedExtensions are the extensions a client may declare that
// Switchboard does not carry across its hops, so it never declares them
// to a backend on the client's behalf: a backend that answered a tools/call
// with a task (io.modelcontextprotocol/tasks) would hand the client a task
// id no replica could serve tasks/get for.
var unsupportedExtensions = []string{mcpspec.ExtensionTasks}

// withoutUnsupportedExtensions is caps, a client capabilities object,
// without unsupportedExtensions in its extensions member; caps itself when
// it declares none of them.
func withoutUnsupportedExtensions(caps []byte) []byte {
	ext, ok := rawjson.Get(caps, "extensions")
	if !ok || !rawjson.StartsObject(ext) {
		return caps
	}
	found := false
	rawjson.Each(ext, func(m rawjson.Member) bool {
		found = found || slices.Contains(unsupportedExtensions, string(m.Name))
		return !found
	})
	if !found {
		return caps
	}
	out, err := rawjson.MapMembers(caps, func(m rawjson.Member) ([]byte, bool) {
		if string(m.Name) != "extensions" {
			return m.Value, true
		}
		kept, err := rawjson.MapMembers(m.Value, func(e rawjson.Member) ([]byte, bool) {
			return e.Value, !slices.Contains(unsupportedExtensions, string(e.Name))
		})
		if err != nil {
			return m.Value, true
		}
		return kept, true
	})
	if err != nil {
		return caps
	}
	return out
}

// mrtrParams adds a multi-round-trip retry's inputResponses and
// requestState, if any.
func mrtrParams(p *backend.ParamsBuilder, responses, state string) error {
	if responses != "" {
		if !isObject([]byte(responses)) {
			return invalidArgument("input_responses_json is not a valid map of input responses")
		}
		p.Raw("inputResponses", []byte(responses))
	}
	if state != "" {
		p.String("requestState", state)
	}
	return nil
}

// isObject reports whether b is one valid JSON object.
func isObject(b []byte) bool { return rawjson.StartsObject(b) && json.Valid(b) }

// resultType is the API's result type of a backend result's resultType:
// absent (a Legacy backend) or anything else means complete.
func resultType(rt string) string {
	if rt == "input_required" {
		return rt
	}
	return "complete"
}
