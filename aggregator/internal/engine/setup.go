package engine

import (
	"context"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/override"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/traffic"
	"github.com/switchboard-mcp/switchboard/services/config"
)

// member is one configured backend: its client, and the channel its
// lister waits on.
type member struct {
	cfg    backend.Config
	client *backend.Client
	// listReq holds a pending request to list the backend again; each
	// backend is listed by its own goroutine, so a slow or hanging backend
	// never delays another backend's change.
	listReq chan struct{}
	// stop ends the member's lister (nil until it runs).
	stop context.CancelFunc
}

// setup is what a reconfiguration replaces, all at once: the backends and
// what serves them. It is replaced, never changed.
type setup struct {
	members []*member // in name order
	byName  map[string]*member
	servers map[string]config.Server
	naming  *catalog.Naming
	// overrides are the compiled tool overrides of each catalog, by server
	// ("" for the whole catalog: the global ones).
	overrides map[string]*override.Set
	// instructions, pageSize and maxPageSize as Options says.
	instructions          string
	pageSize, maxPageSize int
}

// newSetup makes the setup of opts with its compiled tool overrides,
// keeping the members of prev whose backend configuration is unchanged
// (their clients, sessions and listers) and making new ones for the rest.
// Every backend's held calls name opts.HeldOwner; every backend's client
// knows the hidden argument values the overrides inject into its calls,
// which it keeps out of what the backend sends back (a change to them
// makes a new client).
func (e *Engine) newSetup(opts Options, prev *setup, overrides map[string]*override.Set) *setup {
	st := &setup{byName: map[string]*member{}, servers: map[string]config.Server{}, naming: opts.Naming,
		instructions: opts.Instructions, pageSize: opts.PageSize, maxPageSize: opts.MaxPageSize, overrides: overrides}
	cfgs := slices.Clone(opts.Backends)
	slices.SortFunc(cfgs, func(a, b backend.Config) int { return strings.Compare(a.Name, b.Name) })
	for _, c := range cfgs {
		c.HeldOwner = opts.HeldOwner
		c.Hidden = hiddenStrings(overrides, c.Name)
		m := prev.member(c.Name)
		if m == nil || !reflect.DeepEqual(m.cfg, c) {
			m = &member{cfg: c, client: e.newClient(c), listReq: make(chan struct{}, 1)}
		}
		st.members = append(st.members, m)
		st.byName[c.Name] = m
	}
	for _, sv := range opts.Servers {
		st.servers[sv.Name] = sv
	}
	return st
}

// member is the member named name; nil for none (or a nil setup).
func (st *setup) member(name string) *member {
	if st == nil {
		return nil
	}
	return st.byName[name]
}

// newBuilders makes a builder for every catalog of st.
func newBuilders(st *setup, log *slog.Logger) map[string]*catalog.Builder {
	bs := map[string]*catalog.Builder{"": catalog.NewSpecBuilder(st.naming, catalog.Spec{Overrides: st.overrides[""]}, log)}
	for name, sv := range st.servers {
		bs[name] = catalog.NewSpecBuilder(st.naming, catalog.ServerSpec(sv, st.overrides[name], st.overrides[""]), log)
	}
	return bs
}

// hiddenStrings are the strings the hidden arguments of every catalog's
// overrides inject into backend's calls, sorted, without repeats; nil for
// none.
func hiddenStrings(overrides map[string]*override.Set, backend string) []string {
	var out []string
	for _, set := range overrides {
		out = append(out, set.HiddenStrings(backend)...)
	}
	if len(out) == 0 {
		return nil
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// compileOverrides compiles the tool overrides of every catalog: the
// global ones for the whole catalog, and each server's over them.
func compileOverrides(opts Options) (map[string]*override.Set, error) {
	out := map[string]*override.Set{}
	global, err := override.Compile(opts.ToolOverrides, nil)
	if err != nil {
		return nil, fmt.Errorf("aggregator.toolOverrides: %w", err)
	}
	out[""] = global
	for _, sv := range opts.Servers {
		set, err := override.Compile(opts.ToolOverrides, sv.ToolOverrides)
		if err != nil {
			return nil, fmt.Errorf("servers %q toolOverrides: %w", sv.Name, err)
		}
		out[sv.Name] = set
	}
	return out, nil
}

// newClient makes the client of one backend, wired to the engine: its
// list_changed and health changes ask for a new listing, its resource
// updates reach the watchers.
func (e *Engine) newClient(c backend.Config) *backend.Client {
	b := backend.New(c, func(name string) {
		e.log.Debug("backend list changed", "backend", name)
		e.requestList(name)
	}, e.log)
	b.OnResourceUpdated(func(uri string) { e.resourceUpdated(c.Name, uri) })
	b.SetHealthPolicy(backend.HealthPolicy{
		DegradedAfter:  e.opts.Health.DegradedThreshold,
		UnhealthyAfter: e.opts.Health.UnhealthyThreshold,
	}, func(prev, now backend.State, listed bool) {
		e.log.Info("backend health changed", "backend", c.Name, "from", prev.String(), "to", now.String())
		if e.inService(b) {
			// The series is the backend's, whose client is in service.
			e.opts.Metrics.backendState(c.Name, now)
		}
		e.opts.Traffic.Health(traffic.HealthEvent{Backend: c.Name, State: now.String(), Previous: prev.String(), Detail: "was " + prev.String()})
		// A backend that a probe found up again may bring items, one
		// going unhealthy hides them (its "listing" is skipped, the
		// rebuild hides it). Moving between healthy and degraded
		// changes nothing, and a listing that found the backend up is
		// followed by a rebuild anyway.
		if !(up(prev) && up(now)) && !listed {
			e.requestList(c.Name)
		}
	})
	return b
}

// inService reports whether b is the client in service of its backend,
// not one a reload retired (removed, or replaced under the same name).
func (e *Engine) inService(b *backend.Client) bool {
	st := e.setup.Load()
	if st == nil {
		return false
	}
	m := st.member(b.Name())
	return m != nil && m.client == b
}
