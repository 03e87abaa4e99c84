package console

import (
	"cmp"
	"context"
	"html/template"
	"net/http"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

var errUnknownKind = status.Error(codes.InvalidArgument, "no such list: want tools, resources, templates or prompts")

// catalogPageSize is the items shown per page.
const catalogPageSize = 50

// maxCursorBytes is the aggregator's bound on a cursor.
const maxCursorBytes = 512

// catalogKinds are the lists the catalog page can show, in tab order.
var catalogKinds = []struct{ Key, Label string }{
	{"tools", "Tools"}, {"resources", "Resources"}, {"templates", "Resource templates"}, {"prompts", "Prompts"},
}

// catalogItem is one row, whatever the kind.
type catalogItem struct {
	// Name is the advertised name, or the URI (template) of a resource.
	// Title is the item's title; a resource's is its name when it has
	// none (MCP's display name), which its row would not show otherwise.
	Name, Title, Description, Backend, Original string
}

// catalogTab is one kind's tab, keeping the view.
type catalogTab struct {
	Key, Label string
	URL        template.URL
}

type catalogData struct {
	View  viewAs
	Kind  string
	Kinds []catalogTab
	// Counts are the principal's view (Discover).
	Counts *aggregatorv1.DiscoverResponse
	Items  []catalogItem
	// Next is the query of the next page; empty on the last.
	Next, First template.URL
	Paged       bool
}

// catalogPage lists one kind of the catalog of a server as a principal
// sees it: the aggregator's list RPCs with that principal asserted.
func (c *Console) catalogPage(w http.ResponseWriter, r *http.Request, s session) {
	q := r.URL.Query()
	p := page{Title: "Catalog", Active: "catalog", Session: &s}
	v, err := c.readViewAs(q)
	d := catalogData{View: v, Kind: q.Get("kind")}
	for _, k := range catalogKinds {
		tq := v.query()
		tq.Set("kind", k.Key)
		// Typed as a URL: built here from escaped parts.
		d.Kinds = append(d.Kinds, catalogTab{Key: k.Key, Label: k.Label, URL: template.URL("/console/catalog?" + tq.Encode())})
	}
	p.Data = &d
	if err != nil {
		p.Error = err.Error()
		c.render(w, r, http.StatusBadRequest, "catalog", p)
		return
	}
	if d.Kind == "" {
		d.Kind = "tools"
	}
	cursor := q.Get("cursor")
	if len(cursor) > maxCursorBytes {
		p.Error = "the page cursor is too long"
		c.render(w, r, http.StatusBadRequest, "catalog", p)
		return
	}
	d.Paged = cursor != ""
	ctx, cancel := rpcContext(r)
	defer cancel()
	principal := v.Principal()
	c.deps.Log.Info("console: catalog viewed as", "operator", s.Operator, "subject", principal.GetSubject(), "groups", principal.GetGroups(), "server", v.Path(), "kind", d.Kind)
	if d.Counts, err = c.deps.Aggregator.Discover(ctx, &aggregatorv1.DiscoverRequest{Principal: principal, Server: v.Server}); err != nil {
		c.renderFailure(w, r, "catalog", p, "Discover", err)
		return
	}
	items, next, err := c.listKind(ctx, d.Kind, principal, v.Server, cursor)
	if err != nil {
		c.renderFailure(w, r, "catalog", p, "List "+d.Kind, err)
		return
	}
	d.Items = items
	base := v.query()
	base.Set("kind", d.Kind)
	// Typed as URLs: built here from escaped parts, so the template must
	// not escape them again.
	d.First = template.URL("/console/catalog?" + base.Encode())
	if next != "" {
		base.Set("cursor", next)
		d.Next = template.URL("/console/catalog?" + base.Encode())
	}
	c.render(w, r, http.StatusOK, "catalog", p)
}

// listKind fetches one page of one kind.
func (c *Console) listKind(ctx context.Context, kind string, p *commonv1.Principal, server, cursor string) ([]catalogItem, string, error) {
	var items []catalogItem
	switch kind {
	case "tools":
		resp, err := c.deps.Aggregator.ListTools(ctx, &aggregatorv1.ListToolsRequest{Principal: p, Server: server, Cursor: cursor, PageSize: catalogPageSize})
		if err != nil {
			return nil, "", err
		}
		for _, t := range resp.GetTools() {
			items = append(items, catalogItem{Name: t.GetName(), Title: t.GetTitle(), Description: t.GetDescription(), Backend: t.GetBackend(), Original: t.GetOriginalName()})
		}
		return items, resp.GetNextCursor(), nil
	case "resources":
		resp, err := c.deps.Aggregator.ListResources(ctx, &aggregatorv1.ListResourcesRequest{Principal: p, Server: server, Cursor: cursor, PageSize: catalogPageSize})
		if err != nil {
			return nil, "", err
		}
		for _, t := range resp.GetResources() {
			items = append(items, catalogItem{Name: t.GetUri(), Title: cmp.Or(t.GetTitle(), t.GetName()), Description: t.GetDescription(), Backend: t.GetBackend()})
		}
		return items, resp.GetNextCursor(), nil
	case "templates":
		resp, err := c.deps.Aggregator.ListResourceTemplates(ctx, &aggregatorv1.ListResourceTemplatesRequest{Principal: p, Server: server, Cursor: cursor, PageSize: catalogPageSize})
		if err != nil {
			return nil, "", err
		}
		for _, t := range resp.GetResourceTemplates() {
			items = append(items, catalogItem{Name: t.GetUriTemplate(), Title: cmp.Or(t.GetTitle(), t.GetName()), Description: t.GetDescription(), Backend: t.GetBackend()})
		}
		return items, resp.GetNextCursor(), nil
	case "prompts":
		resp, err := c.deps.Aggregator.ListPrompts(ctx, &aggregatorv1.ListPromptsRequest{Principal: p, Server: server, Cursor: cursor, PageSize: catalogPageSize})
		if err != nil {
			return nil, "", err
		}
		for _, t := range resp.GetPrompts() {
			items = append(items, catalogItem{Name: t.GetName(), Title: t.GetTitle(), Description: t.GetDescription(), Backend: t.GetBackend(), Original: t.GetOriginalName()})
		}
		return items, resp.GetNextCursor(), nil
	}
	return nil, "", errUnknownKind
}
