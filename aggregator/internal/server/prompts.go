package server

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/rawjson"
)

// GetPrompt renders a prompt on its owning backend, passed through raw
// like tools/call.
func (s *Server) GetPrompt(ctx context.Context, req *aggregatorv1.GetPromptRequest) (*aggregatorv1.GetPromptResponse, error) {
	resp, err := s.getPrompt(ctx, req)
	return resp, s.fail(ctx, "GetPrompt", err)
}

// maxPromptArguments bounds GetPromptRequest.arguments: a gRPC message
// of 16 MiB could otherwise name millions.
const maxPromptArguments = 256

func (s *Server) getPrompt(ctx context.Context, req *aggregatorv1.GetPromptRequest) (*aggregatorv1.GetPromptResponse, error) {
	var call backend.Call
	r := admission{
		method: config.RateMethodPromptsGet, trail: audit.KindPromptGet, server: req.GetServer(),
		kind: catalog.KindPrompts, key: req.GetName(), subjectToken: req.GetContext().GetSubjectToken(),
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
	if len(req.GetArguments()) > maxPromptArguments {
		r.refusal = invalidArgument(fmt.Sprintf("more than %d prompt arguments", maxPromptArguments))
	} else {
		r.args = s.promptArguments(req.GetArguments())
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
// params reach the backend as the client sent them, but for the
// reference, which is rebuilt from what was admitted: the backend's own
// name for the prompt, or its own URI for the template or resource.
func (s *Server) Complete(ctx context.Context, req *aggregatorv1.CompleteRequest) (*aggregatorv1.CompleteResponse, error) {
	resp, err := s.complete(ctx, req)
	return resp, s.fail(ctx, "Complete", err)
}

func (s *Server) complete(ctx context.Context, req *aggregatorv1.CompleteRequest) (*aggregatorv1.CompleteResponse, error) {
	var params map[string]json.RawMessage
	var ref completionRef
	r := admission{method: config.RateMethodCompletion, trail: audit.KindCompletion, server: req.GetServer(), subjectToken: req.GetSubjectToken()}
	if err := json.Unmarshal([]byte(req.GetParamsJson()), &params); err != nil || params == nil || ref.read(params["ref"]) != nil {
		r.refusal = invalidArgument("params_json must be completion params with a ref (an object naming each member once)")
	}
	delete(params, "_meta")
	switch ref.Type {
	case "ref/prompt":
		r.kind, r.key = catalog.KindPrompts, ref.Name
		r.prepare = func(a *admitted) error {
			params["ref"] = completionRef{Type: ref.Type, Name: a.prompt.Original}.encode()
			return nil
		}
	case "ref/resource":
		// A reference names a template by its URI template, or a resource.
		r.kind, r.key = catalog.KindResources, ref.URI
		if snap, _, err := s.e.ServerSnapshot(req.GetServer()); err == nil {
			if _, ok := snap.Template(ref.URI); ok {
				r.kind = catalog.KindResourceTemplates
			}
		}
		// The backend is asked about the template or resource admitted
		// (route), under its own name for it.
		r.prepare = func(a *admitted) error {
			params["ref"] = completionRef{Type: ref.Type, URI: catalog.BackendURI(a.owner, a.key)}.encode()
			return nil
		}
	default:
		if r.refusal == nil {
			r.refusal = invalidArgument("ref.type must be ref/prompt or ref/resource")
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

// completionRef is a completion's reference: a prompt's name or a
// template's (or resource's) URI.
type completionRef struct {
	Type string `json:"type"`
	Name string `json:"name,omitempty"`
	URI  string `json:"uri,omitempty"`
}

// read decodes raw as a go-sdk server would, member names matching case
// sensitively ("Uri" is not "uri"), and refuses a reference naming a
// member twice: what the admission reads is what the reference says to
// every reader.
func (ref *completionRef) read(raw json.RawMessage) error {
	if err := rawjson.Unique(raw, maxRefDepth); err != nil {
		return err
	}
	return backend.DecodeAsSDK(raw, ref)
}

func (ref completionRef) encode() json.RawMessage {
	b, _ := json.Marshal(ref)
	return b
}

// maxRefDepth bounds the nesting a reference may carry in members it
// does not need (its own are strings).
const maxRefDepth = 8
