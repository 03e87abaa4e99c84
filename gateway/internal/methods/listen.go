package methods

import (
	"context"
	"encoding/json"
	"time"

	"github.com/switchboard-mcp/switchboard/gateway/internal/mcperr"
	"github.com/switchboard-mcp/switchboard/gateway/internal/session"
	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// The notification streams: Modern subscriptions/listen and the Legacy
// session's GET stream, both fed by the aggregator's WatchCatalog.

// listKinds says which notifications a stream delivers: list_changed of
// each kind, and resources/updated for the URIs the watch subscribed.
type listKinds struct {
	tools, resources, prompts bool
	resourceUpdates           bool
}

func (k listKinds) empty() bool {
	return !k.tools && !k.resources && !k.prompts && !k.resourceUpdates
}

// subscriptionFilter is the notifications member of subscriptions/listen.
type subscriptionFilter struct {
	ToolsListChanged      bool     `json:"toolsListChanged,omitempty"`
	PromptsListChanged    bool     `json:"promptsListChanged,omitempty"`
	ResourcesListChanged  bool     `json:"resourcesListChanged,omitempty"`
	ResourceSubscriptions []string `json:"resourceSubscriptions,omitempty"`
}

// listen serves a Modern subscriptions/listen: it acknowledges exactly
// what this gateway delivers (list_changed of each kind, and of the
// resourceSubscriptions only the URIs the aggregator subscribed: readable
// by the caller and owned by a backend that supports subscribe) and then
// streams those notifications until the client closes the stream.
func (s *Server) listen(ctx context.Context, req *Request, resp Responder) (json.RawMessage, *wire.Error) {
	raw, ok := req.Params["notifications"]
	var filter subscriptionFilter
	if !ok || json.Unmarshal(raw, &filter) != nil || len(filter.ResourceSubscriptions) > session.MaxSubscriptions {
		return nil, wire.InvalidParams("missing or invalid 'notifications' field")
	}
	agreed := subscriptionFilter{
		ToolsListChanged:     filter.ToolsListChanged && req.View == ViewRaw,
		PromptsListChanged:   filter.PromptsListChanged,
		ResourcesListChanged: filter.ResourcesListChanged,
	}
	kinds := listKinds{tools: agreed.ToolsListChanged, resources: agreed.ResourcesListChanged, prompts: agreed.PromptsListChanged}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var watch aggregatorv1.AggregatorService_WatchCatalogClient
	if !kinds.empty() || len(filter.ResourceSubscriptions) > 0 {
		var first *aggregatorv1.WatchCatalogResponse
		var err error
		watch, first, err = s.openWatch(ctx, req.Principal, filter.ResourceSubscriptions)
		if err != nil {
			return nil, mcperr.FromError(ctx, s.log, err, req.Era, req.Method)
		}
		agreed.ResourceSubscriptions = first.GetSubscribedResourceUris()
		kinds.resourceUpdates = len(agreed.ResourceSubscriptions) > 0
	}
	meta := wire.Object{mcpspec.MetaSubscriptionID: req.ID}
	ack := wire.Notification("notifications/subscriptions/acknowledged", map[string]any{"_meta": meta, "notifications": agreed})
	if kinds.empty() {
		// Nothing to deliver: acknowledge and end gracefully at once.
		if resp.Send(ack) != nil {
			return nil, nil
		}
		res := wire.Object{}
		res.Set("_meta", meta)
		return s.shape(req, res.Encode(), false)
	}
	// The stream counts as open from its first byte on.
	defer s.streams("listen")()
	if resp.Send(ack) != nil {
		return nil, nil
	}
	s.pump(ctx, resp, watch, kinds, nil, req.ID)
	return nil, nil
}

// SessionStream serves a Legacy session's GET stream: the list_changed
// notifications of the principal's view, and the updates of the resources
// the session subscribed to on this replica. An error is returned only
// before anything was sent.
func (s *Server) SessionStream(ctx context.Context, req *Request, resp Responder) *wire.Error {
	kinds := listKinds{tools: req.View == ViewRaw, resources: true, prompts: true}
	preamble := true
	var version uint64
	// Each change of the session's subscriptions reopens the watch with the
	// new set; the stream itself stays open.
	for started := false; ; started = true {
		uris, changed := s.local.Subscriptions(req.Session, req.SessionExpiry)
		wctx, cancel := context.WithCancel(ctx)
		watch, first, err := s.openWatch(wctx, req.Principal, uris)
		if err != nil {
			cancel()
			if !started {
				return mcperr.FromError(ctx, s.log, err, mcpspec.EraLegacy, "GET")
			}
			return nil
		}
		if preamble {
			// The stream counts as open from its first byte on.
			defer s.streams("legacy_get")()
			if resp.Comment("ok") != nil {
				cancel()
				return nil
			}
			preamble = false
		}
		if started && first.GetCatalogVersion() != version {
			// The catalog changed while the watch was reopened: say so, in
			// case the change was one this view sees.
			for _, method := range changedNotifications(allKinds, kinds) {
				_ = resp.Send(wire.Notification(method, wire.Object{}))
			}
		}
		k := kinds
		k.resourceUpdates = len(first.GetSubscribedResourceUris()) > 0
		var reopen bool
		reopen, version = s.pump(wctx, resp, watch, k, changed, nil)
		cancel()
		if !reopen {
			return nil
		}
	}
}

// allKinds is an event in which every kind changed.
var allKinds = &aggregatorv1.WatchCatalogResponse{Changed: []aggregatorv1.CatalogKind{
	aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS, aggregatorv1.CatalogKind_CATALOG_KIND_RESOURCES, aggregatorv1.CatalogKind_CATALOG_KIND_PROMPTS,
}}

// openWatch opens a WatchCatalog stream for principal, subscribed to
// resourceURIs, and reads its first event, which confirms the subscription
// (the current version, and which of resourceURIs it delivers updates
// for): after it no change can be missed. Cancelling ctx ends the watch.
func (s *Server) openWatch(ctx context.Context, principal *commonv1.Principal, resourceURIs []string) (aggregatorv1.AggregatorService_WatchCatalogClient, *aggregatorv1.WatchCatalogResponse, error) {
	watch, err := s.agg.WatchCatalog(ctx, &aggregatorv1.WatchCatalogRequest{Principal: principal, ResourceUris: resourceURIs})
	if err != nil {
		return nil, nil, err
	}
	first, err := watch.Recv()
	if err != nil {
		return nil, nil, err
	}
	return watch, first, nil
}

// pump turns the events of watch into notifications, with keep-alive
// comments, until the client goes away, the gateway shuts down, the
// aggregator ends the watch (the client then reconnects) or restart is
// closed. subscriptionID, when set, tags every notification (Modern
// listen). It reports whether it stopped for a restart, and the last
// catalog version seen.
func (s *Server) pump(ctx context.Context, resp Responder, watch aggregatorv1.AggregatorService_WatchCatalogClient,
	kinds listKinds, restart <-chan struct{}, subscriptionID json.RawMessage) (bool, uint64) {
	var version uint64
	events := make(chan *aggregatorv1.WatchCatalogResponse)
	go func() {
		defer close(events)
		for {
			ev, err := watch.Recv()
			if err != nil {
				if ctx.Err() == nil {
					s.log.InfoContext(ctx, "catalog watch ended; closing the notification stream", "err", err)
				}
				return
			}
			select {
			case events <- ev:
			case <-ctx.Done():
				return
			}
		}
	}()
	params := func() wire.Object {
		p := wire.Object{}
		if subscriptionID != nil {
			p.Set("_meta", wire.Object{mcpspec.MetaSubscriptionID: subscriptionID})
		}
		return p
	}
	keepAlive := time.NewTicker(s.cfg.KeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case <-ctx.Done():
			return false, version
		case <-s.closing:
			return false, version
		case <-restart:
			return true, version
		case ev, ok := <-events:
			if !ok {
				return false, version
			}
			version = ev.GetCatalogVersion()
			for _, method := range changedNotifications(ev, kinds) {
				if resp.Send(wire.Notification(method, params())) != nil {
					return false, version
				}
			}
			if kinds.resourceUpdates {
				for _, uri := range ev.GetUpdatedResourceUris() {
					p := params()
					p.Set("uri", uri)
					if resp.Send(wire.Notification("notifications/resources/updated", p)) != nil {
						return false, version
					}
				}
			}
		case <-keepAlive.C:
			if resp.Comment("keep-alive") != nil {
				return false, version
			}
		}
	}
}

// changedNotifications lists the list_changed methods an event triggers,
// once each, limited to kinds.
func changedNotifications(ev *aggregatorv1.WatchCatalogResponse, kinds listKinds) []string {
	var tools, resources, prompts bool
	for _, k := range ev.GetChanged() {
		switch k {
		case aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS:
			tools = kinds.tools
		case aggregatorv1.CatalogKind_CATALOG_KIND_RESOURCES, aggregatorv1.CatalogKind_CATALOG_KIND_RESOURCE_TEMPLATES:
			resources = kinds.resources
		case aggregatorv1.CatalogKind_CATALOG_KIND_PROMPTS:
			prompts = kinds.prompts
		}
	}
	var out []string
	if tools {
		out = append(out, "notifications/tools/list_changed")
	}
	if resources {
		out = append(out, "notifications/resources/list_changed")
	}
	if prompts {
		out = append(out, "notifications/prompts/list_changed")
	}
	return out
}
