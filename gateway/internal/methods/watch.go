package methods

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// The aggregator's catalog watch under a notification stream (listen.go).
//
// A stream outlives the aggregator's watch under it: when the aggregator
// ends the watch (a restart, a lost connection), the stream stays open
// with its keep-alives and the watch is reopened with back-off; once it is
// back, list_changed of every kind the stream delivers is sent, because
// changes made while it was down were not seen by this stream, unless the
// reopened watch reports the catalog version last seen. (Catalog versions
// are content-derived and compared for equality only: the same version is
// the same catalog.) Ending the
// stream instead would lose the client's notifications for good where the
// client does not listen again (go-sdk v1.8.0 clients do not). A Modern
// listen whose acknowledged resourceSubscriptions cannot all be subscribed
// again ends with its final result, so that a client that listens again
// gets an acknowledgement of what is delivered now.

// Back-off of a watch being reopened.
const (
	reopenFirst = 100 * time.Millisecond
	reopenMax   = 5 * time.Second
	// firstEventWait bounds the wait for a watch's first event, so a hung
	// aggregator cannot hold a reopening stream forever.
	firstEventWait = 10 * time.Second
)

// missedWhileReopening is the event a stream gets after its watch was
// reopened: nothing when the reopened watch reports the catalog version
// last seen (versions are content-derived: the catalog is the same) and
// the same tools digest (a policy reload changes views, not versions), and
// otherwise every kind may have changed meanwhile, except the tools when
// the caller's tools digest is the same before and after. Telling a client
// of a change that did not happen is harmless to the protocol but not to
// clients: go-sdk v1.8.0's client caches lists, and a listing it started
// on a spurious notice can be cached after the next, real one cleared
// the cache, hiding the change until the cache expires.
func missedWhileReopening(before, after *catalogWatch) *aggregatorv1.WatchCatalogResponse {
	// The same version with another digest is a new Cedar policy: the
	// catalog is the same, the caller's view of it is not.
	if before.versionSeen && before.version == after.first.GetCatalogVersion() && sameView(before, after.first) {
		return &aggregatorv1.WatchCatalogResponse{}
	}
	if before.toolsDigest != "" && before.toolsDigest == after.first.GetToolsDigest() {
		return &aggregatorv1.WatchCatalogResponse{Changed: []aggregatorv1.CatalogKind{
			aggregatorv1.CatalogKind_CATALOG_KIND_RESOURCES, aggregatorv1.CatalogKind_CATALOG_KIND_PROMPTS,
		}}
	}
	return allKinds
}

// sameView reports whether first, a reopened watch's first event, shows
// the view before showed: the same tools, and the same whole view when
// both say (an aggregator before view_digest says nothing of it).
func sameView(before *catalogWatch, first *aggregatorv1.WatchCatalogResponse) bool {
	sameTools := before.toolsDigest == "" || before.toolsDigest == first.GetToolsDigest()
	sameRest := before.viewDigest == "" || first.GetViewDigest() == "" || before.viewDigest == first.GetViewDigest()
	return sameTools && sameRest
}

// allKinds is an event in which every kind changed.
var allKinds = &aggregatorv1.WatchCatalogResponse{Changed: []aggregatorv1.CatalogKind{
	aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS, aggregatorv1.CatalogKind_CATALOG_KIND_RESOURCES, aggregatorv1.CatalogKind_CATALOG_KIND_PROMPTS,
}}

// catalogWatch is an open WatchCatalog stream and its first event.
type catalogWatch struct {
	stream aggregatorv1.AggregatorService_WatchCatalogClient
	first  *aggregatorv1.WatchCatalogResponse
	// toolsDigest and viewDigest are the digests of the caller's tools
	// and of its whole view in the last event pump handled (first's until
	// then).
	toolsDigest, viewDigest string
	// version is the catalog version in the last event pump handled
	// (first's until then); versionSeen says pump has set it.
	version     uint64
	versionSeen bool
	// codeMode says whether the server offered run_code in the last event
	// pump handled that says (first's until then): its optimizer view's
	// tools change with it.
	codeMode bool
	// ctx ends with the watch.
	ctx    context.Context
	cancel context.CancelFunc
}

// close ends the watch; a nil watch has nothing to end.
func (w *catalogWatch) close() {
	if w != nil {
		w.cancel()
	}
}

// errWatchUnconfirmed: the aggregator did not send a watch's first event
// within firstEventWait.
var errWatchUnconfirmed = status.Error(codes.Unavailable, "the aggregator did not confirm the catalog watch in time")

// openWatch opens a WatchCatalog stream for principal, subscribed to
// resourceURIs, and reads its first event, which confirms the subscription
// (the current version, and which of resourceURIs it delivers updates
// for): after it no change can be missed. The watch ends with ctx or its
// close. renewed are those of resourceURIs a watch this one replaces had
// subscribed: their first subscription was limited and audited.
func (s *Server) openWatch(ctx context.Context, req *Request, resourceURIs, renewed []string) (*catalogWatch, error) {
	wctx, cancel := context.WithCancel(ctx)
	stream, err := s.agg.WatchCatalog(wctx, &aggregatorv1.WatchCatalogRequest{Principal: req.Principal, Server: req.Server,
		ResourceUris: resourceURIs, RenewedResourceUris: renewed})
	if err != nil {
		cancel()
		return nil, err
	}
	hung := time.AfterFunc(firstEventWait, cancel)
	first, err := stream.Recv()
	if !hung.Stop() {
		err = errWatchUnconfirmed
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return &catalogWatch{stream: stream, first: first, codeMode: first.GetCodeMode(), ctx: wctx, cancel: cancel}, nil
}

// reopenWatch opens the watch again after the aggregator ended it,
// retrying with back-off and keeping the client's stream alive meanwhile.
// It returns nil when the client went away or the gateway shuts down
// first, and nil and true (the server is gone) when the aggregator no
// longer has the request's virtual server: a reload removed it.
func (s *Server) reopenWatch(ctx context.Context, resp Responder, req *Request, resourceURIs, renewed []string) (*catalogWatch, bool) {
	keepAlive := time.NewTicker(s.cfg.KeepAlive)
	defer keepAlive.Stop()
	for delay := reopenFirst; ; delay = min(2*delay, reopenMax) {
		// Jitter spreads the streams of a replica over the interval, so
		// a restarted aggregator is not hit by all of them at once.
		retry := time.NewTimer(delay/2 + rand.N(delay/2+1))
	wait:
		for {
			select {
			case <-ctx.Done():
				retry.Stop()
				return nil, false
			case <-s.closing:
				retry.Stop()
				return nil, false
			case <-keepAlive.C:
				if resp.Comment("keep-alive") != nil {
					retry.Stop()
					return nil, false
				}
			case <-retry.C:
				break wait
			}
		}
		w, err := s.openWatch(ctx, req, resourceURIs, renewed)
		if err == nil {
			s.log.InfoContext(ctx, "catalog watch reopened; the notification stream carries on")
			return w, false
		}
		if ctx.Err() != nil {
			return nil, false
		}
		if status.Code(err) == codes.NotFound {
			// The virtual server is no longer configured; the stream
			// ends, as the client's next request would find.
			return nil, true
		}
		s.log.DebugContext(ctx, "catalog watch not reopened yet", "err", err, "retry_in", min(2*delay, reopenMax))
	}
}

// pumpStop says why pump returned.
type pumpStop int

const (
	// stopDone: the client went away, the gateway shuts down, or a write
	// failed; the stream ends.
	stopDone pumpStop = iota
	// stopSubscriptionsChanged: restart was closed.
	stopSubscriptionsChanged
	// stopWatchEnded: the aggregator ended the watch; it can be reopened.
	stopWatchEnded
	// stopResubscribe: the resources changed while some subscriptions
	// were not made (listKinds.resubscribe).
	stopResubscribe
)

// sendChanged sends the list_changed notifications ev triggers within
// kinds, and codeModeChanged (the server's offer of run_code changed, or
// may have); it reports whether the stream is still writable.
func (s *Server) sendChanged(resp Responder, ev *aggregatorv1.WatchCatalogResponse, kinds listKinds, codeModeChanged bool, subscriptionID json.RawMessage) bool {
	for _, method := range changedNotifications(ev, kinds, codeModeChanged) {
		if resp.Send(wire.Notification(method, notificationParams(subscriptionID))) != nil {
			return false
		}
	}
	return true
}

// notificationParams are the params of a stream's notification: tagged
// with the subscription id on a Modern listen.
func notificationParams(subscriptionID json.RawMessage) wire.Object {
	p := wire.Object{}
	if subscriptionID != nil {
		p.Set("_meta", wire.Object{mcpspec.MetaSubscriptionID: subscriptionID})
	}
	return p
}

// pump turns the events of w into notifications, with keep-alive
// comments, until the client goes away, the gateway shuts down, the
// aggregator ends the watch or restart is closed. subscriptionID, when
// set, tags every notification (Modern listen). It reports why it
// stopped, and the last catalog version seen.
func (s *Server) pump(ctx context.Context, resp Responder, w *catalogWatch,
	kinds listKinds, restart <-chan struct{}, subscriptionID json.RawMessage) (pumpStop, uint64) {
	version := w.first.GetCatalogVersion()
	w.version, w.versionSeen = version, true
	if w.toolsDigest == "" {
		w.toolsDigest = w.first.GetToolsDigest()
	}
	if w.viewDigest == "" {
		w.viewDigest = w.first.GetViewDigest()
	}
	events := make(chan *aggregatorv1.WatchCatalogResponse)
	go func() {
		defer close(events)
		for {
			ev, err := w.stream.Recv()
			if err != nil {
				if w.ctx.Err() == nil {
					s.log.InfoContext(ctx, "catalog watch ended; reopening it under the open notification stream", "err", err)
				}
				return
			}
			select {
			case events <- ev:
			case <-w.ctx.Done():
				return
			}
		}
	}()
	keepAlive := time.NewTicker(s.cfg.KeepAlive)
	defer keepAlive.Stop()
	for {
		select {
		case <-ctx.Done():
			return stopDone, version
		case <-s.closing:
			return stopDone, version
		case <-restart:
			return stopSubscriptionsChanged, version
		case ev, ok := <-events:
			if !ok {
				if ctx.Err() != nil {
					return stopDone, version
				}
				return stopWatchEnded, version
			}
			version = ev.GetCatalogVersion()
			w.version = version
			if d := ev.GetToolsDigest(); d != "" {
				w.toolsDigest = d
			}
			codeModeChanged := false
			if d := ev.GetViewDigest(); d != "" {
				w.viewDigest = d
				codeModeChanged = ev.GetCodeMode() != w.codeMode
				w.codeMode = ev.GetCodeMode()
			}
			if !s.sendChanged(resp, ev, kinds, codeModeChanged, subscriptionID) {
				return stopDone, version
			}
			if kinds.resubscribe && slices.Contains(ev.GetChanged(), aggregatorv1.CatalogKind_CATALOG_KIND_RESOURCES) {
				// What could not be subscribed may be now: the watch is
				// opened again with every subscription.
				return stopResubscribe, version
			}
			if kinds.resourceUpdates {
				for _, uri := range ev.GetUpdatedResourceUris() {
					p := notificationParams(subscriptionID)
					p.Set("uri", uri)
					if resp.Send(wire.Notification("notifications/resources/updated", p)) != nil {
						return stopDone, version
					}
				}
			}
		case <-kinds.viewChanged:
			// The endpoint serves the other view: its tools are others.
			if kinds.tools && resp.Send(wire.Notification("notifications/tools/list_changed", notificationParams(subscriptionID))) != nil {
				return stopDone, version
			}
		case <-keepAlive.C:
			if resp.Comment("keep-alive") != nil {
				return stopDone, version
			}
		}
	}
}

// changedNotifications lists the list_changed methods an event triggers,
// once each, limited to kinds: the catalog's tools are the raw view's,
// and the optimizer view's change with the offer of run_code
// (codeModeChanged).
func changedNotifications(ev *aggregatorv1.WatchCatalogResponse, kinds listKinds, codeModeChanged bool) []string {
	var tools, resources, prompts bool
	if kinds.tools && codeModeChanged && kinds.view() == ViewOptimized {
		tools = true
	}
	for _, k := range ev.GetChanged() {
		switch k {
		case aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS:
			tools = tools || kinds.tools && kinds.view() == ViewRaw
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
