package scope

import (
	"context"
	"crypto/sha256"
	"encoding/hex"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
	"github.com/switchboard-mcp/switchboard/services/rawjson"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// listedView is one principal's tools as listed page by page, and the
// view they all came from.
type listedView struct {
	tools   []store.Tool
	version uint64
	digest  string
}

// listTools pages through the principal's tools. Every page must come from
// one view: the same catalog version and tools digest as the first page
// (consecutive pages may be served by different aggregator replicas), and,
// from an aggregator that reports no tools digest, the version Discover
// reported, so that the scope stored under Discover's digest holds exactly
// that view. A page of another view is errViewMoved, and the listing starts
// over from the first page (Resolve bounds how often).
func (r *Resolver) listTools(ctx context.Context, agg aggregatorv1.AggregatorServiceClient, p *commonv1.Principal, server string, disc *aggregatorv1.DiscoverResponse) (*listedView, error) {
	var view listedView
	cursor := ""
	for first := true; ; first = false {
		page, err := agg.ListTools(ctx, &aggregatorv1.ListToolsRequest{Principal: p, Server: server, Cursor: cursor, PageSize: listPageSize})
		if err != nil {
			return nil, &AggregatorError{Op: "list tools", Err: err}
		}
		if first {
			view.version, view.digest = page.GetCatalogVersion(), page.GetToolsDigest()
			if view.digest == "" {
				if view.version != disc.GetCatalogVersion() {
					return nil, errViewMoved
				}
				view.digest = disc.GetToolsDigest()
			}
		} else if page.GetCatalogVersion() != view.version || (page.GetToolsDigest() != "" && page.GetToolsDigest() != view.digest) {
			return nil, errViewMoved
		}
		for _, t := range page.GetTools() {
			if !mcpspec.ModelVisible([]byte(t.GetDefinitionJson())) {
				// A tool of its app alone: find_tool's answers are the
				// model's, with no host between to keep it out.
				continue
			}
			view.tools = append(view.tools, store.Tool{
				Name:             t.GetName(),
				OriginalName:     t.GetOriginalName(),
				Description:      t.GetDescription(),
				InputSchemaJSON:  t.GetInputSchemaJson(),
				DefinitionJSON:   t.GetDefinitionJson(),
				MetaJSON:         metaOf(t.GetDefinitionJson()),
				Title:            t.GetTitle(),
				AnnotationsJSON:  t.GetAnnotationsJson(),
				OutputSchemaJSON: t.GetOutputSchemaJson(),
			})
		}
		cursor = page.GetNextCursor()
		if cursor == "" {
			break
		}
	}
	if view.digest == "" {
		view.digest = viewDigest(view.tools)
	}
	return &view, nil
}

// viewDigest is a digest of a listed view.
func viewDigest(tools []store.Tool) string {
	h := sha256.New()
	for _, t := range tools {
		for _, part := range []string{t.Name, t.Description, t.InputSchemaJSON} {
			h.Write([]byte(part))
			h.Write([]byte{0})
		}
	}
	return "listed:" + hex.EncodeToString(h.Sum(nil))
}

// metaOf is the _meta object of a tool definition, "" for none (or one
// that is not an object).
func metaOf(def string) string {
	meta, ok := rawjson.Get([]byte(def), "_meta")
	if !ok || !rawjson.StartsObject(meta) {
		return ""
	}
	return string(meta)
}
