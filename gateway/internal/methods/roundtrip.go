package methods

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/switchboard-mcp/switchboard/gateway/internal/mcperr"
	"github.com/switchboard-mcp/switchboard/gateway/internal/session"
	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
	"github.com/switchboard-mcp/switchboard/services/rawjson"
)

// Multi-round-trip requests. A Modern backend asks for client input
// (elicitation, sampling, roots) by returning an input_required result.
// Modern clients get that result with its requestState sealed for their
// principal and request, and retry with their answers. Legacy clients
// cannot read it, but they can answer server-to-client requests sent on
// their POST's response stream: the gateway sends the input requests
// there, waits for the answers (separate POSTs of JSON-RPC responses,
// routed by session.Local, and relayed through the indexer by
// session.Shared when they reach another replica) and retries the call
// with them.

// requestStateTTL bounds how long a client may take to answer an
// input_required result.
const requestStateTTL = 10 * time.Minute

// maxInputRounds bounds how often one Legacy request may ask its client for
// input.
const maxInputRounds = 10

// roundTrip holds the members shared by tools/call, resources/read and
// prompts/get: the multi-round-trip retry fields and the request context
// forwarded to the backend.
type roundTrip struct {
	// method, target and arguments name the request: a sealed request
	// state is only valid for the request that produced it (see binding).
	server, method, target string
	arguments              json.RawMessage
	inputResponses         string
	// requestState is the backend's own state, unsealed.
	requestState string
	// stateID is the one-time id of the client's sealed requestState,
	// used up (StateUses.Consume) before the first attempt.
	stateID string
	context *aggregatorv1.RequestContext
	// release ends a call an aggregator holds for input rather than
	// answering it (releaseHeld).
	release bool
}

// binding is the request's session.RequestBinding. It is computed only
// when a state is sealed or opened, never for a plain call.
func (rt roundTrip) binding() string {
	return session.RequestBinding(rt.server, rt.method, rt.target, rt.arguments)
}

// retry reports whether this attempt answers an earlier input_required.
func (rt roundTrip) retry() bool { return rt.inputResponses != "" || rt.requestState != "" }

// roundTripParams reads the retry fields and the request context of a
// call of method on target with arguments (as the client sent them). A
// retry's sealed requestState must belong to this principal and to this
// very request, and is used up here, before the backend sees the retry
// (and given back if a rate limit refuses the retry: roundTrips).
func (s *Server) roundTripParams(ctx context.Context, req *Request, method, target string, arguments json.RawMessage) (roundTrip, *wire.Error) {
	params := req.Params
	rt := roundTrip{server: req.Server, method: method, target: target, arguments: arguments}
	if raw, ok := params["inputResponses"]; ok && string(raw) != "null" {
		answers := true
		rawjson.Each(raw, func(m rawjson.Member) bool { answers = isInputResponse(m.Value); return answers })
		if !wire.IsObjectText(raw) || !answers {
			return rt, wire.InvalidParams("inputResponses must be an object whose members are objects (the answers to the input requests)")
		}
		rt.inputResponses = string(raw)
	}
	if raw, ok := params["requestState"]; ok && string(raw) != "null" {
		var sealed string
		if json.Unmarshal(raw, &sealed) != nil {
			return rt, wire.InvalidParams("requestState must be a string")
		}
		opened, err := s.sealer.OpenState(req.Principal, rt.binding(), sealed)
		if err == nil {
			err = s.uses.Consume(ctx, session.PrincipalDigest(req.Principal), opened.ID, opened.ExpiresAt)
		}
		switch {
		case errors.Is(err, session.ErrUnrecorded):
			return rt, wire.NewError(wire.CodeInternalError, "the requestState cannot be checked right now; retry later")
		case errors.Is(err, session.ErrReplayed):
			req.Trail.Denied = "requestState already used: a replayed retry"
			return rt, wire.InvalidParams("requestState is invalid, expired or already used; call again without it")
		case err != nil:
			// Forged, another principal's, another request's or expired:
			// the seal does not say which. The client starts over.
			req.Trail.Denied = "requestState not sealed for this principal and request: forged, another's, or expired"
			return rt, wire.InvalidParams("requestState is invalid, expired or already used; call again without it")
		}
		rt.requestState, rt.stateID = opened.State, opened.ID
	}
	var rerr *wire.Error
	rt.context, rerr = s.requestContext(req)
	return rt, rerr
}

// isInputResponse reports whether answer (valid JSON) can answer an input
// request: a result, an object. Both eras' answers are held to it, a
// Modern retry's inputResponses and a Legacy client's responses to the
// requests sent on its stream, so that the backend gets the same input
// whichever era its client speaks.
func isInputResponse(answer json.RawMessage) bool { return rawjson.StartsObject(answer) }

// requestContext is what the aggregator forwards of a request to the
// backend: the client's capabilities, its token for backends that act as
// it, its progress token and the log level it wants.
func (s *Server) requestContext(req *Request) (*aggregatorv1.RequestContext, *wire.Error) {
	rc := &aggregatorv1.RequestContext{ClientCapabilitiesJson: string(req.ClientCaps), SubjectToken: req.SubjectToken}
	if tok, ok := req.Meta["progressToken"]; ok && string(tok) != "null" {
		rc.ProgressTokenJson = string(tok)
	}
	switch req.Era {
	case mcpspec.EraModern:
		// Without a log level in _meta a Modern server must not send
		// notifications/message.
		if raw, ok := req.Meta[mcpspec.MetaLogLevel]; ok {
			var level string
			if json.Unmarshal(raw, &level) != nil || !mcpspec.IsLogLevel(level) {
				return nil, wire.InvalidParams(`_meta "` + mcpspec.MetaLogLevel + `" must be an MCP log level`)
			}
			rc.LogLevel = level
		}
	case mcpspec.EraLegacy:
		rc.LogLevel = s.local.LogLevel(req.Session)
	}
	return rc, nil
}

// backendResult is what one attempt of tools/call, resources/read or
// prompts/get answered: a result of resultType, or (a tools/call that
// became one) a task.
type backendResult struct {
	json, resultType string
	task             *aggregatorv1.Task
	// held: an input_required answer of a call an aggregator holds, for
	// heldFor from this answer (0: unknown, an older aggregator's).
	held    bool
	heldFor time.Duration
}

// backendOp performs one attempt of tools/call, resources/read or
// prompts/get with the given round-trip state.
type backendOp func(ctx context.Context, rt roundTrip) (backendResult, error)

// roundTrips runs op and, for Legacy sessions, answers input_required
// results by asking the client, then shapes the final result.
func (s *Server) roundTrips(ctx context.Context, req *Request, resp Responder, rt roundTrip, cacheable bool, op backendOp) (json.RawMessage, *wire.Error) {
	req.Trail.Asked = true
	for round := 0; ; round++ {
		opCtx, cancel := s.serviceCall(ctx)
		out, err := op(opCtx, rt)
		cancel()
		if err != nil {
			rerr := mcperr.FromCallError(ctx, s.log, err, req.Era, req.Method, req.ClientCaps)
			if round == 0 && rt.stateID != "" && rerr.Code == wire.CodeRateLimited {
				// A limit refused the retry before its backend saw it:
				// the client sends it again, with the same requestState,
				// once the limit allows, and that must not be a replay.
				s.uses.Release(ctx, rt.stateID)
			}
			return nil, rerr
		}
		result, resultType := []byte(out.json), out.resultType
		if resultType == "" {
			if raw, ok := wire.Member(result, "resultType"); ok {
				_ = json.Unmarshal(raw, &resultType)
			}
		}
		switch {
		case resultType == "task":
			return s.createdTask(req, out.task)
		case resultType != "input_required":
			return s.shapeBackendResult(req, result, cacheable, rt.retry())
		case req.Era != mcpspec.EraLegacy:
			shaped, rerr := s.inputRequired(req, rt, result)
			if rerr != nil {
				// The client will never retry what it cannot answer.
				s.releaseHeld(ctx, rt, out, op)
			}
			return shaped, rerr
		case round == maxInputRounds:
			s.releaseHeld(ctx, rt, out, op)
			return nil, wire.NewError(wire.CodeInternalError, "the server kept asking the client for input; giving up")
		}
		requests, rerr := inputRequests(result)
		if rerr != nil {
			return nil, rerr
		}
		var holdEnds time.Time
		if out.held && out.heldFor > 0 {
			holdEnds = time.Now().Add(out.heldFor)
		}
		answers, rerr := s.askLegacyClient(ctx, req, resp, requests, holdEnds)
		if rerr != nil {
			// The client cancelled, went away, cannot or did not answer
			// (a hold that ended has nothing left to release).
			if holdEnds.IsZero() || time.Now().Before(holdEnds) {
				s.releaseHeld(ctx, rt, out, op)
			}
			return nil, rerr
		}
		rt.inputResponses = answers
		rt.requestState = ""
		if raw, ok := wire.Member(result, "requestState"); ok {
			_ = json.Unmarshal(raw, &rt.requestState)
		}
	}
}

// releaseHeld ends the call an aggregator holds for input that will not
// come (out is its input_required answer, whose requestState names it),
// so that its backend call is cancelled now rather than when the
// backend's inputWait runs out, and the principal's share of held calls
// is freed. Best effort, after the client's request: the hold ends at
// inputWait anyway. A backend's own state is nothing held: nothing to end.
func (s *Server) releaseHeld(ctx context.Context, rt roundTrip, out backendResult, op backendOp) {
	raw, ok := wire.Member([]byte(out.json), "requestState")
	if !out.held || !ok || json.Unmarshal(raw, &rt.requestState) != nil || rt.requestState == "" {
		return
	}
	rt.inputResponses, rt.release = "", true
	ctx, cancel := s.serviceCall(context.WithoutCancel(ctx))
	defer cancel()
	_, _ = op(ctx, rt)
}

// shapeBackendResult shapes a backend's complete result. A cacheable one
// (resources/read) carries the backend's cache hints lowered to the
// gateway's; a retry's result answers one client's input and is
// immediately stale (ttlMs 0: the spec wants both hints on every complete
// read result, and no retry cached).
func (s *Server) shapeBackendResult(req *Request, result []byte, cacheable, retry bool) (json.RawMessage, *wire.Error) {
	shaping := s.shaping(req, cacheable)
	// Complete by now (a task or input_required went elsewhere): a value
	// of the backend's own that no revision defines is not passed on.
	shaping.FromBackend, shaping.ResultType = true, "complete"
	if retry {
		shaping.TTLms = 0
	}
	out, err := wire.Shape(result, shaping)
	if err != nil {
		return nil, wire.NewError(wire.CodeInternalError, "internal error: malformed result from the server")
	}
	return out, nil
}

// inputRequests reads the inputRequests member of an input_required result
// (see parseInputRequests).
func inputRequests(result []byte) (map[string]inputRequest, *wire.Error) {
	raw, _ := wire.Member(result, "inputRequests")
	return parseInputRequests(raw)
}

// parseInputRequests reads input requests keyed as the backend asked (nil
// or null: none) and checks that every one is a kind of request the spec
// defines.
func parseInputRequests(raw json.RawMessage) (map[string]inputRequest, *wire.Error) {
	var requests map[string]inputRequest
	if len(raw) > 0 && json.Unmarshal(raw, &requests) != nil {
		return nil, wire.NewError(wire.CodeInternalError, "internal error: malformed input requests from the server")
	}
	for _, r := range requests {
		if _, known := mcpspec.InputCapability[r.Method]; !known {
			return nil, wire.NewError(wire.CodeInternalError, "internal error: unsupported input request from the server")
		}
	}
	return requests, nil
}

type inputRequest struct {
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

// missingCapabilities are the client capabilities requests need that
// declared does not declare (mcpspec.InputNeeds: an elicitation's mode, a
// sampling request's tools or context too), as the requiredCapabilities
// of -32021 name them ({"elicitation":{"url":{}}}), and their paths.
func missingCapabilities(requests map[string]inputRequest, declared json.RawMessage) (map[string]any, []string) {
	missing := map[string]any{}
	var paths []string
	for _, r := range requests {
		for _, path := range mcpspec.InputNeeds(r.Method, r.Params) {
			if mcpspec.Declares(declared, path) || slices.Contains(paths, path) {
				continue
			}
			paths = append(paths, path)
			top, sub, _ := strings.Cut(path, ".")
			m, _ := missing[top].(map[string]any)
			if m == nil {
				m = map[string]any{}
				missing[top] = m
			}
			// A form elicitation of a client that declared no elicitation
			// asks for the plain declaration, which means form.
			if sub != "" && (sub != "form" || mcpspec.Declares(declared, top)) {
				m[sub] = struct{}{}
			}
		}
	}
	slices.Sort(paths)
	return missing, paths
}

// inputRequired passes an input_required result to a Modern client that
// declared what it asks for (-32021 otherwise), its requestState sealed
// for this principal and request (see session.Sealer.SealState).
func (s *Server) inputRequired(req *Request, rt roundTrip, result []byte) (json.RawMessage, *wire.Error) {
	requests, rerr := inputRequests(result)
	if rerr != nil {
		return nil, rerr
	}
	if missing, _ := missingCapabilities(requests, req.ClientCaps); len(missing) > 0 {
		e := wire.NewError(wire.CodeMissingCapability, "missing required client capability")
		e.Data = map[string]any{"requiredCapabilities": missing}
		return nil, e
	}
	shaping := s.shaping(req, false)
	shaping.ResultType = "input_required"
	if raw, ok := wire.Member(result, "content"); ok && string(raw) == "null" {
		shaping.Drop = []string{"content"}
	}
	if raw, ok := wire.Member(result, "requestState"); ok {
		var state string
		if json.Unmarshal(raw, &state) != nil {
			return nil, wire.NewError(wire.CodeInternalError, "internal error: malformed request state from the server")
		}
		sealed, err := s.sealer.SealState(req.Principal, rt.binding(), state, requestStateTTL)
		if err != nil {
			return nil, wire.NewError(wire.CodeInternalError, "internal error")
		}
		b, _ := json.Marshal(sealed)
		shaping.Set = map[string]json.RawMessage{"requestState": b}
	}
	out, err := wire.Shape(result, shaping)
	if err != nil {
		return nil, wire.NewError(wire.CodeInternalError, "internal error: malformed result from the server")
	}
	return out, nil
}

// errHoldEnded ends a Legacy client's wait for its answers when the
// aggregator's hold of the call that asked ends.
var errHoldEnded = errors.New("the held call's wait for the answers ended")

// askLegacyClient sends the input requests to the Legacy client on the
// response stream and collects its answers, keyed as the backend asked,
// until holdEnds when an aggregator holds the backend's call for them
// (zero: it holds none).
func (s *Server) askLegacyClient(ctx context.Context, req *Request, resp Responder, requests map[string]inputRequest, holdEnds time.Time) (string, *wire.Error) {
	if len(requests) == 0 {
		// Load shedding: only requestState, retry with it.
		return "", nil
	}
	if _, paths := missingCapabilities(requests, req.ClientCaps); len(paths) > 0 {
		return "", wire.NewError(wire.CodeInternalError, "this request needs the client capability "+strings.Join(paths, " and ")+", which the session did not declare")
	}
	waits := map[string]<-chan json.RawMessage{}
	// The ids name this replica, which waits until the client's time to
	// answer is up, so that an answer reaching another replica is relayed
	// here. The client has timeouts.clientInput to answer, not the request
	// timeout: a person may be typing. A held backend call waits for the
	// answers only until its hold ends (the backend's inputWait), and
	// they would find it gone after that.
	until, cause := time.Now().Add(s.cfg.ClientInput), error(nil)
	if !holdEnds.IsZero() && holdEnds.Before(until) {
		until, cause = holdEnds, errHoldEnded
	}
	for key, r := range requests {
		id, err := s.sealer.SealInputRequestID(req.Session, s.shared.Replica(), until)
		if err != nil {
			return "", wire.NewError(wire.CodeInternalError, "internal error")
		}
		reply, forget := s.local.AwaitReply(req.Session, id)
		defer forget()
		waits[key] = reply
		if resp.Send(wire.Request(id, r.Method, r.Params)) != nil {
			return "", wire.NewError(wire.CodeInternalError, "request cancelled")
		}
	}
	// The stream carries keep-alives meanwhile, so that proxies keep it
	// open and a client that went away is noticed (the write fails, or
	// the request's context ends).
	wait, cancel := context.WithDeadlineCause(ctx, until, cause)
	defer cancel()
	keepAlive := time.NewTicker(s.cfg.KeepAlive)
	defer keepAlive.Stop()
	answers := wire.Object{}
	for key, ch := range waits {
	waiting:
		for {
			select {
			case raw := <-ch:
				var reply wire.Object
				_ = json.Unmarshal(raw, &reply)
				result, ok := reply["result"]
				if !ok {
					return "", wire.NewError(wire.CodeInternalError, "the client did not fulfil the server's "+requests[key].Method+" request")
				}
				if !isInputResponse(result) {
					return "", wire.InvalidParams("the client's answer to the server's " + requests[key].Method + " request must be an object (the request's result)")
				}
				answers[key] = result
				break waiting
			case <-keepAlive.C:
				if resp.Comment("keep-alive") != nil {
					return "", wire.NewError(wire.CodeInternalError, "request cancelled")
				}
				// A session deleted meanwhile will not answer: its wait
				// ends within a keep-alive.
				if s.revoked(req.Session) {
					return "", sessionDeleted()
				}
			case <-wait.Done():
				if errors.Is(context.Cause(wait), errHoldEnded) {
					return "", wire.NewError(wire.CodeInternalError, "no answer from the client to the server's "+requests[key].Method+" request before the server stopped waiting for it; send the request again")
				}
				return "", wire.NewError(wire.CodeInternalError, "no answer from the client to the server's "+requests[key].Method+" request")
			}
		}
	}
	return string(answers.Encode()), nil
}
