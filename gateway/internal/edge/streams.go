package edge

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

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

// maxResourceSubscriptions bounds the URIs one stream subscribes to (the
// aggregator applies the same bound).
const maxResourceSubscriptions = 256

// serveListen serves a Modern subscriptions/listen: it acknowledges exactly
// what this gateway delivers (list_changed of each kind, and of the
// resourceSubscriptions only the URIs the aggregator subscribed: readable
// by the caller and owned by a backend that supports subscribe) and then
// streams those notifications until the client closes the stream.
func (g *Gateway) serveListen(w http.ResponseWriter, c *call, rec *requestRecord) {
	raw, ok := c.params["notifications"]
	var filter subscriptionFilter
	if !ok || json.Unmarshal(raw, &filter) != nil || len(filter.ResourceSubscriptions) > maxResourceSubscriptions {
		g.respond(w, c, rec, nil, newError(codeInvalidParams, "invalid params: missing or invalid 'notifications' field"))
		return
	}
	agreed := subscriptionFilter{
		ToolsListChanged:     filter.ToolsListChanged && c.view == viewRaw,
		PromptsListChanged:   filter.PromptsListChanged,
		ResourcesListChanged: filter.ResourcesListChanged,
	}
	kinds := listKinds{tools: agreed.ToolsListChanged, resources: agreed.ResourcesListChanged, prompts: agreed.PromptsListChanged}
	ctx, cancel := context.WithCancel(c.r.Context())
	defer cancel()
	var watch aggregatorv1.AggregatorService_WatchCatalogClient
	if !kinds.empty() || len(filter.ResourceSubscriptions) > 0 {
		var (
			first *aggregatorv1.WatchCatalogResponse
			err   error
		)
		watch, first, err = g.openWatch(ctx, c.principal, filter.ResourceSubscriptions)
		if err != nil {
			g.respond(w, c, rec, nil, grpcError(ctx, g.log, err, c.era, c.method))
			return
		}
		agreed.ResourceSubscriptions = first.GetSubscribedResourceUris()
		kinds.resourceUpdates = len(agreed.ResourceSubscriptions) > 0
	}
	meta := object{}
	meta[metaSubscriptionID] = c.id
	ackParams := object{}
	ackParams.set("_meta", meta)
	ackParams.set("notifications", agreed)
	ack := sseEvent(notification("notifications/subscriptions/acknowledged", ackParams))
	if kinds.empty() {
		// Nothing to deliver: acknowledge and end gracefully at once.
		res := object{}
		res.set("_meta", meta)
		final := encodeResponse(c.id, g.shape(c, res, false), nil)
		startSSE(w)
		_, _ = w.Write(ack)
		_, _ = w.Write(sseEvent(final))
		rec.outcome = "ok"
		return
	}
	g.pumpCatalog(ctx, w, rec, watch, kinds, "listen", pumpStart{preamble: ack}, c.id)
}

// openWatch opens a WatchCatalog stream for principal, subscribed to
// resourceURIs, and reads its first event, which confirms the subscription
// (the current version, and which of resourceURIs it delivers updates
// for): after it no change can be missed. Cancelling ctx ends the watch.
func (g *Gateway) openWatch(ctx context.Context, principal *commonv1.Principal, resourceURIs []string) (aggregatorv1.AggregatorService_WatchCatalogClient, *aggregatorv1.WatchCatalogResponse, error) {
	watch, err := g.agg.WatchCatalog(ctx, &aggregatorv1.WatchCatalogRequest{Principal: principal, ResourceUris: resourceURIs})
	if err != nil {
		return nil, nil, err
	}
	first, err := watch.Recv()
	if err != nil {
		return nil, nil, err
	}
	return watch, first, nil
}

// pumpStart says how a pumpCatalog begins and when it stops early.
type pumpStart struct {
	// preamble is written first (after the SSE headers unless started).
	preamble []byte
	// started: the SSE response is already under way (a reopened watch).
	started bool
	// restart, when closed, stops the pump so the caller can reopen the
	// watch.
	restart <-chan struct{}
	// version is the catalog version the watch started at.
	version uint64
}

// pumpCatalog turns the events of watch into notifications on an SSE
// response, with keep-alive comments, until the client goes away, the
// gateway shuts down, the aggregator ends the watch (the client then
// reconnects) or start.restart is closed. subscriptionID, when set, tags
// every notification (Modern listen). It reports whether it stopped for a
// restart, and the last catalog version seen.
func (g *Gateway) pumpCatalog(ctx context.Context, w http.ResponseWriter, rec *requestRecord,
	watch aggregatorv1.AggregatorService_WatchCatalogClient, kinds listKinds, metricKind string, start pumpStart, subscriptionID json.RawMessage) (bool, uint64) {
	rec.outcome = "ok"
	g.metrics.streams.WithLabelValues(metricKind).Inc()
	defer g.metrics.streams.WithLabelValues(metricKind).Dec()
	version := start.version
	rc := http.NewResponseController(w)
	if !start.started {
		startSSE(w)
	}
	if _, err := w.Write(start.preamble); err != nil {
		return false, version
	}
	if rc.Flush() != nil {
		return false, version
	}

	events := make(chan *aggregatorv1.WatchCatalogResponse)
	go func() {
		defer close(events)
		for {
			ev, err := watch.Recv()
			if err != nil {
				if ctx.Err() == nil {
					g.log.InfoContext(ctx, "catalog watch ended; closing the notification stream", "err", err)
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
	keepAlive := time.NewTicker(g.keepAlive)
	defer keepAlive.Stop()
	for {
		var out []byte
		select {
		case <-ctx.Done():
			return false, version
		case <-g.closing:
			return false, version
		case <-start.restart:
			return true, version
		case ev, ok := <-events:
			if !ok {
				return false, version
			}
			version = ev.GetCatalogVersion()
			tagged := func() object {
				params := object{}
				if subscriptionID != nil {
					meta := object{}
					meta[metaSubscriptionID] = subscriptionID
					params.set("_meta", meta)
				}
				return params
			}
			for _, method := range changedNotifications(ev, kinds) {
				out = append(out, sseEvent(notification(method, tagged()))...)
			}
			if kinds.resourceUpdates {
				for _, uri := range ev.GetUpdatedResourceUris() {
					params := tagged()
					params.set("uri", uri)
					out = append(out, sseEvent(notification("notifications/resources/updated", params))...)
				}
			}
		case <-keepAlive.C:
			out = []byte(": keep-alive\n\n")
		}
		if len(out) == 0 {
			continue
		}
		if _, err := w.Write(out); err != nil {
			return false, version
		}
		if rc.Flush() != nil {
			return false, version
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

func startSSE(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache, no-transform")
	// Proxies such as nginx must not buffer a notification stream.
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
}

func notification(method string, params object) []byte {
	b, _ := json.Marshal(struct {
		JSONRPC string `json:"jsonrpc"`
		Method  string `json:"method"`
		Params  object `json:"params"`
	}{"2.0", method, params})
	return b
}

func sseEvent(data []byte) []byte {
	out := make([]byte, 0, len(data)+24)
	out = append(out, "event: message\ndata: "...)
	out = append(out, data...)
	return append(out, "\n\n"...)
}
