package server

import (
	"context"
	"encoding/json"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
)

// GetPrompt renders a prompt on its owning backend, passed through raw
// like tools/call.
func (s *Server) GetPrompt(ctx context.Context, req *aggregatorv1.GetPromptRequest) (*aggregatorv1.GetPromptResponse, error) {
	resp, err := s.getPrompt(ctx, req)
	return resp, s.fail(ctx, "GetPrompt", err)
}

func (s *Server) getPrompt(ctx context.Context, req *aggregatorv1.GetPromptRequest) (*aggregatorv1.GetPromptResponse, error) {
	var call backend.Call
	r := admission{
		method: config.RateMethodPromptsGet, trail: audit.KindPromptGet, server: req.GetServer(),
		kind: catalog.KindPrompts, key: req.GetName(), subjectToken: req.GetContext().GetSubjectToken(),
		args: s.promptArguments(req.GetArguments()),
		prepare: func(a *admitted) error {
			caps, err := capabilities(req.GetContext())
			if err != nil {
				return err
			}
			var p backend.ParamsBuilder
			p.String("name", a.prompt.Original)
			if args := req.GetArguments(); len(args) > 0 {
				raw, err := json.Marshal(args)
				if err != nil {
					return err
				}
				p.Raw("arguments", raw)
			}
			if err := mrtrParams(&p, req.GetInputResponsesJson(), req.GetRequestState()); err != nil {
				return err
			}
			call = backend.Call{Method: "prompts/get", Name: a.prompt.Original, Params: p.Bytes(), ClientCapabilities: caps}
			return nil
		},
	}
	return serve(ctx, s, r, func(a *admitted) (*aggregatorv1.GetPromptResponse, error) {
		res, err := timed(s, a.b, "prompts/get", func() (*backend.Result, error) { return a.b.Call(a.ctx, &call) })
		if err != nil {
			return nil, err
		}
		return &aggregatorv1.GetPromptResponse{ResultJson: res.JSON, ResultType: resultType(res.ResultType), Backend: a.b.Name()}, nil
	})
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
	r := admission{method: config.RateMethodCompletion, trail: audit.KindCompletion, server: req.GetServer(), subjectToken: req.GetSubjectToken()}
	if err := json.Unmarshal([]byte(req.GetParamsJson()), &params); err != nil || params == nil || json.Unmarshal(params["ref"], &ref) != nil {
		r.malformed = invalidArgument("params_json must be completion params with a ref")
	}
	delete(params, "_meta")
	switch ref.Type {
	case "ref/prompt":
		r.kind, r.key = catalog.KindPrompts, ref.Name
		r.prepare = func(a *admitted) (err error) {
			params["ref"], err = withRefMember(params["ref"], "name", a.prompt.Original)
			return err
		}
	case "ref/resource":
		// A reference names a template by its URI template, or a resource.
		r.kind, r.key = catalog.KindResources, ref.URI
		if snap, _, err := s.e.ServerSnapshot(req.GetServer()); err == nil {
			if _, ok := snap.Template(ref.URI); ok {
				r.kind = catalog.KindResourceTemplates
			}
		}
		if r.kind == catalog.KindResources {
			// The backend is asked about the resource admitted (route),
			// under its own name for it.
			r.prepare = func(a *admitted) (err error) {
				params["ref"], err = withRefMember(params["ref"], "uri", catalog.BackendURI(a.owner, a.key))
				return err
			}
		}
	default:
		if r.malformed == nil {
			r.malformed = invalidArgument("ref.type must be ref/prompt or ref/resource")
		}
	}
	return serve(ctx, s, r, func(a *admitted) (*aggregatorv1.CompleteResponse, error) {
		raw, err := json.Marshal(params)
		if err != nil {
			return nil, err
		}
		call := &backend.Call{Method: "completion/complete", Params: raw}
		res, err := timed(s, a.b, "completion/complete", func() (*backend.Result, error) { return a.b.Call(a.ctx, call) })
		if err != nil {
			return nil, err
		}
		return &aggregatorv1.CompleteResponse{ResultJson: res.JSON}, nil
	})
}

// withRefMember is a completion reference with its member (a prompt's
// name, a resource's uri) set to value, other members kept.
func withRefMember(raw json.RawMessage, member, value string) (json.RawMessage, error) {
	var ref map[string]json.RawMessage
	if err := json.Unmarshal(raw, &ref); err != nil {
		return nil, invalidArgument("params_json must be completion params with a ref")
	}
	ref[member], _ = json.Marshal(value)
	return json.Marshal(ref)
}
