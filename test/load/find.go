package load

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// FindSpec is one find_tool configuration: Concurrency workers querying
// back to back on the optimizer endpoint (/mcp/optimized) with go-sdk
// Modern clients, as Principals distinct principals.
type FindSpec struct {
	Concurrency int
	// Principals is how many principals (API keys) the queries come from,
	// one session each, at least as many sessions as workers; the
	// workers rotate over the sessions, so every principal's scope is in
	// use throughout the run. 1 on an anonymous cluster is the anonymous
	// principal.
	Principals int
}

// Sessions is the number of sessions the spec opens.
func (f FindSpec) Sessions() int { return max(f.Concurrency, f.Principals) }

// FindRun is one find_tool configuration measured on one catalog.
type FindRun struct {
	Topology Topology
	Spec     FindSpec
	// Run counts queries as calls; its CPU is by role: gateway, indexer,
	// aggregator, postgres and client.
	Run     CallRun
	LoadAvg string
}

// findRoles are the processes find_tool's CPU per query is charged to.
var findRoles = []string{"gateway", "indexer", "aggregator", "postgres"}

// RunFinds measures spec on c for d (or maxQueries queries). Each session
// queries once before the clock starts, so the principal's scope is
// resolved and every connection open; every query must find at least one
// tool.
func RunFinds(ctx context.Context, c *Cluster, spec FindSpec, d time.Duration, maxQueries int) (CallRun, error) {
	return runFinds(ctx, c, spec, d, maxQueries, nil)
}

func runFinds(ctx context.Context, c *Cluster, spec FindSpec, d time.Duration, maxQueries int, started func()) (CallRun, error) {
	if spec.Concurrency < 1 || spec.Principals < 1 {
		return CallRun{}, fmt.Errorf("find_tool needs at least one worker and one principal, got %+v", spec)
	}
	if len(c.Keys) == 0 && spec.Principals > 1 {
		return CallRun{}, fmt.Errorf("%d principals need a cluster with API keys; this gateway runs anonymous", spec.Principals)
	}
	if spec.Principals > max(len(c.Keys), 1) {
		return CallRun{}, fmt.Errorf("%d principals asked for, the cluster has %d keys", spec.Principals, len(c.Keys))
	}
	sessions := make([]*Session, 0, spec.Sessions())
	defer func() {
		for _, s := range sessions {
			s.Close()
		}
	}()
	for i := range spec.Sessions() {
		key := ""
		if len(c.Keys) > 0 {
			key = c.Keys[i%spec.Principals]
		}
		s, _, err := ConnectWith(ctx, c.OptimizedURL, Modern, key)
		if err != nil {
			return CallRun{}, err
		}
		sessions = append(sessions, s)
		if i == 0 {
			// The indexer may still be loading the catalog.
			if err := waitForSearch(ctx, s); err != nil {
				return CallRun{}, err
			}
		}
	}
	query := func(ctx context.Context, s *Session, i int) error {
		q := searchQueries[i%len(searchQueries)]
		hits, err := FindToolHits(ctx, s, q)
		if err == nil && hits == 0 {
			err = fmt.Errorf("find_tool found no tool for %q", q)
		}
		return err
	}
	for i, s := range sessions {
		wctx, cancel := context.WithTimeout(ctx, callTimeout)
		err := query(wctx, s, i)
		cancel()
		if err != nil {
			return CallRun{}, fmt.Errorf("warm-up query: %w", err)
		}
	}
	procs := slices.Concat(c.Services("gateway"), c.Services("indexer"), c.Services("aggregator"))
	return closedLoop{
		sessions: sessions, workers: spec.Concurrency, duration: d, maxOps: maxQueries,
		cpu:     func() map[string]time.Duration { return cpuByRole(procs, c.Postgres) },
		started: started,
		op:      func(ctx context.Context, s *Session, w, k int) error { return query(ctx, s, w+k) },
	}.run(ctx), nil
}
