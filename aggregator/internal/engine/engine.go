// Package engine is the aggregator's core, independent of gRPC: it keeps
// the backend clients, rebuilds the catalog snapshot on a TTL, on backend
// list_changed and on health changes, probes backend health, filters
// snapshots per principal with Cedar and resolves the backend that owns an
// item a principal may use. internal/server serves it as the
// AggregatorService gRPC API.
package engine

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
)

// published is one snapshot as served; superseded is closed when a newer
// snapshot replaces it, which wakes every watcher. policy is the Cedar
// policy its views and decisions are made under (policy.go).
type published struct {
	snap       *catalog.Snapshot
	superseded chan struct{}
	policy     *policy
}

// Engine is the aggregator's core, independent of gRPC.
type Engine struct {
	opts     Options
	log      *slog.Logger
	backends []*backend.Client // in name order
	byName   map[string]*backend.Client

	// listReq holds, per backend, a pending request to list it again; each
	// backend is listed by its own goroutine, so a slow or hanging backend
	// never delays another backend's change.
	listReq map[string]chan struct{}
	// listSlots bounds concurrent listings (FanOut).
	listSlots chan struct{}
	// rebuildReq holds a pending request to rebuild the snapshot.
	rebuildReq chan struct{}

	listsMu sync.Mutex
	// lists holds each backend's last successful listing.
	lists map[string]*backend.Lists

	// rebuildMu serialises builds; builder is guarded by it.
	rebuildMu sync.Mutex
	builder   *catalog.Builder

	current atomic.Pointer[published]
	ready   atomic.Bool
	// policy is the Cedar policy in force (policy.go).
	policy atomic.Pointer[policy]

	updates updateHub
}

// New validates the options and builds the backend clients. It does not
// contact any backend.
func New(opts Options) (*Engine, error) {
	opts.applyDefaults()
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	e := &Engine{
		opts:       opts,
		log:        opts.Log,
		byName:     map[string]*backend.Client{},
		listReq:    map[string]chan struct{}{},
		listSlots:  make(chan struct{}, opts.FanOut),
		rebuildReq: make(chan struct{}, 1),
		builder:    catalog.NewBuilder(opts.Naming, opts.Log),
		lists:      map[string]*backend.Lists{},
		updates:    updateHub{watchers: map[resourceKey]map[chan<- string]struct{}{}},
	}
	cfgs := slices.Clone(opts.Backends)
	slices.SortFunc(cfgs, func(a, b backend.Config) int { return strings.Compare(a.Name, b.Name) })
	for _, c := range cfgs {
		b := backend.New(c, func(name string) {
			e.log.Debug("backend list changed", "backend", name)
			e.requestList(name)
		}, e.log)
		b.OnResourceUpdated(func(uri string) { e.resourceUpdated(c.Name, uri) })
		b.SetHealthPolicy(backend.HealthPolicy{
			DegradedAfter:  opts.Health.DegradedThreshold,
			UnhealthyAfter: opts.Health.UnhealthyThreshold,
		}, func(prev, now backend.State, listed bool) {
			e.log.Info("backend health changed", "backend", c.Name, "from", prev.String(), "to", now.String())
			opts.Metrics.backendState(c.Name, now)
			// A backend that a probe found up again may bring items, one
			// going unhealthy hides them (its "listing" is skipped, the
			// rebuild hides it). Moving between healthy and degraded
			// changes nothing, and a listing that found the backend up is
			// followed by a rebuild anyway.
			if !(up(prev) && up(now)) && !listed {
				e.requestList(c.Name)
			}
		})
		e.backends = append(e.backends, b)
		e.byName[c.Name] = b
		e.listReq[c.Name] = make(chan struct{}, 1)
	}
	e.policy.Store(&policy{authz: opts.Authz})
	empty := catalog.Build(opts.Naming, nil, nil, e.log)
	e.current.Store(&published{snap: empty, superseded: make(chan struct{}), policy: e.policy.Load()})
	return e, nil
}

func up(s backend.State) bool { return s == backend.Healthy || s == backend.Degraded }

// Start builds the first snapshot. Under the manual strategy an
// unresolved name conflict is an error that names every conflict; the
// engine is then closed.
func (e *Engine) Start(ctx context.Context) error {
	snap := e.Refresh(ctx)
	e.ready.Store(true)
	if e.opts.Naming.Strategy() == catalog.StrategyManual {
		var unresolved []string
		for _, c := range snap.Conflicts {
			if c.Kind == catalog.KindTools && c.Winner == "" {
				unresolved = append(unresolved, c.String())
			}
		}
		if len(unresolved) > 0 {
			e.closeBackends()
			return fmt.Errorf("unresolved tool name conflicts (add overrides): %s", strings.Join(unresolved, "; "))
		}
	}
	return nil
}

// Ready reports whether the first catalog build was attempted.
func (e *Engine) Ready() bool { return e.ready.Load() }

// Run refreshes the catalog and probes health until ctx is done, then
// closes the backend sessions.
func (e *Engine) Run(ctx context.Context) {
	var wg sync.WaitGroup
	for _, b := range e.backends {
		wg.Go(func() { e.lister(ctx, b) })
	}
	wg.Go(func() { e.rebuildLoop(ctx) })
	wg.Go(func() { e.healthLoop(ctx) })
	wg.Wait()
	e.closeBackends()
}

func (e *Engine) closeBackends() {
	for _, b := range e.backends {
		b.Close()
	}
}

// Trigger asks for every backend to be listed again and the snapshot
// rebuilt, soon.
func (e *Engine) Trigger() {
	for _, b := range e.backends {
		e.requestList(b.Name())
	}
}

// requestList asks for one backend to be listed again (it announced a
// change, or its health changed) and the snapshot rebuilt. Requests that
// arrive while it is being listed coalesce into one more listing.
func (e *Engine) requestList(name string) {
	select {
	case e.listReq[name] <- struct{}{}:
	default:
	}
}

func (e *Engine) requestRebuild() {
	select {
	case e.rebuildReq <- struct{}{}:
	default:
	}
}

// lister lists one backend whenever asked, then asks for a rebuild.
func (e *Engine) lister(ctx context.Context, b *backend.Client) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-e.listReq[b.Name()]:
		}
		e.list(ctx, b)
		e.requestRebuild()
	}
}

// rebuildLoop rebuilds the snapshot when a listing asks for it, and asks
// for every backend to be listed once per catalog TTL.
func (e *Engine) rebuildLoop(ctx context.Context) {
	ttl := time.NewTicker(e.opts.CatalogTTL)
	defer ttl.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ttl.C:
			e.Trigger()
		case <-e.rebuildReq:
			e.build()
		}
	}
}

// list lists a backend that is not unhealthy, within the fan-out bound,
// and keeps the result. A backend that fails to list keeps its previous
// lists until its failures make it unhealthy, which hides its items.
func (e *Engine) list(ctx context.Context, b *backend.Client) {
	if b.Status().State == backend.Unhealthy {
		return
	}
	select {
	case e.listSlots <- struct{}{}:
	case <-ctx.Done():
		return
	}
	l, err := b.ListAll(ctx)
	<-e.listSlots
	if err != nil {
		if ctx.Err() == nil {
			e.log.Warn("backend listing failed; backend skipped", "backend", b.Name(), "err", err)
		}
		return
	}
	e.listsMu.Lock()
	e.lists[b.Name()] = l
	e.listsMu.Unlock()
}

func (e *Engine) healthLoop(ctx context.Context) {
	t := time.NewTicker(e.opts.Health.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		e.fanOut(ctx, func(b *backend.Client) {
			if err := b.Probe(ctx, e.opts.Health.Timeout); err != nil && ctx.Err() == nil {
				e.log.Debug("backend probe failed", "backend", b.Name(), "err", err)
			}
		})
	}
}

// fanOut runs f for every backend, at most FanOut at a time.
func (e *Engine) fanOut(ctx context.Context, f func(*backend.Client)) {
	sem := make(chan struct{}, e.opts.FanOut)
	var wg sync.WaitGroup
	for _, b := range e.backends {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			wg.Wait()
			return
		}
		wg.Go(func() {
			defer func() { <-sem }()
			f(b)
		})
	}
	wg.Wait()
}

// Refresh lists every backend now, in parallel within the fan-out bound,
// and rebuilds the snapshot; it returns the current snapshot.
func (e *Engine) Refresh(ctx context.Context) *catalog.Snapshot {
	var wg sync.WaitGroup
	for _, b := range e.backends {
		wg.Go(func() { e.list(ctx, b) })
	}
	wg.Wait()
	return e.build()
}

// build makes a snapshot from the latest lists and health, and publishes
// it if its content or the policy changed; it returns the current
// snapshot.
func (e *Engine) build() *catalog.Snapshot {
	e.rebuildMu.Lock()
	defer e.rebuildMu.Unlock()
	start := time.Now()
	pol := e.currentPolicy()
	e.listsMu.Lock()
	lists := maps.Clone(e.lists)
	e.listsMu.Unlock()
	down := map[string]bool{}
	for _, b := range e.backends {
		if b.Status().State == backend.Unhealthy {
			down[b.Name()] = true
		}
	}
	snap := e.builder.Build(lists, down)
	for _, c := range snap.Conflicts {
		e.log.Warn("name conflict", "conflict", c.String())
	}
	prev := e.current.Load()
	if snap.SameContent(prev.snap) && prev.policy == pol {
		return prev.snap
	}
	e.current.Store(&published{snap: snap, superseded: make(chan struct{}), policy: pol})
	close(prev.superseded)
	e.opts.Metrics.catalogBuilt(snap, time.Since(start))
	e.log.Info("catalog published", "version", snap.Version, "tools", len(snap.Tools), "resources", len(snap.Resources),
		"resource_templates", len(snap.Templates), "prompts", len(snap.Prompts), "down", len(down))
	return snap
}

// Snapshot returns the current snapshot and a channel closed when it is
// superseded.
func (e *Engine) Snapshot() (*catalog.Snapshot, <-chan struct{}) {
	p := e.current.Load()
	return p.snap, p.superseded
}

// Backends returns the backend clients in name order.
func (e *Engine) Backends() []*backend.Client { return e.backends }

// Options returns the engine's options, defaults applied.
func (e *Engine) Options() *Options { return &e.opts }

// Log is the engine's logger.
func (e *Engine) Log() *slog.Logger { return e.log }
