package server

import (
	"context"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/rawjson"
)

// ReadResource reads a resource from its owning backend, passed through
// raw like tools/call.
func (s *Server) ReadResource(ctx context.Context, req *aggregatorv1.ReadResourceRequest) (*aggregatorv1.ReadResourceResponse, error) {
	resp, err := s.readResource(ctx, req)
	return resp, s.fail(ctx, "ReadResource", err)
}

func (s *Server) readResource(ctx context.Context, req *aggregatorv1.ReadResourceRequest) (*aggregatorv1.ReadResourceResponse, error) {
	// Routed, filtered and authorized in its canonical form: an
	// equivalent spelling is the same resource (route says what the
	// backend is asked for).
	uri := catalog.CanonicalURI(req.GetUri())
	var call backend.Call
	r := admission{
		method: config.RateMethodResourceRead, trail: audit.KindResourceRead, server: req.GetServer(),
		kind: catalog.KindResources, key: uri, subjectToken: req.GetContext().GetSubjectToken(),
		prepare: func(a *admitted) error {
			caps, err := capabilities(req.GetContext())
			if err != nil {
				return err
			}
			var p backend.ParamsBuilder
			own := catalog.BackendURI(a.owner, a.key)
			p.String("uri", own)
			if err := mrtrParams(&p, req.GetInputResponsesJson(), req.GetRequestState()); err != nil {
				return err
			}
			call = backend.Call{Method: "resources/read", Name: own, Params: p.Bytes(), ClientCapabilities: caps}
			return nil
		},
	}
	if uri == "" {
		r.refusal = invalidArgument("uri is required")
	}
	return serve(ctx, s, r, func(a *admitted) (*aggregatorv1.ReadResourceResponse, error) {
		res, err := timed(s, a.b, "resources/read", func() (*backend.Result, error) { return a.b.Call(a.ctx, &call) })
		if err != nil {
			return nil, err
		}
		// call.Name is the URI under the backend's name for it; the
		// client gets its contents under the URI it asked for.
		if orig := call.Name; orig != req.GetUri() {
			res.JSON = string(contentsUnder([]byte(res.JSON), orig, req.GetUri()))
		}
		return &aggregatorv1.ReadResourceResponse{ResultJson: res.JSON, ResultType: resultType(res.ResultType), Backend: a.b.Name()}, nil
	})
}

// contentsUnder is a resources/read result with each of its contents that
// the backend gave under its own URI orig given under the advertised uri
// instead (a ui:// page, catalog.UIURI), so a host finds the page it asked
// for. A result it cannot read is returned as it is.
func contentsUnder(result []byte, orig, uri string) []byte {
	contents, ok := rawjson.Get(result, "contents")
	if !ok {
		return result
	}
	renamed := make([]byte, 0, len(contents)+len(uri))
	renamed = append(renamed, '[')
	n := 0
	if !rawjson.Elements(contents, func(c []byte) bool {
		if u, ok := rawjson.Get(c, "uri"); ok {
			if s, _ := rawjson.StringValue(u); s == orig {
				if out, err := rawjson.WithMember(c, "uri", rawjson.AppendString(nil, uri)); err == nil {
					c = out
				}
			}
		}
		if n > 0 {
			renamed = append(renamed, ',')
		}
		n++
		renamed = append(renamed, c...)
		return true
	}) {
		return result
	}
	out, err := rawjson.WithMember(result, "contents", append(renamed, ']'))
	if err != nil {
		return result
	}
	return out
}
