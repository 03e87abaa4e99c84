package server

import (
	"context"
	"encoding/json"
	"time"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/engine"
	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// GetPrompt renders a prompt on its owning backend, passed through raw
// like tools/call.
func (s *Server) GetPrompt(ctx context.Context, req *aggregatorv1.GetPromptRequest) (*aggregatorv1.GetPromptResponse, error) {
	start := time.Now()
	resp, err := s.getPrompt(ctx, req)
	s.auditCall(ctx, audit.KindPromptGet, start, req.GetServer(), req.GetName(), s.promptArguments(req.GetArguments()), resp.GetBackend(), false, err)
	return resp, s.fail(ctx, "GetPrompt", err)
}

func (s *Server) getPrompt(ctx context.Context, req *aggregatorv1.GetPromptRequest) (*aggregatorv1.GetPromptResponse, error) {
	snap, _, err := s.e.ServerSnapshot(req.GetServer())
	if err != nil {
		return nil, err
	}
	it, _ := snap.Prompt(req.GetName())
	b, err := s.e.Owner(snap, svcauth.PrincipalFrom(ctx), catalog.KindPrompts, req.GetName(), it.Owner())
	if err != nil {
		return nil, err
	}
	if ctx, err = b.WithCaller(ctx, svcauth.PrincipalFrom(ctx).GetSubject(), req.GetContext().GetSubjectToken()); err != nil {
		return nil, err
	}
	if err := s.limit(ctx, config.RateMethodPromptsGet, req.GetServer(), "", b); err != nil {
		return nil, err
	}
	caps, err := capabilities(req.GetContext())
	if err != nil {
		return nil, err
	}
	var p backend.ParamsBuilder
	p.String("name", it.Original)
	if args := req.GetArguments(); len(args) > 0 {
		raw, err := json.Marshal(args)
		if err != nil {
			return nil, err
		}
		p.Raw("arguments", raw)
	}
	if err := mrtrParams(&p, req.GetInputResponsesJson(), req.GetRequestState()); err != nil {
		return nil, err
	}
	call := &backend.Call{Method: "prompts/get", Name: it.Original, Params: p.Bytes(), ClientCapabilities: caps}
	res, err := timed(s, b, "prompts/get", func() (*backend.Result, error) { return b.Call(ctx, call) })
	if err != nil {
		return nil, err
	}
	return &aggregatorv1.GetPromptResponse{ResultJson: res.JSON, ResultType: resultType(res.ResultType), Backend: b.Name()}, nil
}

// Complete routes a completion request by its reference: a prompt by
// advertised name, or a resource template (or resource) by URI. The
// params reach the backend as the client sent them, except for a prompt
// reference's name, which becomes the backend's own.
func (s *Server) Complete(ctx context.Context, req *aggregatorv1.CompleteRequest) (*aggregatorv1.CompleteResponse, error) {
	resp, err := s.complete(ctx, req)
	return resp, s.fail(ctx, "Complete", err)
}

func (s *Server) complete(ctx context.Context, req *aggregatorv1.CompleteRequest) (*aggregatorv1.CompleteResponse, error) {
	var params map[string]json.RawMessage
	var ref struct {
		Type string `json:"type"`
		Name string `json:"name"`
		URI  string `json:"uri"`
	}
	if err := json.Unmarshal([]byte(req.GetParamsJson()), &params); err != nil || params == nil || json.Unmarshal(params["ref"], &ref) != nil {
		return nil, invalidArgument("params_json must be completion params with a ref")
	}
	delete(params, "_meta")
	snap, _, err := s.e.ServerSnapshot(req.GetServer())
	if err != nil {
		return nil, err
	}
	principal := svcauth.PrincipalFrom(ctx)
	var b *backend.Client
	switch ref.Type {
	case "ref/prompt":
		it, _ := snap.Prompt(ref.Name)
		if b, err = s.e.Owner(snap, principal, catalog.KindPrompts, ref.Name, it.Owner()); err == nil {
			params["ref"], err = renamedRef(params["ref"], it.Original)
		}
	case "ref/resource":
		if t, ok := snap.Template(ref.URI); ok {
			b, err = s.e.Owner(snap, principal, catalog.KindResourceTemplates, ref.URI, t.Backend)
		} else if r, ok := snap.Resource(ref.URI); ok {
			b, err = s.e.Owner(snap, principal, catalog.KindResources, ref.URI, r.Backend)
		} else {
			err = engine.ErrNotFound
		}
	default:
		return nil, invalidArgument("ref.type must be ref/prompt or ref/resource")
	}
	if err != nil {
		return nil, err
	}
	if ctx, err = b.WithCaller(ctx, principal.GetSubject(), req.GetSubjectToken()); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(params)
	if err != nil {
		return nil, err
	}
	call := &backend.Call{Method: "completion/complete", Params: raw}
	res, err := timed(s, b, "completion/complete", func() (*backend.Result, error) { return b.Call(ctx, call) })
	if err != nil {
		return nil, err
	}
	return &aggregatorv1.CompleteResponse{ResultJson: res.JSON}, nil
}

// renamedRef is a prompt reference with its name replaced, other members
// kept.
func renamedRef(raw json.RawMessage, name string) (json.RawMessage, error) {
	var ref map[string]json.RawMessage
	if err := json.Unmarshal(raw, &ref); err != nil {
		return nil, invalidArgument("params_json must be completion params with a ref")
	}
	ref["name"], _ = json.Marshal(name)
	return json.Marshal(ref)
}
