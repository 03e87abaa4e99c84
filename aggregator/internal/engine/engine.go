// Package engine is the aggregator's core, independent of gRPC: it keeps
// the backend clients, rebuilds the catalogs (the whole one and each
// virtual server's) on a TTL, on backend list_changed and on health
// changes, probes backend health, filters snapshots per principal with
// Cedar and resolves the backend that owns an item a principal may use. It
// takes new options and a new Cedar policy while it serves (Reconfigure,
// policy.go), routes backends' resource updates to their subscribers, and
// holds the defaults and validation of the aggregator's settings
// (options.go) and its metrics. internal/server serves it as the
// AggregatorService gRPC API.
package engine

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
)

// published is one snapshot as served; superseded is closed when a newer
// snapshot replaces it, which wakes every watcher. policy is the Cedar
// policy its views and decisions are made under (policy.go); builder is
// the one it was built with, whose naming (the ranks that route URIs,
// the global overrides that name tools for the policy) its content
// digest does not cover, so a snapshot of another builder is never kept
// in its place.
type published struct {
	snap       *catalog.Snapshot
	superseded chan struct{}
	policy     *policy
	builder    *catalog.Builder
}

// catalogSet is every catalog as served, by server name ("" for the whole
// catalog); superseded is closed when any of them is replaced, which wakes
// the watchers of all changes. A set is replaced, never changed.
type catalogSet struct {
	byServer   map[string]*published
	superseded chan struct{}
}

// Engine is the aggregator's core, independent of gRPC.
type Engine struct {
	// opts are the options the engine was made with; what Reconfigure can
	// change is read from setup instead.
	opts Options
	log  *slog.Logger

	setup atomic.Pointer[setup]
	// reconfMu serialises Reconfigure, and guards runCtx and listers.
	reconfMu sync.Mutex
	// runCtx is Run's context once it runs: the listers of backends added
	// later run under it.
	runCtx  context.Context
	listers sync.WaitGroup
	// retiring are the clients a reconfiguration took out of service,
	// each closed by its timer once the calls routed to it have had time
	// to end, or when the engine stops.
	retiring map[*backend.Client]*time.Timer

	// listSlots bounds concurrent listings (FanOut).
	listSlots chan struct{}
	// rebuildReq holds a pending request to rebuild the snapshot.
	rebuildReq chan struct{}

	listsMu sync.Mutex
	// lists holds each backend's last successful listing.
	lists map[string]*backend.Lists

	// rebuildMu serialises builds; builders (one per catalog: "" for the
	// whole catalog, then each virtual server's) are guarded by it.
	rebuildMu sync.Mutex
	builders  map[string]*catalog.Builder
	// screen leaves out the listed items whose definitions cannot be
	// read one way, before pinning and every builder; guarded by
	// rebuildMu.
	screen *catalog.Screen

	// current holds every catalog as served.
	current atomic.Pointer[catalogSet]
	ready   atomic.Bool
	// policy is the Cedar policy the next build publishes under; the one
	// in force is the current catalogs' (policy.go).
	policy atomic.Pointer[policy]

	updates updateHub
}

// New builds the engine of opts (OptionsFromConfig) and its backend
// clients. It does not contact any backend.
func New(opts Options) (*Engine, error) {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	e := &Engine{
		opts:       opts,
		log:        opts.Log,
		listSlots:  make(chan struct{}, opts.FanOut),
		rebuildReq: make(chan struct{}, 1),
		lists:      map[string]*backend.Lists{},
		retiring:   map[*backend.Client]*time.Timer{},
		updates:    updateHub{watchers: map[resourceKey]map[watcher]bool{}},
	}
	overrides, err := compileOverrides(opts)
	if err != nil {
		return nil, err
	}
	st := e.newSetup(opts, nil, overrides)
	e.setup.Store(st)
	e.builders = newBuilders(st, e.log)
	e.screen = catalog.NewScreen(e.log, opts.Metrics.definitionRefused)
	e.policy.Store(&policy{authz: opts.Authz})
	empty := &catalogSet{byServer: map[string]*published{}, superseded: make(chan struct{})}
	for name, bd := range e.builders {
		empty.byServer[name] = &published{snap: bd.Build(nil, nil), superseded: make(chan struct{}), policy: e.policy.Load(), builder: bd}
	}
	e.current.Store(empty)
	return e, nil
}

func up(s backend.State) bool { return s == backend.Healthy || s == backend.Degraded }

// Start builds the first snapshot. Under the manual strategy an
// unresolved name conflict is an error that names every conflict; the
// engine is then closed.
func (e *Engine) Start(ctx context.Context) error {
	snap := e.Refresh(ctx)
	e.ready.Store(true)
	if e.setup.Load().naming.Strategy() == catalog.StrategyManual {
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
	e.reconfMu.Lock()
	e.runCtx = ctx
	for _, m := range e.setup.Load().members {
		e.startLister(m)
	}
	e.reconfMu.Unlock()
	var wg sync.WaitGroup
	wg.Go(func() { e.rebuildLoop(ctx) })
	wg.Go(func() { e.healthLoop(ctx) })
	wg.Go(func() { e.opts.Pinning.Run(ctx, e.requestRebuild) })
	wg.Wait()
	e.reconfMu.Lock()
	e.listers.Wait()
	var retired []*backend.Client
	for client, timer := range e.retiring {
		timer.Stop()
		retired = append(retired, client)
	}
	clear(e.retiring)
	e.reconfMu.Unlock()
	e.closeBackends(retired...)
}

// closeBackends closes every backend's client, and retired, together: a
// stdio server that ignores its stdin closing takes seconds to stop, and
// one after another they would outlast a pod's termination grace period.
func (e *Engine) closeBackends(retired ...*backend.Client) {
	var wg sync.WaitGroup
	for _, c := range retired {
		wg.Go(c.Close)
	}
	for _, m := range e.setup.Load().members {
		wg.Go(m.client.Close)
	}
	wg.Wait()
}

// startLister runs m's lister under runCtx; reconfMu is held.
func (e *Engine) startLister(m *member) {
	ctx, stop := context.WithCancel(e.runCtx)
	m.stop = stop
	e.listers.Go(func() { e.lister(ctx, m) })
}

// Trigger asks for every backend to be listed again and the snapshot
// rebuilt, soon.
func (e *Engine) Trigger() {
	for _, m := range e.setup.Load().members {
		e.requestList(m.cfg.Name)
	}
}

// requestList asks for one backend to be listed again (it announced a
// change, or its health changed) and the snapshot rebuilt. Requests that
// arrive while it is being listed coalesce into one more listing.
func (e *Engine) requestList(name string) {
	m := e.setup.Load().member(name)
	if m == nil {
		return
	}
	select {
	case m.listReq <- struct{}{}:
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
func (e *Engine) lister(ctx context.Context, m *member) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.listReq:
		}
		e.list(ctx, m)
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
func (e *Engine) list(ctx context.Context, m *member) {
	b := m.client
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
			if advice := backend.Advice(err); advice != "" {
				e.log.Warn("backend listing failed; backend skipped", "backend", b.Name(), "err", err, "advice", advice)
			} else {
				e.log.Warn("backend listing failed; backend skipped", "backend", b.Name(), "err", err)
			}
		}
		return
	}
	e.listsMu.Lock()
	// A client that a reconfiguration replaced or removed meanwhile lists
	// for nobody.
	if e.setup.Load().member(b.Name()) == m {
		// An unchanged listing keeps the previous one's pointer, so that
		// the builder reuses its conversion and the pinning guard records
		// nothing new: a periodic relisting then costs the listing alone.
		if prev := e.lists[b.Name()]; !prev.Same(l) {
			e.lists[b.Name()] = l
		}
	}
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
		e.fanOut(ctx, func(m *member) {
			b := m.client
			if err := b.Probe(ctx, e.opts.Health.Timeout); err != nil && ctx.Err() == nil {
				e.log.Debug("backend probe failed", "backend", b.Name(), "err", err)
			}
		})
	}
}

// fanOut runs f for every backend, at most FanOut at a time.
func (e *Engine) fanOut(ctx context.Context, f func(*member)) {
	sem := make(chan struct{}, e.opts.FanOut)
	var wg sync.WaitGroup
	for _, b := range e.setup.Load().members {
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
	for _, m := range e.setup.Load().members {
		wg.Go(func() { e.list(ctx, m) })
	}
	wg.Wait()
	return e.build()
}

// build makes every catalog (the whole one and each server's) from the
// latest lists and health, and publishes those whose content or policy
// changed; it returns the whole catalog's current snapshot.
func (e *Engine) build() *catalog.Snapshot {
	e.rebuildMu.Lock()
	defer e.rebuildMu.Unlock()
	start := time.Now()
	pol := e.nextPolicy()
	e.listsMu.Lock()
	lists := maps.Clone(e.lists)
	e.listsMu.Unlock()
	// Items whose definitions could be read two ways (an object naming a
	// member twice), then quarantined tools, are left out here, so they
	// are missing everywhere (pinning; the guard bounds its indexer call).
	lists = e.screen.Lists(lists)
	lists = e.opts.Pinning.Filter(context.Background(), lists)
	down := map[string]bool{}
	for _, m := range e.setup.Load().members {
		if m.client.Status().State == backend.Unhealthy {
			down[m.cfg.Name] = true
		}
	}
	prevSet := e.current.Load()
	prev := prevSet.byServer
	next := make(map[string]*published, len(e.builders))
	var replaced []*published
	for name, bd := range e.builders {
		snap := bd.Build(lists, down)
		old := prev[name]
		if old != nil && snap.SameContent(old.snap) && old.policy == pol && old.builder == bd {
			next[name] = old
			continue
		}
		if name == "" {
			// A server's conflicts are the whole catalog's among fewer
			// backends (reported once, here), and the catalog metrics
			// describe the whole catalog.
			e.reportConflicts(snap.Conflicts)
			e.opts.Metrics.catalogBuilt(snap, time.Since(start))
		}
		next[name] = &published{snap: snap, superseded: make(chan struct{}), policy: pol, builder: bd}
		if old != nil {
			replaced = append(replaced, old)
		}
		e.log.Info("catalog published", "server", name, "version", snap.Version, "tools", len(snap.Tools), "resources", len(snap.Resources),
			"resource_templates", len(snap.Templates), "prompts", len(snap.Prompts), "down", len(down))
	}
	for name, old := range prev {
		if _, kept := next[name]; !kept {
			// A server the configuration no longer has: its watchers
			// wake and find it gone.
			replaced = append(replaced, old)
		}
	}
	if len(replaced) > 0 || len(next) != len(prev) {
		e.current.Store(&catalogSet{byServer: next, superseded: make(chan struct{})})
		// Watchers wake after the new catalogs are in place, so each finds
		// its successor.
		for _, p := range replaced {
			close(p.superseded)
		}
		close(prevSet.superseded)
	}
	return next[""].snap
}

// maxLoggedConflicts bounds the conflicts one report logs one by one; the
// rest are counted, and logged as a number.
const maxLoggedConflicts = 32

// reportConflicts logs and counts conflicts between backends (a published
// catalog's, or one a read met).
func (e *Engine) reportConflicts(cs []catalog.Conflict) {
	for i, c := range cs {
		if i < maxLoggedConflicts {
			e.log.Warn("name conflict", "conflict", c.String())
		}
		e.opts.Metrics.conflict(c)
	}
	if n := len(cs) - maxLoggedConflicts; n > 0 {
		e.log.Warn("more name conflicts, not logged one by one", "count", n)
	}
}

// ReportConflict logs and counts a conflict between backends that a read
// met in a snapshot (catalog.Snapshot.ResourceOwner), as a catalog's own
// conflicts are when it is published.
func (e *Engine) ReportConflict(c catalog.Conflict) { e.reportConflicts([]catalog.Conflict{c}) }

// Snapshot returns the whole catalog's current snapshot and a channel
// closed when it is superseded.
func (e *Engine) Snapshot() (*catalog.Snapshot, <-chan struct{}) {
	snap, superseded, _ := e.ServerSnapshot("")
	return snap, superseded
}

// ServerSnapshot returns the current snapshot of the catalog of server
// ("" for the whole catalog) and a channel closed when it is superseded;
// ErrNotFound for a server that is not configured.
func (e *Engine) ServerSnapshot(server string) (*catalog.Snapshot, <-chan struct{}, error) {
	p, ok := e.current.Load().byServer[server]
	if !ok {
		return nil, nil, ErrNotFound
	}
	return p.snap, p.superseded, nil
}

// AllSnapshots returns the current snapshot of every catalog, by server
// name ("" for the whole catalog), a channel closed when any of them is
// superseded, and the policy the whole catalog was published under (every
// catalog is published again under a new policy, in the same build).
func (e *Engine) AllSnapshots() (map[string]*catalog.Snapshot, <-chan struct{}, PolicyID) {
	set := e.current.Load()
	out := make(map[string]*catalog.Snapshot, len(set.byServer))
	for name, p := range set.byServer {
		out[name] = p.snap
	}
	return out, set.superseded, PolicyID{set.byServer[""].policy}
}

// Instructions are the instructions of server ("" for the whole catalog):
// the server's own, or the aggregator's.
func (e *Engine) Instructions(server string) string {
	st := e.setup.Load()
	if sv, ok := st.servers[server]; ok && sv.Instructions != "" {
		return sv.Instructions
	}
	return st.instructions
}

// PageSizes are the default page size and the largest a caller may ask
// for.
func (e *Engine) PageSizes() (def, maxSize int) {
	st := e.setup.Load()
	return st.pageSize, st.maxPageSize
}

// Backends returns the backend clients in name order.
func (e *Engine) Backends() []*backend.Client {
	members := e.setup.Load().members
	out := make([]*backend.Client, len(members))
	for i, m := range members {
		out[i] = m.client
	}
	return out
}

// Options returns the engine's options, defaults applied.
func (e *Engine) Options() *Options { return &e.opts }

// Log is the engine's logger.
func (e *Engine) Log() *slog.Logger { return e.log }
