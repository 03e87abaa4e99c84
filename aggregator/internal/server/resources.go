package server

import (
	"bytes"
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
		// client gets its contents under the URI it asked for, and any
		// other page under the backend's own advertised names.
		// Every answer is read: a URI may be escaped in JSON ("ui:\/\/",
		// "\u0075i://"), so no look at its text tells it names no page.
		if named := contentsUnder([]byte(res.JSON), a.b.Name(), call.Name, req.GetUri()); named != nil {
			res.JSON = string(named)
		}
		return &aggregatorv1.ReadResourceResponse{ResultJson: res.JSON, ResultType: resultType(res.ResultType), Backend: a.b.Name()}, nil
	})
}

// contentsUnder is a resources/read result of backend owner whose
// contents name their URIs as clients know them: what the backend gave
// under its own URI orig of the resource asked for is given under asked
// (for a ui:// page, its advertised URI, catalog.UIURI), so a host finds
// the page it asked for; any other ui:// URI becomes its advertised form
// under owner. A backend's answer never names another backend's page,
// which it could otherwise claim by giving that page's advertised URI.
// It is nil for a result that needs no change, or that it cannot read,
// which is passed on as it is (a large blob is not copied).
func contentsUnder(result []byte, owner, orig, asked string) []byte {
	contents, ok := rawjson.Get(result, "contents")
	if !ok {
		return nil
	}
	// Each content as it goes to the client, and whether any changed.
	var parts [][]byte
	changed := false
	if !rawjson.Elements(contents, func(c []byte) bool {
		if u, ok := rawjson.Get(c, "uri"); ok {
			given, _ := rawjson.StringValue(u)
			want := catalog.UIURI(owner, given)
			if given == orig {
				want = asked
			}
			if want != given {
				if out, err := rawjson.WithMember(c, "uri", rawjson.AppendString(nil, want)); err == nil {
					c, changed = out, true
				}
			}
		}
		parts = append(parts, c)
		return true
	}) || !changed {
		return nil
	}
	renamed := append(append([]byte{'['}, bytes.Join(parts, []byte{','})...), ']')
	out, err := rawjson.WithMember(result, "contents", renamed)
	if err != nil {
		return nil
	}
	return out
}
