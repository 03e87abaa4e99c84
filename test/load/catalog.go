package load

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// WalkRun is one timed walk over every tools/list page.
type WalkRun struct {
	Took         time.Duration
	Tools, Pages int
	Bytes        int64
}

// TimedWalk walks every page of s and checks the tool count.
func TimedWalk(ctx context.Context, s *Session, wantTools int) (WalkRun, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*callTimeout)
	defer cancel()
	before := s.BytesReceived()
	start := time.Now()
	tools, pages, err := Walk(ctx, s)
	run := WalkRun{Took: time.Since(start), Tools: tools, Pages: pages, Bytes: s.BytesReceived() - before}
	if err != nil {
		return run, err
	}
	if tools != wantTools {
		return run, fmt.Errorf("listed %d tools, want %d", tools, wantTools)
	}
	return run, nil
}

// CatalogRun is W2 and W3 on one side of a fresh cluster in one era.
type CatalogRun struct {
	ColdConnect time.Duration
	ColdWalk    WalkRun
	// RepeatWalk is a second walk on the cold session. go-sdk answers it
	// from its client-side cache when the server advertised ttlMs
	// (Modern only), so it shows what a long-lived client pays.
	RepeatWalk time.Duration
	// WarmWalks are walks on fresh sessions (connect not timed), which
	// no client cache can answer: the servers' warm cost.
	WarmWalks []time.Duration
	// Connects are the connects of fresh sessions after the first.
	Connects []time.Duration
}

// WarmWalk is the median warm walk.
func (r *CatalogRun) WarmWalk() time.Duration { return Median(slices.Clone(r.WarmWalks)) }

// ConnectMedian is the median connect.
func (r *CatalogRun) ConnectMedian() time.Duration { return Median(slices.Clone(r.Connects)) }

// ConnectP90 is the 90th percentile connect.
func (r *CatalogRun) ConnectP90() time.Duration {
	d := slices.Clone(r.Connects)
	slices.Sort(d)
	return Percentile(d, 0.9)
}

// RunCatalog measures a fresh cluster c in era e: the first connect and
// walk through Switchboard and directly (cold) and a repeat walk on that
// session, then walks on walks fresh sessions and connects fresh sessions
// connects times, alternating between the two sides so that a change in
// the machine's load hits both alike.
func RunCatalog(ctx context.Context, c *Cluster, e Era, walks, connects int) (sb, direct CatalogRun, err error) {
	sides := []struct {
		url string
		run *CatalogRun
	}{{url: c.GatewayURL, run: &sb}, {url: c.DirectURL, run: &direct}}
	want := c.Topology.Tools()
	for _, s := range sides {
		sess, took, err := connectOnce(ctx, s.url, e, c.firstKey())
		if err != nil {
			return sb, direct, err
		}
		s.run.ColdConnect = took
		s.run.ColdWalk, err = TimedWalk(ctx, sess, want)
		if err == nil {
			var repeat WalkRun
			repeat, err = TimedWalk(ctx, sess, want)
			s.run.RepeatWalk = repeat.Took
		}
		sess.Close()
		if err != nil {
			return sb, direct, fmt.Errorf("walk of %s: %w", s.url, err)
		}
	}
	for range walks {
		for _, s := range sides {
			sess, _, err := connectOnce(ctx, s.url, e, c.firstKey())
			if err != nil {
				return sb, direct, err
			}
			w, err := TimedWalk(ctx, sess, want)
			sess.Close()
			if err != nil {
				return sb, direct, fmt.Errorf("warm walk of %s: %w", s.url, err)
			}
			s.run.WarmWalks = append(s.run.WarmWalks, w.Took)
		}
	}
	for range connects {
		for _, s := range sides {
			sess, took, err := connectOnce(ctx, s.url, e, c.firstKey())
			if err != nil {
				return sb, direct, err
			}
			sess.Close()
			s.run.Connects = append(s.run.Connects, took)
		}
	}
	return sb, direct, nil
}

func connectOnce(ctx context.Context, url string, e Era, key string) (*Session, time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	return ConnectWith(ctx, url, e, key)
}
