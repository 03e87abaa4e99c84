package console

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// maxBuckets is the most bucket states the page asks for.
const maxBuckets = 500

// RateLimitBucket is the state of one rate-limit bucket.
type RateLimitBucket struct {
	// Key is the bucket's key: the limit's name and the value it counts.
	Key string
	// Tokens is what the bucket holds now (it refills at RatePerSecond up
	// to Burst).
	Tokens        float64
	RatePerSecond float64
	Burst         uint32
	// Updated is when tokens were last taken.
	Updated time.Time
	// Configured is false for a bucket of a limit the indexer's
	// configuration no longer has: its rate and burst are not known.
	Configured bool
}

// bucketRow is a bucket as the page shows it: its rate in the unit its
// limit was configured in.
type bucketRow struct {
	RateLimitBucket
	Rate string
}

// RateLimitState reads the buckets' state from the indexer (its
// ListRateLimitBuckets RPC). An implementation whose indexer does not
// have the RPC answers a status with code Unimplemented: the page then
// shows the state as not available.
type RateLimitState interface {
	RateLimitBuckets(ctx context.Context, limit int) ([]RateLimitBucket, error)
}

// limitRow is one configured limit.
type limitRow struct {
	config.RateLimit
	Methods, Match string
}

type rateLimitsData struct {
	OnUnavailable string
	Limits        []limitRow
	Buckets       []bucketRow
	// StateNote says why the state is not shown.
	StateNote string
}

// rateLimitsPage shows the configured limits (rateLimits) and the state
// of their buckets.
func (c *Console) rateLimitsPage(w http.ResponseWriter, r *http.Request, s session) {
	rl := c.live.Load().rateLimits
	d := rateLimitsData{OnUnavailable: rl.EffectiveOnUnavailable()}
	for _, l := range rl.Limits {
		d.Limits = append(d.Limits, limitRow{RateLimit: l, Methods: strings.Join(l.EffectiveMethods(), ", "), Match: describeMatch(l.Match)})
	}
	p := page{Title: "Rate limits", Active: "ratelimits", Session: &s, Data: &d}
	switch {
	case c.deps.RateLimits == nil:
		d.StateNote = "Bucket state is not available from this indexer."
	default:
		ctx, cancel := rpcContext(r)
		defer cancel()
		buckets, err := c.deps.RateLimits.RateLimitBuckets(ctx, maxBuckets)
		switch {
		case status.Code(err) == codes.Unimplemented || errors.Is(err, errors.ErrUnsupported):
			d.StateNote = "Bucket state is not available from this indexer."
		case err != nil:
			_, d.StateNote, _ = rpcFailure("ListRateLimitBuckets", err)
		default:
			for _, b := range buckets {
				d.Buckets = append(d.Buckets, bucketRow{RateLimitBucket: b, Rate: describeRate(b, rl)})
			}
		}
	}
	c.render(w, r, http.StatusOK, "ratelimits", p)
}

// describeMatch writes a limit's match as text.
func describeMatch(m config.RateLimitMatch) string {
	var parts []string
	add := func(what string, v []string) {
		if len(v) > 0 {
			parts = append(parts, what+" "+strings.Join(v, ", "))
		}
	}
	add("principals", m.Principals)
	add("groups", m.Groups)
	add("tools", m.Tools)
	add("backends", m.Backends)
	add("servers", m.Servers)
	if len(parts) == 0 {
		return "everything"
	}
	return strings.Join(parts, "; ")
}

// describeRate writes a bucket's rate as its limit was configured ("1/h",
// not 0.000/s) when the console's configuration has the limit at that
// rate; otherwise in the largest unit that keeps it at least one ("<n>/s",
// "/m" or "/h").
func describeRate(b RateLimitBucket, rl config.RateLimits) string {
	name, _, _ := strings.Cut(b.Key, "|")
	for _, l := range rl.Limits {
		if r, err := config.ParseRate(l.Rate); err == nil && l.Name == name && math.Abs(r-b.RatePerSecond) <= 1e-9*r {
			return l.Rate
		}
	}
	v, unit := b.RatePerSecond, "s"
	if v < 1 {
		v, unit = v*60, "m"
	}
	if v < 1 {
		v, unit = v*60, "h"
	}
	return strconv.FormatFloat(v, 'g', 4, 64) + "/" + unit
}
