package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"google.golang.org/grpc"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/engine"
	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// WatchCatalog sends the current version, then an event whenever the
// caller's view changes. A caller that is not an operator holds at most
// aggregator.maxWatchesPerCaller watches open here, of either kind.
func (s *Server) WatchCatalog(req *aggregatorv1.WatchCatalogRequest, stream grpc.ServerStreamingServer[aggregatorv1.WatchCatalogResponse]) error {
	ctx := stream.Context()
	p := svcauth.PrincipalFrom(ctx)
	caller, _ := svcauth.CallerFrom(ctx)
	named := slices.Concat(req.GetResourceUris(), req.GetRenewedResourceUris())
	switch {
	case req.GetAllChanges() && !caller.AssertPrincipals:
		return s.fail(ctx, "WatchCatalog", errAllChangesDenied)
	case len(req.GetResourceUris()) > maxWatchedResources || len(req.GetRenewedResourceUris()) > maxWatchedResources:
		return s.fail(ctx, "WatchCatalog", errTooManyWatchedResources)
	case len(named) > 0 && !caller.MayCall(aggregatorv1.AggregatorService_ReadResource_FullMethodName):
		// A subscription makes backends send the caller what it could
		// read: a credential that may not read (the indexer's, which
		// watches views only) may not subscribe either.
		return s.fail(ctx, "WatchCatalog", errSubscribeNeedsRead)
	}
	for _, uri := range named {
		if len(uri) > config.MaxSessionURIBytes {
			return s.fail(ctx, "WatchCatalog", errWatchedURITooLong)
		}
	}
	// A renewal spares a subscription the rate-limit token and the audit
	// event its first one took. Only the gateway reopens watches it had
	// (for its sessions); any other caller's claim could not be checked,
	// so its renewals are subscriptions like any other.
	renewed := map[string]bool{}
	if caller.IsEdge() {
		for _, uri := range req.GetRenewedResourceUris() {
			renewed[uri] = true
		}
	}
	// The watch lives long: it keeps copies of the URIs it subscribed
	// (subscribeResources), and nothing else the request named.
	uris := req.GetResourceUris()
	req.ResourceUris, req.RenewedResourceUris = nil, nil
	if !caller.Operator {
		release, err := s.watchers.Acquire(caller.Name)
		if err != nil {
			return s.fail(ctx, "WatchCatalog", err)
		}
		defer release()
	}
	if req.GetAllChanges() {
		return s.watchAllChanges(stream)
	}
	snap, superseded, err := s.e.ServerSnapshot(req.GetServer())
	if err != nil {
		return s.fail(ctx, "WatchCatalog", err)
	}
	view := s.e.View(snap, p)
	updated := make(chan string, engine.UpdateBuffer)
	subscribed := s.subscribeResources(ctx, req.GetServer(), uris, renewed, updated)
	defer func() {
		for _, sub := range subscribed {
			sub.unsubscribe()
		}
	}()
	// dropped are the URIs this watch subscribed and then dropped after
	// a change (gone, denied, or routed to another backend now): made
	// again after a change that brings them back, as their client still
	// holds them (a Legacy session's, a listen's acknowledged). Once
	// dropped, one was never delivered again, and nothing told the
	// client; one routed elsewhere stayed subscribed where it was.
	dropped := map[string]bool{}
	codeChanged := s.codeModeChanged()
	codeMode := s.codeModeIn(req.GetServer())
	first := &aggregatorv1.WatchCatalogResponse{CatalogVersion: snap.Version, ToolsDigest: view.Digest(catalog.KindTools), ViewDigest: viewDigest(view), CodeMode: codeMode}
	for _, uri := range uris {
		if _, ok := subscribed[uri]; ok && !slices.Contains(first.SubscribedResourceUris, uri) {
			first.SubscribedResourceUris = append(first.SubscribedResourceUris, uri)
		}
	}
	if err := stream.Send(first); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			// The caller went away or its deadline passed: say which, rather
			// than end the stream as if it had completed.
			return s.fail(ctx, "WatchCatalog", ctx.Err())
		case uri := <-updated:
			if !s.stillDelivered(ctx, req.GetServer(), uri, subscribed, superseded) {
				continue
			}
			if err := stream.Send(&aggregatorv1.WatchCatalogResponse{CatalogVersion: snap.Version, UpdatedResourceUris: []string{uri}}); err != nil {
				return err
			}
			continue
		case <-s.stopping:
			return s.fail(ctx, "WatchCatalog", errShuttingDown)
		case <-superseded:
		case <-codeChanged:
			// Read after the reload's new offer is in force.
			codeChanged = s.codeModeChanged()
		}
		if snap, superseded, err = s.e.ServerSnapshot(req.GetServer()); err != nil {
			// The server was removed from the configuration.
			return s.fail(ctx, "WatchCatalog", err)
		}
		// A URI the caller may no longer read, or that is gone, stops
		// being delivered. A backend that is down keeps its subscriptions.
		for uri, sub := range subscribed {
			a, err := s.route(ctx, req.GetServer(), catalog.KindResources, uri)
			if errors.Is(err, engine.ErrNotFound) || err == nil && subscribedAt(a) != sub.at {
				sub.unsubscribe()
				delete(subscribed, uri)
				dropped[uri] = true
			}
		}
		if len(dropped) > 0 {
			// Renewals, as the gateway's are: each took its token and its
			// audit event when it was first made.
			for uri, sub := range s.subscribeResources(ctx, req.GetServer(), slices.Collect(maps.Keys(dropped)), dropped, updated) {
				subscribed[uri] = sub
				delete(dropped, uri)
			}
		}
		next, nextCodeMode := s.e.View(snap, p), s.codeModeIn(req.GetServer())
		ev := &aggregatorv1.WatchCatalogResponse{CatalogVersion: snap.Version, ToolsDigest: next.Digest(catalog.KindTools), ViewDigest: viewDigest(next), CodeMode: nextCodeMode}
		for _, k := range catalog.Kinds {
			if next.Digest(k) != view.Digest(k) {
				ev.Changed = append(ev.Changed, apiKind[k])
			}
		}
		codeModeChanged := nextCodeMode != codeMode
		view, codeMode = next, nextCodeMode
		if len(ev.Changed) == 0 && !codeModeChanged {
			continue
		}
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
}

// stillDelivered reports whether an update of uri, queued for a watch
// holding subscribed, goes to its caller: not once the watch dropped the
// URI (the updates queued before stay in the queue), nor, while a newer
// catalog waits to be read (superseded), once that catalog no longer
// routes the URI to the caller (a policy that now denies it) or routes it
// to another backend.
func (s *Server) stillDelivered(ctx context.Context, server, uri string, subscribed map[string]subscription, superseded <-chan struct{}) bool {
	sub, ok := subscribed[uri]
	if !ok {
		return false
	}
	select {
	case <-superseded:
		a, err := s.route(ctx, server, catalog.KindResources, uri)
		return !errors.Is(err, engine.ErrNotFound) && (err != nil || subscribedAt(a) == sub.at)
	default:
		return true
	}
}

// viewDigest is the digest of every kind of v together.
func viewDigest(v *catalog.View) string {
	h := sha256.New()
	for _, k := range catalog.Kinds {
		h.Write([]byte(v.Digest(k)))
		h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil))
}

// watchAllChanges serves a watch of every change (the indexer's): an event
// whenever a kind changed in any catalog, the whole one or a server's.
// Its version is the whole catalog's; a change of a server's catalog only
// is reported through Changed.
func (s *Server) watchAllChanges(stream grpc.ServerStreamingServer[aggregatorv1.WatchCatalogResponse]) error {
	ctx := stream.Context()
	snaps, superseded, policy := s.e.AllSnapshots()
	digests := s.fullDigests(snaps)
	if err := stream.Send(&aggregatorv1.WatchCatalogResponse{CatalogVersion: snaps[""].Version, ToolsDigest: digests[""][catalog.KindTools]}); err != nil {
		return err
	}
	for {
		select {
		case <-ctx.Done():
			// The caller went away or its deadline passed: say which, rather
			// than end the stream as if it had completed.
			return s.fail(ctx, "WatchCatalog", ctx.Err())
		case <-s.stopping:
			return s.fail(ctx, "WatchCatalog", errShuttingDown)
		case <-superseded:
		}
		prevPolicy := policy
		snaps, superseded, policy = s.e.AllSnapshots()
		next := s.fullDigests(snaps)
		ev := &aggregatorv1.WatchCatalogResponse{CatalogVersion: snaps[""].Version, ToolsDigest: next[""][catalog.KindTools]}
		for _, k := range catalog.Kinds {
			// The unfiltered views stay as they are under a new policy,
			// but any principal's view may have changed with it (the
			// indexer drops its scopes on this).
			changed := len(next) != len(digests) || policy != prevPolicy
			for server, d := range next {
				changed = changed || digests[server][k] != d[k]
			}
			if changed {
				ev.Changed = append(ev.Changed, apiKind[k])
			}
		}
		digests = next
		if len(ev.Changed) == 0 {
			continue
		}
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
}

// fullDigests are the unfiltered view digests of each catalog, per kind.
func (s *Server) fullDigests(snaps map[string]*catalog.Snapshot) map[string][len(catalog.Kinds)]string {
	out := make(map[string][len(catalog.Kinds)]string, len(snaps))
	for server, snap := range snaps {
		v := s.e.FullView(snap)
		var d [len(catalog.Kinds)]string
		for _, k := range catalog.Kinds {
			d[k] = v.Digest(k)
		}
		out[server] = d
	}
	return out
}

// maxWatchedResources bounds the resource URIs one watch may name, and so
// subscribe to: the gateway's bound on one session's or listen's
// subscriptions (config.MaxSessionSubscriptions), which it never sends
// more than.
const maxWatchedResources = config.MaxSessionSubscriptions

// errTooManyWatchedResources: a watch named more resource URIs than it may.
var errTooManyWatchedResources = invalidArgument(fmt.Sprintf("resource_uris holds more than %d URIs", maxWatchedResources))

// errWatchedURITooLong: a watch named a URI longer than any the gateway
// sends (config.MaxSessionURIBytes).
var errWatchedURITooLong = invalidArgument(fmt.Sprintf("a resource_uris URI is longer than %d bytes", config.MaxSessionURIBytes))

// subscribeResources subscribes ch to every URI of uris (at most
// maxWatchedResources) that the caller's server holds, that the caller
// may read and whose owner advertises resources.subscribe, each admitted
// once however often it is named (admit.go: filtered, authorized, limited
// and audited); the others are left out silently, so a denied URI cannot
// be told from an unknown one. It returns the subscription of each
// subscribed URI.
func (s *Server) subscribeResources(ctx context.Context, server string, uris []string, renewed map[string]bool, ch chan<- string) map[string]subscription {
	subscribed := map[string]subscription{}
	seen := make(map[string]bool, len(uris))
	for _, uri := range uris {
		if seen[uri] || uri == "" {
			continue
		}
		seen[uri] = true
		uri := strings.Clone(uri) // not the request's: kept while subscribed
		r := admission{method: config.RateMethodResourceSubscribe, trail: audit.KindResourceSubscribe, server: server,
			kind: catalog.KindResources, key: uri, shared: true, accounted: renewed[uri],
			prepare: func(a *admitted) error {
				if !subscribes(a.snap.Capabilities[a.b.Name()]) {
					return engine.ErrNotFound
				}
				return nil
			}}
		sub, err := serve(ctx, s, r, func(a *admitted) (subscription, error) {
			// The backend is asked for the resource admitted (route), under
			// its own name for it; updates are reported under the client's
			// spelling.
			unsubscribe, err := s.e.Subscribe(a.ctx, a.b, catalog.BackendURI(a.owner, a.key), uri, ch)
			if err != nil {
				s.log.Warn("backend subscribe failed", "backend", a.b.Name(), "err", a.b.Redact(err.Error()))
			}
			return subscription{at: subscribedAt(a), unsubscribe: unsubscribe}, err
		})
		if err == nil {
			subscribed[uri] = sub
		}
	}
	return subscribed
}

// subscription is one URI a watch subscribed: where, and how to end it.
type subscription struct {
	// at is the backend and its name for the resource (subscribedAt).
	at          string
	unsubscribe func()
}

// subscribedAt is where a subscription of the resource a admitted is
// made: its owner, and the owner's name for it.
func subscribedAt(a *admitted) string {
	return a.owner + "\x00" + catalog.BackendURI(a.owner, a.key)
}

var apiKind = map[catalog.Kind]aggregatorv1.CatalogKind{
	catalog.KindTools:             aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS,
	catalog.KindResources:         aggregatorv1.CatalogKind_CATALOG_KIND_RESOURCES,
	catalog.KindResourceTemplates: aggregatorv1.CatalogKind_CATALOG_KIND_RESOURCE_TEMPLATES,
	catalog.KindPrompts:           aggregatorv1.CatalogKind_CATALOG_KIND_PROMPTS,
}
