package server

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// The four list RPCs are one code path, page, over the four kinds; each
// RPC only names its kind, where the kind's items live in a snapshot, and
// how its response is assembled.

// page serves one page of kind k of the caller's view: the prebuilt API
// messages of the page (msg: as the view shows them), the next cursor (empty on the last page) and the
// view the page was cut from (its snapshot's version, its digests).
func page[M proto.Message](s *Server, ctx context.Context, k catalog.Kind, msg func(v *catalog.View, i int32) M, server, cursor string, size uint32) ([]M, string, *catalog.View, error) {
	snap, _, err := s.e.ServerSnapshot(server)
	if err != nil {
		return nil, "", nil, s.fail(ctx, "List"+k.API(), err)
	}
	v := s.e.View(snap, svcauth.PrincipalFrom(ctx))
	n, maxSize := s.e.PageSizes()
	if size > 0 {
		n = int(min(size, uint32(maxSize)))
	}
	visible := v.Items(k)
	key := func(i int) string { return v.Key(k, i) }
	start, end, next, err := catalog.Page(k, len(visible), key, cursor, n)
	if err != nil {
		return nil, "", nil, s.fail(ctx, "List"+k.API(), err)
	}
	if fit := fitBytes(visible[start:end], func(i int32) M { return msg(v, i) }); fit < end-start {
		// The same cursor with a page size that fits makes the shorter
		// page and its own next cursor.
		start, end, next, _ = catalog.Page(k, len(visible), key, cursor, fit)
	}
	out := make([]M, end-start)
	for j, i := range visible[start:end] {
		out[j] = msg(v, i)
	}
	return out, next, v, nil
}

// maxPageBytes bounds the encoded items of one list page. A page is cut
// by count (aggregator.pageSize) and then by bytes: a backend's listing
// may hold items of megabytes each (a message from a backend may be of
// 32 MiB), and a page of them would be one gRPC message past what the
// gateway and the indexer receive (64 MiB), failing every principal's
// list, other backends' items included.
const maxPageBytes = 16 << 20

// fitBytes is how many of items, from the first, fit maxPageBytes
// together; at least one.
func fitBytes[M proto.Message](items []int32, msg func(int32) M) int {
	total := 0
	for j, i := range items {
		if total += proto.Size(msg(i)); total > maxPageBytes {
			return max(j, 1)
		}
	}
	return len(items)
}

// ListTools serves one page of tools.
func (s *Server) ListTools(ctx context.Context, req *aggregatorv1.ListToolsRequest) (*aggregatorv1.ListToolsResponse, error) {
	items, next, view, err := page(s, ctx, catalog.KindTools, (*catalog.View).Tool, req.GetServer(), req.GetCursor(), req.GetPageSize())
	if err != nil {
		return nil, err
	}
	return &aggregatorv1.ListToolsResponse{Tools: items, NextCursor: next, CatalogVersion: view.Snapshot.Version,
		ToolsDigest: view.Digest(catalog.KindTools)}, nil
}

// ListResources serves one page of resources.
func (s *Server) ListResources(ctx context.Context, req *aggregatorv1.ListResourcesRequest) (*aggregatorv1.ListResourcesResponse, error) {
	items, next, view, err := page(s, ctx, catalog.KindResources, func(v *catalog.View, i int32) *aggregatorv1.Resource { return v.Snapshot.Resources[i].Msg }, req.GetServer(), req.GetCursor(), req.GetPageSize())
	if err != nil {
		return nil, err
	}
	return &aggregatorv1.ListResourcesResponse{Resources: items, NextCursor: next, CatalogVersion: view.Snapshot.Version}, nil
}

// ListResourceTemplates serves one page of resource templates.
func (s *Server) ListResourceTemplates(ctx context.Context, req *aggregatorv1.ListResourceTemplatesRequest) (*aggregatorv1.ListResourceTemplatesResponse, error) {
	items, next, view, err := page(s, ctx, catalog.KindResourceTemplates, func(v *catalog.View, i int32) *aggregatorv1.ResourceTemplate { return v.Snapshot.Templates[i].Msg }, req.GetServer(), req.GetCursor(), req.GetPageSize())
	if err != nil {
		return nil, err
	}
	return &aggregatorv1.ListResourceTemplatesResponse{ResourceTemplates: items, NextCursor: next, CatalogVersion: view.Snapshot.Version}, nil
}

// ListPrompts serves one page of prompts.
func (s *Server) ListPrompts(ctx context.Context, req *aggregatorv1.ListPromptsRequest) (*aggregatorv1.ListPromptsResponse, error) {
	items, next, view, err := page(s, ctx, catalog.KindPrompts, func(v *catalog.View, i int32) *aggregatorv1.Prompt { return v.Snapshot.Prompts[i].Msg }, req.GetServer(), req.GetCursor(), req.GetPageSize())
	if err != nil {
		return nil, err
	}
	return &aggregatorv1.ListPromptsResponse{Prompts: items, NextCursor: next, CatalogVersion: view.Snapshot.Version}, nil
}
