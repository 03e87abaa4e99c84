package methods

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/gateway/internal/mcperr"
	"github.com/switchboard-mcp/switchboard/gateway/internal/session"
	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// The notification streams: Modern subscriptions/listen and the Legacy
// session's GET stream, both fed by the aggregator's WatchCatalog.

// listKinds says which notifications a stream delivers: list_changed of
// each kind, and resources/updated for the URIs the watch subscribed.
type listKinds struct {
	tools, resources, prompts bool
	// view is the view the stream's endpoint serves now: the catalog's
	// tools changes are the raw view's, told only while it serves that
	// one (the optimizer's tools are the same whatever the catalog holds).
	// viewChanged is signalled when a reload changes it, which changes
	// the tools.
	view            func() View
	viewChanged     <-chan struct{}
	resourceUpdates bool
	// resubscribe: the stream holds subscriptions its watch could not
	// make (a URI not yet listed, denied, on a backend down), which a
	// change of the catalog may let it make now (a Legacy session's: its
	// client was answered {} for them).
	resubscribe bool
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
	// An object: null unmarshals into an empty filter without an error.
	if !ok || !wire.IsObjectText(raw) || json.Unmarshal(raw, &filter) != nil {
		return nil, wire.InvalidParams("missing or invalid 'notifications' field")
	}
	// The stream keeps the filter it parsed (bounded below), never the
	// member as sent, which a client could pad to the body's size.
	delete(req.Params, "notifications")
	maxSubscriptions := session.MaxSubscriptions
	if n := s.cfg.MaxSubscriptions; n > 0 {
		maxSubscriptions = min(n, maxSubscriptions)
	}
	// A URI named twice is one subscription, as the aggregator counts it
	// and as a Legacy session holds it.
	seen := make(map[string]bool, len(filter.ResourceSubscriptions))
	filter.ResourceSubscriptions = slices.DeleteFunc(filter.ResourceSubscriptions, func(uri string) bool {
		named := seen[uri]
		seen[uri] = true
		return named
	})
	if len(filter.ResourceSubscriptions) > maxSubscriptions {
		return nil, wire.InvalidParams(fmt.Sprintf("more than %d resourceSubscriptions", maxSubscriptions))
	}
	for _, uri := range filter.ResourceSubscriptions {
		// The same bound as a Legacy session's subscriptions: the URIs are
		// held for as long as the stream is open.
		if s.cfg.MaxURIBytes > 0 && len(uri) > s.cfg.MaxURIBytes {
			return nil, wire.InvalidParams(fmt.Sprintf("a resourceSubscriptions URI is longer than %d bytes", s.cfg.MaxURIBytes))
		}
	}
	agreed := subscriptionFilter{
		ToolsListChanged:     filter.ToolsListChanged,
		PromptsListChanged:   filter.PromptsListChanged,
		ResourcesListChanged: filter.ResourcesListChanged,
	}
	kinds := listKinds{tools: agreed.ToolsListChanged, resources: agreed.ResourcesListChanged, prompts: agreed.PromptsListChanged,
		view: req.viewNow, viewChanged: req.ViewChanged}
	meta := wire.Object{mcpspec.MetaSubscriptionID: req.ID}
	end := func() (json.RawMessage, *wire.Error) {
		res := wire.Object{}
		res.Set("_meta", meta)
		return s.shape(req, res.Encode(), false)
	}
	var w *catalogWatch
	if !kinds.empty() || len(filter.ResourceSubscriptions) > 0 {
		release, rerr := s.limits.acquire(req.Principal)
		if rerr != nil {
			return nil, rerr
		}
		defer release()
		var err error
		if w, err = s.openWatch(ctx, req, filter.ResourceSubscriptions, nil); err != nil {
			return nil, mcperr.FromError(ctx, s.log, err, req.Era, req.Method)
		}
		// w changes when the watch is reopened.
		defer func() { w.close() }()
		agreed.ResourceSubscriptions = w.first.GetSubscribedResourceUris()
		kinds.resourceUpdates = len(agreed.ResourceSubscriptions) > 0
	}
	ack := wire.Notification("notifications/subscriptions/acknowledged", map[string]any{"_meta": meta, "notifications": agreed})
	if kinds.empty() {
		// Nothing to deliver: acknowledge and end gracefully at once.
		if resp.Send(ack) != nil {
			return nil, nil
		}
		return end()
	}
	// The stream counts as open from its first byte on.
	defer s.streams("listen")()
	if resp.Send(ack) != nil {
		return nil, nil
	}
	for {
		if stop, _ := s.pump(ctx, resp, w, kinds, nil, req.ID); stop != stopWatchEnded {
			return listenEnded(ctx, end)
		}
		w.close()
		before := w
		var serverGone bool
		if w, serverGone = s.reopenWatch(ctx, resp, req, agreed.ResourceSubscriptions, agreed.ResourceSubscriptions); serverGone {
			return end()
		}
		if w == nil {
			return listenEnded(ctx, end)
		}
		if len(w.first.GetSubscribedResourceUris()) < len(agreed.ResourceSubscriptions) {
			return end()
		}
		if !s.sendChanged(resp, missedWhileReopening(before, w), kinds, before.codeMode != w.codeMode, req.ID) {
			return nil, nil
		}
	}
}

// ErrServerRemoved is the cause that ends a request's context when a
// reload removed the virtual server it was sent to.
var ErrServerRemoved = errors.New("its server was removed")

// listenEnded ends a listen that cannot go on. When its server was
// removed, gracefully, with its final result (end), as the spec asks of a
// server that ends a listen: the server is gone for good, and a client
// that listened again would only find so. Otherwise (the client went
// away, its credential no longer authenticates, the gateway shuts down)
// without one: an abrupt drop, after which the client may listen again.
func listenEnded(ctx context.Context, end func() (json.RawMessage, *wire.Error)) (json.RawMessage, *wire.Error) {
	if errors.Is(context.Cause(ctx), ErrServerRemoved) {
		return end()
	}
	return nil, nil
}

// keepQuiet keeps a stream open with keep-alives alone until its client
// goes away, until until (when set), or until session (when set) is
// deleted: a stream whose messages a newer one of its session took.
func (s *Server) keepQuiet(ctx context.Context, resp Responder, until time.Time, session string) {
	if !until.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, until)
		defer cancel()
	}
	keepAlive := time.NewTicker(s.cfg.KeepAlive)
	defer keepAlive.Stop()
	for {
		// A Legacy session's stream ends with its deletion too, silenced
		// or not: the channel first, then the look, as SessionStream does.
		var changed <-chan struct{}
		if session != "" {
			_, changed = s.local.Subscriptions(session, until)
			if s.revoked(session) {
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-keepAlive.C:
			if resp.Comment("keep-alive") != nil {
				return
			}
		}
	}
}

// SessionStream serves a Legacy session's GET stream: the list_changed
// notifications of the principal's view, and the updates of the resources
// the session subscribed to on this replica. An error is returned only
// before anything was sent.
func (s *Server) SessionStream(ctx context.Context, req *Request, resp Responder) *wire.Error {
	kinds := listKinds{tools: true, resources: true, prompts: true, view: req.viewNow, viewChanged: req.ViewChanged}
	release, rerr := s.limits.acquire(req.Principal)
	if rerr != nil && req.Reconnected {
		// A client refused its reconnect ends the session (go-sdk takes a
		// refused first GET as "no stream", a refused reconnect as the
		// end): it gets an empty stream with a new id instead, asking it
		// to come back later, and keeps its session meanwhile.
		_ = resp.Prime(streamID(), refusedStreamRetry)
		return nil
	}
	if rerr != nil {
		return rerr
	}
	defer release()
	// The stream follows the session's subscriptions on this replica,
	// including the first one, made after it opened (registered before
	// Subscriptions is read, below). A session's messages go on one
	// stream here (2025-11-25 sends each on one only): a newer stream
	// takes them from this one, which then keeps its connection quiet,
	// keep-alives only, until its client closes it, so that a client that
	// holds two streams is not cut from them in turns.
	whole := ctx
	live, silence := context.WithCancel(ctx)
	ctx = live
	defer silence()
	defer s.local.OpenStream(req.Session, silence)()
	defer func() {
		if live.Err() != nil && whole.Err() == nil {
			s.keepQuiet(whole, resp, req.SessionExpiry, req.Session)
		}
	}()
	// The stream ends with its session: when it expires, and when it is
	// deleted (below).
	if !req.SessionExpiry.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, req.SessionExpiry)
		defer cancel()
	}
	// The wake-up channel is taken before deletion is looked for: a
	// deletion heard after the look closes a channel this stream holds.
	uris, changed := s.local.Subscriptions(req.Session, req.SessionExpiry)
	if s.revoked(req.Session) {
		return nil
	}
	w, err := s.openWatch(ctx, req, uris, nil)
	if code := status.Code(err); req.Reconnected && (code == codes.Unavailable || code == codes.ResourceExhausted) {
		// The aggregator cannot watch now (unreachable, or at its bound
		// of watches): a reconnect refused would end the session, as
		// above, so it is asked to come back when a watch may open.
		_ = resp.Prime(streamID(), reopenMax)
		return nil
	}
	if err != nil {
		return mcperr.FromError(ctx, s.log, err, mcpspec.EraLegacy, "GET")
	}
	defer func() { w.close() }()
	// The stream counts as open from its first byte on, a priming event
	// whose id is new on every stream: go-sdk counts a reconnect that saw
	// a new id as progress, and would end the session after five cuts
	// without one (a rolling restart of the gateways).
	defer s.streams("legacy_get")()
	if resp.Prime(streamID(), 0) != nil {
		return nil
	}
	// A stream opened again after the client lost one missed what changed
	// meanwhile: every list may have.
	if req.Reconnected && !s.sendChanged(resp, allKinds, kinds, true, nil) {
		return nil
	}
	for {
		k := kinds
		k.resourceUpdates = len(w.first.GetSubscribedResourceUris()) > 0
		k.resubscribe = len(w.first.GetSubscribedResourceUris()) < len(uris)
		stop, version := s.pump(ctx, resp, w, k, changed, nil)
		w.close()
		before := w
		// Each change of the session's subscriptions reopens the watch
		// with the new set; the stream itself stays open. The channel
		// first, then the look for a deletion, as above.
		uris, changed = s.local.Subscriptions(req.Session, req.SessionExpiry)
		if s.revoked(req.Session) {
			return nil
		}
		// What the replaced watch subscribed was limited and audited when
		// the client subscribed to it: the new watch renews it. Those it
		// could not make (refused, missing, not subscribable) are tried
		// again as new, each limited and audited: a subscription a limit
		// refused is not made past it later.
		renewed := before.first.GetSubscribedResourceUris()
		if stop == stopResubscribe {
			stop = stopSubscriptionsChanged
		}
		switch stop {
		case stopSubscriptionsChanged:
			if w, err = s.openWatch(ctx, req, uris, renewed); err != nil {
				w, _ = s.reopenWatch(ctx, resp, req, uris, renewed)
			} else if w.first.GetCatalogVersion() == version && sameView(before, w.first) && before.codeMode == w.codeMode {
				continue
			}
		case stopWatchEnded:
			w, _ = s.reopenWatch(ctx, resp, req, uris, renewed)
		default:
			return nil
		}
		// The catalog changed while the watch was reopened (or may have:
		// a watch that broke saw nothing meanwhile): say so, in case the
		// change was one this view sees.
		if w == nil || !s.sendChanged(resp, missedWhileReopening(before, w), kinds, before.codeMode != w.codeMode, nil) {
			return nil
		}
	}
}

// refusedStreamRetry is how long a client whose reconnect met the
// principal's stream bound waits before it tries again.
const refusedStreamRetry = 30 * time.Second

// streamID is a new id for a Legacy GET stream's priming event. Nothing
// is replayed from it (no event is stored): it marks the stream.
func streamID() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return hex.EncodeToString(b[:])
}
