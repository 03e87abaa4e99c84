package server

import (
	"context"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// Discover summarises the principal's view.
func (s *Server) Discover(ctx context.Context, req *aggregatorv1.DiscoverRequest) (*aggregatorv1.DiscoverResponse, error) {
	snap, _, err := s.e.ServerSnapshot(req.GetServer())
	if err != nil {
		return nil, s.fail(ctx, "Discover", err)
	}
	v := s.e.View(snap, svcauth.PrincipalFrom(ctx))
	resp := &aggregatorv1.DiscoverResponse{
		CatalogVersion:        snap.Version,
		ToolCount:             uint32(v.Len(catalog.KindTools)),
		ResourceCount:         uint32(v.Len(catalog.KindResources)),
		ResourceTemplateCount: uint32(v.Len(catalog.KindResourceTemplates)),
		PromptCount:           uint32(v.Len(catalog.KindPrompts)),
		ToolsDigest:           v.Digest(catalog.KindTools),
		Instructions:          s.e.Instructions(req.GetServer()),
		CodeMode:              s.codeModeIn(req.GetServer()),
	}
	// Capabilities count only for backends the principal sees something of.
	for _, i := range v.Items(catalog.KindResources) {
		resp.ResourcesSubscribe = resp.ResourcesSubscribe || subscribes(snap.Capabilities[snap.Resources[i].Backend])
	}
	for _, i := range v.Items(catalog.KindResourceTemplates) {
		b := snap.Templates[i].Backend
		resp.ResourcesSubscribe = resp.ResourcesSubscribe || subscribes(snap.Capabilities[b])
		resp.Completions = resp.Completions || completes(snap.Capabilities[b])
	}
	for _, i := range v.Items(catalog.KindPrompts) {
		resp.Completions = resp.Completions || completes(snap.Capabilities[snap.Prompts[i].Backend])
	}
	// MCP Apps: the tools and pages of a backend that advertises it.
	apps := false
	for _, i := range v.Items(catalog.KindTools) {
		apps = apps || hasApps(snap.Capabilities[snap.Tools[i].Backend])
	}
	for _, i := range v.Items(catalog.KindResources) {
		apps = apps || hasApps(snap.Capabilities[snap.Resources[i].Backend])
	}
	if apps {
		resp.Extensions = append(resp.Extensions, mcpspec.ExtensionUI)
	}
	return resp, nil
}

func hasApps(c *mcp.ServerCapabilities) bool {
	if c == nil {
		return false
	}
	_, ok := c.Extensions[mcpspec.ExtensionUI]
	return ok
}

func subscribes(c *mcp.ServerCapabilities) bool {
	return c != nil && c.Resources != nil && c.Resources.Subscribe
}

func completes(c *mcp.ServerCapabilities) bool { return c != nil && c.Completions != nil }
