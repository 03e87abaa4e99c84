package server

import (
	"context"
	"errors"
	"slices"

	"google.golang.org/grpc"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/engine"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// WatchCatalog sends the current version, then an event whenever the
// caller's view changes.
func (s *Server) WatchCatalog(req *aggregatorv1.WatchCatalogRequest, stream grpc.ServerStreamingServer[aggregatorv1.WatchCatalogResponse]) error {
	ctx := stream.Context()
	p := svcauth.PrincipalFrom(ctx)
	if req.GetAllChanges() {
		if c, _ := svcauth.CallerFrom(ctx); !c.AssertPrincipals {
			return s.fail(ctx, "WatchCatalog", errAllChangesDenied)
		}
	}
	viewOf := func(snap *catalog.Snapshot) *catalog.View {
		if req.GetAllChanges() {
			return s.e.FullView(snap)
		}
		return s.e.View(snap, p)
	}
	snap, superseded, policy := s.e.SnapshotPolicy()
	view := viewOf(snap)
	updated := make(chan string, engine.UpdateBuffer)
	subscribed := s.subscribeResources(ctx, snap, req.GetResourceUris(), updated)
	defer func() {
		for _, unsubscribe := range subscribed {
			unsubscribe()
		}
	}()
	first := &aggregatorv1.WatchCatalogResponse{CatalogVersion: snap.Version, ToolsDigest: view.Digest(catalog.KindTools)}
	for _, uri := range req.GetResourceUris() {
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
			return nil
		case uri := <-updated:
			if err := stream.Send(&aggregatorv1.WatchCatalogResponse{CatalogVersion: snap.Version, UpdatedResourceUris: []string{uri}}); err != nil {
				return err
			}
			continue
		case <-superseded:
		}
		prevPolicy := policy
		snap, superseded, policy = s.e.SnapshotPolicy()
		// A URI the caller may no longer read, or that is gone, stops
		// being delivered. A backend that is down keeps its subscriptions.
		for uri, unsubscribe := range subscribed {
			if _, err := s.e.ResourceOwner(snap, svcauth.PrincipalFrom(ctx), uri); errors.Is(err, engine.ErrNotFound) {
				unsubscribe()
				delete(subscribed, uri)
			}
		}
		next := viewOf(snap)
		ev := &aggregatorv1.WatchCatalogResponse{CatalogVersion: snap.Version, ToolsDigest: next.Digest(catalog.KindTools)}
		for _, k := range catalog.Kinds {
			// A watcher of all changes sees the unfiltered view, which a
			// new policy leaves as it is; but any principal's view may have
			// changed with it (the indexer drops its scopes on this).
			if next.Digest(k) != view.Digest(k) || (req.GetAllChanges() && policy != prevPolicy) {
				ev.Changed = append(ev.Changed, apiKind[k])
			}
		}
		view = next
		if len(ev.Changed) == 0 {
			continue
		}
		if err := stream.Send(ev); err != nil {
			return err
		}
	}
}

// maxWatchedResources bounds the resource URIs one watch may subscribe to.
const maxWatchedResources = 256

// subscribeResources subscribes ch to every URI of uris that the caller may
// read and whose owner advertises resources.subscribe; the others are left
// out silently, so a denied URI cannot be told from an unknown one. It
// returns the unsubscribe function of each subscribed URI.
func (s *Server) subscribeResources(ctx context.Context, snap *catalog.Snapshot, uris []string, ch chan<- string) map[string]func() {
	subscribed := map[string]func(){}
	for _, uri := range uris {
		if _, dup := subscribed[uri]; dup || uri == "" || len(subscribed) == maxWatchedResources {
			continue
		}
		b, err := s.e.ResourceOwner(snap, svcauth.PrincipalFrom(ctx), uri)
		if err != nil || !subscribes(snap.Capabilities[b.Name()]) {
			continue
		}
		unsubscribe, err := s.e.Subscribe(ctx, b, uri, ch)
		if err != nil {
			s.log.Warn("backend subscribe failed", "backend", b.Name(), "err", b.Redact(err.Error()))
			continue
		}
		subscribed[uri] = unsubscribe
	}
	return subscribed
}

var apiKind = map[catalog.Kind]aggregatorv1.CatalogKind{
	catalog.KindTools:             aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS,
	catalog.KindResources:         aggregatorv1.CatalogKind_CATALOG_KIND_RESOURCES,
	catalog.KindResourceTemplates: aggregatorv1.CatalogKind_CATALOG_KIND_RESOURCE_TEMPLATES,
	catalog.KindPrompts:           aggregatorv1.CatalogKind_CATALOG_KIND_PROMPTS,
}
