// Package scope maps a principal to its search scope. The view comes from
// the aggregator alone: Discover gives the principal's tools_digest, and a
// scope missing for that digest is built from ListTools pages fetched as
// that principal. The principal→scope mapping is cached with a TTL, for
// at most maxCachedPrincipals principals, and dropped whenever the
// aggregator's WatchCatalog stream reports a tool change (or breaks,
// since changes may then have been missed).
package scope

import (
	"container/list"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/singleflight"

	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// AggregatorError is a failed call to the aggregator; Err is its gRPC
// status error.
type AggregatorError struct {
	Op  string
	Err error
}

func (e *AggregatorError) Error() string { return "aggregator " + e.Op + ": " + e.Err.Error() }
func (e *AggregatorError) Unwrap() error { return e.Err }

// errViewMoved means the pages of one listing did not all come from one
// view: the catalog changed while it was listed, or consecutive pages were
// served by aggregator replicas whose catalogs differ.
var errViewMoved = errors.New("catalog changed while listing the view")

// ErrViewUnsettled is returned when buildAttempts listings in a row saw
// pages of different views: the aggregator replicas disagree about the
// catalog, or it keeps changing. Nothing is stored; the caller may retry.
var ErrViewUnsettled = errors.New("no consistent tool view from the aggregator: its pages kept coming from different catalogs")

const (
	listPageSize = 1000
	// buildAttempts bounds retries when the catalog keeps moving under a
	// build.
	buildAttempts = 3
	buildTimeout  = 2 * time.Minute
)

// Resolver resolves principals to scopes.
type Resolver struct {
	agg aggregatorv1.AggregatorServiceClient
	// pinned serves the retries of a build that saw two views (PinRetries).
	pinned aggregatorv1.AggregatorServiceClient
	store  store.Index
	ttl    time.Duration
	log    *slog.Logger

	// now is the clock of the cache's expiries.
	now func() time.Time

	mu    sync.Mutex
	cache principalCache
	// generation increases on every invalidation; a resolution that began
	// under an older generation is not cached, so it cannot resurrect a
	// view the watch just invalidated.
	generation uint64

	// byDigest holds the scopes found or built here by view digest. A
	// digest names one view's contents, so its scope never changes; only
	// a collection by another replica removes it (Forget). It lets a
	// principal whose mapping an invalidation dropped find its scope again
	// with one Discover and no database query, so a catalog change while
	// the database is down does not stop searches of unchanged views.
	byDigest map[string]store.Scope

	flight singleflight.Group
	builds atomic.Int64
}

// maxScopesByDigest bounds byDigest; it starts over when full.
const maxScopesByDigest = 10000

// maxCachedPrincipals bounds the principal→scope mappings cached: past it
// the one that expires first goes. An entry costs the same whoever it is
// for (its key is a digest of the principal, which callers choose).
const maxCachedPrincipals = 10000

// principalCache maps the digest of (server, principal) to a scope until
// the entry expires. Every entry lives the same TTL from when it was
// stored, so the order of storing is the order of expiry: order holds the
// entries oldest first, the expired ones are dropped from its front, and
// when the cache is full the front (the next to expire) makes room. The
// zero value is ready.
type principalCache struct {
	byKey map[principalKey]*list.Element
	order list.List // of *entry, oldest first
}

// principalKey is the SHA-256 of a cache key (cacheKey).
type principalKey [sha256.Size]byte

type entry struct {
	key     principalKey
	scope   store.Scope
	expires time.Time
}

// get returns the unexpired scope cached under key.
func (c *principalCache) get(key principalKey, now time.Time) (store.Scope, bool) {
	c.prune(now)
	el, ok := c.byKey[key]
	if !ok {
		return store.Scope{}, false
	}
	return el.Value.(*entry).scope, true
}

// put caches sc under key until expires, which is no earlier than any
// entry's before (one TTL after now).
func (c *principalCache) put(key principalKey, sc store.Scope, expires, now time.Time) {
	c.prune(now)
	c.remove(key)
	if c.byKey == nil {
		c.byKey = map[principalKey]*list.Element{}
	}
	for c.order.Len() >= maxCachedPrincipals {
		c.remove(c.order.Front().Value.(*entry).key)
	}
	c.byKey[key] = c.order.PushBack(&entry{key: key, scope: sc, expires: expires})
}

func (c *principalCache) remove(key principalKey) {
	if el, ok := c.byKey[key]; ok {
		c.order.Remove(el)
		delete(c.byKey, key)
	}
}

// prune drops the entries expired at now.
func (c *principalCache) prune(now time.Time) {
	for el := c.order.Front(); el != nil && !now.Before(el.Value.(*entry).expires); el = c.order.Front() {
		c.remove(el.Value.(*entry).key)
	}
}

func (c *principalCache) len() int { return c.order.Len() }

// New returns a resolver. ttl bounds how long a principal's scope is used
// without asking the aggregator again.
func New(agg aggregatorv1.AggregatorServiceClient, st store.Index, ttl time.Duration, log *slog.Logger) *Resolver {
	return &Resolver{agg: agg, pinned: agg, store: st, ttl: ttl, log: log, now: time.Now, byDigest: map[string]store.Scope{}}
}

// PinRetries makes the builds that saw pages of two views list again
// through pinned: a client of the same aggregators that sends every call
// to one replica (pick_first), so that while replicas disagree (a backend
// one of them cannot reach) a view of several pages can still be read
// whole from one of them. The first attempt stays on the balanced client.
func (r *Resolver) PinRetries(pinned aggregatorv1.AggregatorServiceClient) { r.pinned = pinned }

// Builds is how many scopes this resolver built (not found already built).
func (r *Resolver) Builds() int64 { return r.builds.Load() }

// cacheKey names the cache entry of a principal's scope in a virtual
// server: every reader and writer of the cache uses it. It is a digest of
// the server, the subject and the groups, each length-prefixed, so no two
// of them share it. Groups arrive normalized (sorted, unique) from
// svcauth.
func cacheKey(server string, p *commonv1.Principal) principalKey {
	h := sha256.New()
	field := func(s string) {
		h.Write(binary.BigEndian.AppendUint64(nil, uint64(len(s))))
		h.Write([]byte(s))
	}
	field(server)
	field(p.GetSubject())
	for _, g := range p.GetGroups() {
		field(g)
	}
	var k principalKey
	h.Sum(k[:0])
	return k
}

// Resolve returns the principal's scope in the virtual server named server
// ("" for the whole catalog), building it if needed; built reports whether
// this call built it. A server's views have digests of their own (the
// aggregator puts the server into them), so a server's scope is never
// another server's.
func (r *Resolver) Resolve(ctx context.Context, p *commonv1.Principal, server string) (store.Scope, bool, error) {
	key := cacheKey(server, p)
	r.mu.Lock()
	cached, ok := r.cache.get(key, r.now())
	gen := r.generation
	r.mu.Unlock()
	if ok {
		return cached, false, nil
	}
	var (
		sc    store.Scope
		built bool
		err   error
	)
	for attempt := range buildAttempts {
		agg := r.agg
		if attempt > 0 {
			agg = r.pinned
		}
		sc, built, err = r.resolve(ctx, agg, p, server)
		if !errors.Is(err, errViewMoved) {
			break
		}
	}
	if errors.Is(err, errViewMoved) {
		err = ErrViewUnsettled
	}
	if err != nil {
		return store.Scope{}, false, err
	}
	r.mu.Lock()
	if r.generation == gen {
		now := r.now()
		r.cache.put(key, sc, now.Add(r.ttl), now)
	}
	r.mu.Unlock()
	return sc, built, nil
}

type buildResult struct {
	scope store.Scope
	built bool
}

func (r *Resolver) resolve(ctx context.Context, agg aggregatorv1.AggregatorServiceClient, p *commonv1.Principal, server string) (store.Scope, bool, error) {
	disc, err := agg.Discover(ctx, &aggregatorv1.DiscoverRequest{Principal: p, Server: server})
	if err != nil {
		return store.Scope{}, false, &AggregatorError{Op: "discover", Err: err}
	}
	digest := disc.GetToolsDigest()
	var listed *listedView
	if digest == "" {
		// An aggregator that reports no digest: derive one from the view
		// itself, so equal views still share a scope.
		if listed, err = r.listTools(ctx, agg, p, server, disc); err != nil {
			return store.Scope{}, false, err
		}
		digest = listed.digest
	}
	if sc, ok := r.known(digest); ok {
		return sc, false, nil
	}
	res, shared, err := r.build(ctx, agg, p, server, disc, digest, listed)
	if err == nil && shared && res.scope.Digest != digest {
		// The build listed its first caller's view, which came back as
		// another view than its Discover named (another replica's, or a
		// catalog or policy change in between): that is the first
		// caller's, not this caller's. This caller lists its own.
		// Not shared again: another first caller's listing could differ
		// anew; the store builds one digest once across callers.
		if listed, err = r.listTools(ctx, agg, p, server, disc); err != nil {
			return store.Scope{}, false, err
		}
		if sc, ok := r.known(listed.digest); ok {
			res, shared = buildResult{scope: sc}, false
		} else {
			ctx, cancel := context.WithTimeout(ctx, buildTimeout)
			res, err = r.buildView(ctx, listed)
			cancel()
			shared = false
		}
	}
	if err != nil {
		return store.Scope{}, false, err
	}
	r.mu.Lock()
	if len(r.byDigest) >= maxScopesByDigest {
		r.byDigest = map[string]store.Scope{}
	}
	r.byDigest[res.scope.Digest] = res.scope
	r.mu.Unlock()
	return res.scope, res.built && !shared, nil
}

// build finds or builds the scope of digest, the view disc named for p
// (listed, when already listed, whose digest is digest). Concurrent first
// searches of one digest (same or different principals) share one build
// here, which lists its first caller's view unless listed is given; other
// replicas are held off by the store's advisory lock. shared reports
// whether the build was another caller's.
func (r *Resolver) build(ctx context.Context, agg aggregatorv1.AggregatorServiceClient, p *commonv1.Principal, server string,
	disc *aggregatorv1.DiscoverResponse, digest string, listed *listedView) (buildResult, bool, error) {
	v, err, shared := r.flight.Do(digest, func() (any, error) {
		// The build serves every caller waiting on it, so one caller
		// going away must not abort it.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), buildTimeout)
		defer cancel()
		sc, err := r.store.LookupScope(ctx, digest)
		if err == nil {
			return buildResult{scope: sc}, nil
		}
		if !errors.Is(err, store.ErrScopeNotFound) {
			return nil, err
		}
		view := listed
		if view == nil {
			if view, err = r.listTools(ctx, agg, p, server, disc); err != nil {
				return nil, err
			}
		}
		// The scope is stored under the digest of the view its pages came
		// from. With load-balanced calls that can be another replica's
		// view than the one Discover described; it is still one whole
		// view, named by its own digest, never a mix (and a waiter whose
		// digest it is not lists its own: resolve).
		if view.digest != digest {
			if sc, ok := r.known(view.digest); ok {
				return buildResult{scope: sc}, nil
			}
		}
		return r.buildView(ctx, view)
	})
	if err != nil {
		return buildResult{}, shared, err
	}
	return v.(buildResult), shared, nil
}

// buildView stores the scope of view, unless the store has it already.
func (r *Resolver) buildView(ctx context.Context, view *listedView) (buildResult, error) {
	start := time.Now()
	sc, built, err := r.store.BuildScope(ctx, view.digest, view.version, view.tools)
	if err != nil {
		return buildResult{}, err
	}
	if built {
		r.builds.Add(1)
		r.log.InfoContext(ctx, "scope built", "tools", len(view.tools), "duration", time.Since(start), "catalog_version", view.version)
	}
	return buildResult{scope: sc, built: built}, nil
}

// known returns the scope found or built here for digest.
func (r *Resolver) known(digest string) (store.Scope, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sc, ok := r.byDigest[digest]
	return sc, ok
}

// Forget drops the principal's cached scope sc in the virtual server
// named server (it vanished from the store: another replica collected
// it), under the principal and under its digest, so that the next Resolve
// builds it again.
func (r *Resolver) Forget(p *commonv1.Principal, server string, sc store.Scope) {
	r.mu.Lock()
	if known, ok := r.byDigest[sc.Digest]; ok && known.ID == sc.ID {
		delete(r.byDigest, sc.Digest)
	}
	r.cache.remove(cacheKey(server, p))
	r.mu.Unlock()
}

// Invalidate drops every cached principal→scope mapping.
func (r *Resolver) Invalidate() {
	r.mu.Lock()
	r.cache = principalCache{}
	r.generation++
	r.mu.Unlock()
}

// Watch follows the aggregator's catalog changes until ctx ends,
// invalidating the cache on every tool change. A broken stream is
// reconnected with backoff, and the cache is invalidated then too, because
// changes may have been missed while disconnected.
func (r *Resolver) Watch(ctx context.Context) {
	const maxBackoff = 10 * time.Second
	backoff := 100 * time.Millisecond
	var lastVersion uint64
	for ctx.Err() == nil {
		err := r.watchOnce(ctx, &lastVersion, func() { backoff = 100 * time.Millisecond })
		r.Invalidate()
		if ctx.Err() != nil {
			return
		}
		r.log.WarnContext(ctx, "catalog watch interrupted; reconnecting", "error", err, "backoff", backoff)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

func (r *Resolver) watchOnce(ctx context.Context, lastVersion *uint64, connected func()) error {
	stream, err := r.agg.WatchCatalog(ctx, &aggregatorv1.WatchCatalogRequest{AllChanges: true})
	if err != nil {
		return err
	}
	for first := true; ; first = false {
		ev, err := stream.Recv()
		if err != nil {
			return fmt.Errorf("receive: %w", err)
		}
		connected()
		// The first message of a stream invalidates too: a scope resolved
		// while the stream was down may have come from a replica still on
		// a policy since changed, which keeps the catalog version and
		// names no change.
		if first || toolsChanged(ev) || ev.GetCatalogVersion() != *lastVersion {
			r.Invalidate()
		}
		*lastVersion = ev.GetCatalogVersion()
	}
}

func toolsChanged(ev *aggregatorv1.WatchCatalogResponse) bool {
	for _, k := range ev.GetChanged() {
		if k == aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS {
			return true
		}
	}
	return false
}
