package server

import (
	"context"
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/engine"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// GetPrompt renders a prompt on its owning backend.
func (s *Server) GetPrompt(ctx context.Context, req *aggregatorv1.GetPromptRequest) (*aggregatorv1.GetPromptResponse, error) {
	resp, err := s.getPrompt(ctx, req)
	return resp, s.fail(ctx, "GetPrompt", err)
}

func (s *Server) getPrompt(ctx context.Context, req *aggregatorv1.GetPromptRequest) (*aggregatorv1.GetPromptResponse, error) {
	snap, _ := s.e.Snapshot()
	it, found := snap.Prompt(req.GetName())
	var bname string
	if found {
		bname = it.Backend
	}
	b, err := s.e.Owner(snap, svcauth.PrincipalFrom(ctx), catalog.KindPrompts, req.GetName(), bname, found)
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
func (s *Server) Complete(ctx context.Context, req *aggregatorv1.CompleteRequest) (*aggregatorv1.CompleteResponse, error) {
	resp, err := s.complete(ctx, req)
	return resp, s.fail(ctx, "Complete", err)
}

func (s *Server) complete(ctx context.Context, req *aggregatorv1.CompleteRequest) (*aggregatorv1.CompleteResponse, error) {
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
		if b, err = s.e.Owner(snap, svcauth.PrincipalFrom(ctx), catalog.KindPrompts, name, bname, found); err == nil {
			params.Ref.Name = it.Original
		}
	case "ref/resource":
		uri := params.Ref.URI
		if t, ok := snap.Template(uri); ok {
			b, err = s.e.Owner(snap, svcauth.PrincipalFrom(ctx), catalog.KindResourceTemplates, uri, t.Backend, true)
		} else if r, ok := snap.Resource(uri); ok {
			b, err = s.e.Owner(snap, svcauth.PrincipalFrom(ctx), catalog.KindResources, uri, r.Backend, true)
		} else {
			err = engine.ErrNotFound
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
