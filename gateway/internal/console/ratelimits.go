package console

import (
	"context"
	"errors"
	"html/template"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// maxBuckets is the most bucket states one page shows; a link leads to
// the next ones.
const maxBuckets = 500

// maxBucketTokenBytes bounds a page token the page passes on (the RPC's
// tokens are a bucket key, at most 1 KiB, in base64).
const maxBucketTokenBytes = 2048

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

// BucketQuery asks for a page of buckets in key order.
type BucketQuery struct {
	// Limit is the name of the limit whose buckets are asked for; empty
	// for every limit's.
	Limit string
	// After is the Next of the previous page; empty for the first.
	After string
	// Size is the most buckets the page holds.
	Size int
}

// RateLimitState reads the buckets' state from the indexer (its
// ListRateLimitBuckets RPC). An implementation whose indexer does not
// have the RPC answers a status with code Unimplemented: the page then
// shows the state as not available. Next is empty on the last page.
type RateLimitState interface {
	RateLimitBuckets(ctx context.Context, q BucketQuery) (buckets []RateLimitBucket, next string, err error)
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
	// Shown is the limit whose buckets are shown, empty for every
	// limit's; Next links to the buckets after these, if any.
	Shown string
	Next  template.URL
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
	q := r.URL.Query()
	d.Shown = q.Get("limit")
	code := http.StatusOK
	switch {
	case c.deps.RateLimits == nil:
		d.StateNote = "Bucket state is not available from this indexer."
	case d.Shown != "" && !slices.ContainsFunc(rl.Limits, func(l config.RateLimit) bool { return l.Name == d.Shown }):
		code, d.StateNote, d.Shown = http.StatusBadRequest, "No rate limit of that name is configured.", ""
	case len(q.Get("after")) > maxBucketTokenBytes:
		code, d.StateNote = http.StatusBadRequest, "The page asked for is not one this page links to."
	default:
		ctx, cancel := rpcContext(r)
		defer cancel()
		buckets, next, err := c.deps.RateLimits.RateLimitBuckets(ctx, BucketQuery{Limit: d.Shown, After: q.Get("after"), Size: maxBuckets})
		switch {
		case status.Code(err) == codes.Unimplemented || errors.Is(err, errors.ErrUnsupported):
			d.StateNote = "Bucket state is not available from this indexer."
		case status.Code(err) == codes.InvalidArgument:
			code, d.StateNote = http.StatusBadRequest, "The page asked for is not one this page links to."
		case err != nil:
			_, d.StateNote, _ = rpcFailure("ListRateLimitBuckets", err)
		default:
			for _, b := range buckets {
				d.Buckets = append(d.Buckets, bucketRow{RateLimitBucket: b, Rate: describeRate(b, rl)})
			}
			if next != "" {
				v := url.Values{"after": {next}}
				if d.Shown != "" {
					v.Set("limit", d.Shown)
				}
				d.Next = template.URL("/console/ratelimits?" + v.Encode())
			}
		}
	}
	c.render(w, r, code, "ratelimits", p)
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
