package engine

import (
	"reflect"
	"time"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/authz"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/traffic"
)

// Reconfigure applies new options to a running engine without a restart:
// the backends (added, removed, or changed: a backend whose configuration
// changed gets a new client), the naming, the virtual servers, the
// instructions, the page sizes and the Cedar policy (next.Authz, nil
// allowing everything; the new catalogs are published under it in one
// build, policy.go), as OptionsFromConfig translates a
// configuration that config.ValidateAggregator accepted. It is all or
// nothing: options whose tool overrides do not compile change nothing.
// Requests already routed finish on the clients they were routed to;
// every request after it sees the new setup, and the catalogs are rebuilt
// at once, so watchers hear of every change (list_changed).
//
// What an engine is made with and cannot change while it runs — the
// catalog TTL, the fan-out, the health checks, the held-call owner, the
// pinning guard, the bound on each caller's watches, the logger and the
// metrics — is taken from the running engine; a change to
// those is reported in the returned list of option names (they take
// effect at the next restart).
func (e *Engine) Reconfigure(next Options) (needsRestart []string, err error) {
	needsRestart = fixedChanges(&e.opts, &next)
	next.Log, next.Metrics, next.HeldOwner = e.opts.Log, e.opts.Metrics, e.opts.HeldOwner
	next.CatalogTTL, next.FanOut, next.Health = e.opts.CatalogTTL, e.opts.FanOut, e.opts.Health
	next.Pinning, next.MaxWatchesPerCaller, next.Traffic = e.opts.Pinning, e.opts.MaxWatchesPerCaller, e.opts.Traffic
	overrides, err := compileOverrides(next)
	if err != nil {
		return nil, err
	}

	e.reconfMu.Lock()
	defer e.reconfMu.Unlock()
	e.opts.Traffic.Health(traffic.HealthEvent{State: "reload", Detail: "the configuration was reloaded"})
	prev := e.setup.Load()
	st := e.newSetup(next, prev, overrides)

	// The catalogs are rebuilt with the new builders under rebuildMu, so
	// no build mixes the old naming or servers with the new.
	e.rebuildMu.Lock()
	e.setup.Store(st)
	e.builders = newBuilders(st, e.log)
	if !authz.Same(e.policy.Load().authz, next.Authz) {
		e.policy.Store(&policy{authz: next.Authz})
	}
	e.listsMu.Lock()
	var gone []*member
	for _, m := range prev.members {
		if st.member(m.cfg.Name) == m {
			continue
		}
		gone = append(gone, m)
		if st.member(m.cfg.Name) == nil {
			// Removed: its items leave every catalog in the rebuild below.
			// A replaced backend keeps its last listing until its new
			// client lists it (same name, most likely the same tools).
			delete(e.lists, m.cfg.Name)
			e.opts.Metrics.backendRemoved(m.cfg.Name)
		}
	}
	e.listsMu.Unlock()
	e.rebuildMu.Unlock()

	for _, m := range st.members {
		if prev.member(m.cfg.Name) != m && e.runCtx != nil {
			e.startLister(m)
		}
	}
	for _, m := range gone {
		if m.stop != nil {
			m.stop()
		}
		if next := st.member(m.cfg.Name); next != nil {
			// Replaced: the watchers' subscriptions go on on the new
			// client, made at the backend again (the old client's end
			// with it, below).
			next.client.AdoptSubscriptions(m.client)
		}
		// Calls already routed to the old client may still run: it is
		// closed once the longest of them would have ended (a tool's own
		// timeout may be longer than the backend's). A stdio
		// server's process is stopped at once instead, its calls with
		// it: the new one starts now and may need what the old holds (a
		// lock, a port), and a removed server must not keep running, or
		// be started again, for a minute.
		client, grace := m.client, max(m.cfg.Timeout, m.cfg.InputWait)
		for _, set := range prev.overrides {
			grace = max(grace, set.LongestTimeout(m.cfg.Name))
		}
		if client.RunsProcess() {
			grace = 0
		}
		e.retiring[client] = time.AfterFunc(grace, func() {
			e.reconfMu.Lock()
			_, still := e.retiring[client]
			delete(e.retiring, client)
			e.reconfMu.Unlock()
			// Not under reconfMu: a stdio server may take seconds to stop,
			// and the next reload and held calls' retries must not wait.
			if still {
				client.Close()
			}
		})
	}
	e.log.Info("aggregator reconfigured", "backends", len(st.members), "servers", len(st.servers),
		"added_or_changed", len(st.members)-kept(prev, st), "removed_or_replaced", len(gone))
	if len(needsRestart) > 0 {
		e.log.Warn("configuration changes that need a restart were not applied", "keys", needsRestart)
	}
	e.build()
	// The new clients are listed now; the build above already shows what
	// removals and the new servers change.
	for _, m := range st.members {
		if prev.member(m.cfg.Name) != m {
			e.requestList(m.cfg.Name)
		}
	}
	return needsRestart, nil
}

// kept counts the members st took over from prev.
func kept(prev, st *setup) int {
	n := 0
	for _, m := range st.members {
		if prev.member(m.cfg.Name) == m {
			n++
		}
	}
	return n
}

// fixedChanges names the options that differ between the running engine's
// and next's but cannot change while the engine runs.
func fixedChanges(running, next *Options) []string {
	var out []string
	if next.CatalogTTL != running.CatalogTTL {
		out = append(out, "aggregator.catalogTTL")
	}
	if next.FanOut != running.FanOut {
		out = append(out, "aggregator.fanOut")
	}
	if !reflect.DeepEqual(next.Health, running.Health) {
		out = append(out, "aggregator.health")
	}
	if next.MaxWatchesPerCaller != running.MaxWatchesPerCaller {
		out = append(out, "aggregator.maxWatchesPerCaller")
	}
	return out
}

// Holder is the client that holds the call state names, of the backend
// whose client in service is b: b, or a client of the same backend a
// reload retired (a changed header, a rotated secret), which keeps the
// calls held on it until it closes, their inputWait elapsed. A retry
// finds the call it answers either way.
func (e *Engine) Holder(b *backend.Client, state string) *backend.Client {
	if b.Holds(state) {
		return b
	}
	e.reconfMu.Lock()
	defer e.reconfMu.Unlock()
	for c := range e.retiring {
		if c.Name() == b.Name() && c.Holds(state) {
			return c
		}
	}
	return b
}
