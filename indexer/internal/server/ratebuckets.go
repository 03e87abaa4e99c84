package server

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/protobuf/types/known/timestamppb"

	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/ratelimit"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// Bounds of one ListRateLimitBuckets (indexer.proto).
const (
	defaultRateBucketPage = 100
	maxRateBucketPage     = 1000
	maxRateLimitNameBytes = 128
)

// ListRateLimitBuckets pages through the stored rate-limit buckets, for
// operators only. The page token is the last key of the previous page.
func (s *Server) ListRateLimitBuckets(ctx context.Context, req *indexerv1.ListRateLimitBucketsRequest) (*indexerv1.ListRateLimitBucketsResponse, error) {
	resp, err := s.listRateLimitBuckets(ctx, req)
	if err != nil {
		return nil, s.toStatus(ctx, "ListRateLimitBuckets", err)
	}
	return resp, nil
}

func (s *Server) listRateLimitBuckets(ctx context.Context, req *indexerv1.ListRateLimitBucketsRequest) (*indexerv1.ListRateLimitBucketsResponse, error) {
	if err := s.checkReady(); err != nil {
		return nil, err
	}
	size, err := pageSize(req.GetPageSize(), defaultRateBucketPage, maxRateBucketPage)
	if err != nil {
		return nil, err
	}
	name := req.GetLimit()
	if len(name) > maxRateLimitNameBytes || !utf8.ValidString(name) || strings.ContainsAny(name, "|\x00") {
		return nil, invalidArgument(fmt.Sprintf("limit: a limit's name, at most %d bytes of UTF-8 without | or NUL", maxRateLimitNameBytes))
	}
	after := ""
	if tok := req.GetPageToken(); tok != "" {
		raw, err := base64.RawURLEncoding.DecodeString(tok)
		// A key reaches PostgreSQL as text: UTF-8 without NUL, as every
		// token this RPC returns is.
		if len(tok) > 2*maxRateKeyBytes || err != nil || len(raw) == 0 || !utf8.Valid(raw) || bytes.IndexByte(raw, 0) >= 0 {
			return nil, invalidArgument("page_token is not one this RPC returned")
		}
		after = string(raw)
	}
	// One more than the page tells whether another page follows.
	buckets, readAt, err := s.Store.ListRateBuckets(ctx, name, after, size+1)
	if err != nil {
		return nil, err
	}
	resp := &indexerv1.ListRateLimitBucketsResponse{ReadAt: timestamppb.New(readAt)}
	if len(buckets) > size {
		buckets = buckets[:size]
		resp.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(buckets[size-1].Key))
	}
	var limits *ratelimit.Set
	if s.Limiter != nil {
		limits = s.Limiter.Limits()
	}
	resp.Buckets = make([]*indexerv1.RateLimitBucket, len(buckets))
	for i, b := range buckets {
		resp.Buckets[i] = rateBucketProto(b, limits, readAt)
	}
	return resp, nil
}

// rateBucketProto is one stored bucket with its key split, and with the
// tokens it holds now where limits configures its limit.
func rateBucketProto(b store.RateBucket, limits *ratelimit.Set, readAt time.Time) *indexerv1.RateLimitBucket {
	p := &indexerv1.RateLimitBucket{Key: b.Key, Tokens: b.Tokens, LastGranted: uint32(max(0, b.Granted)),
		UpdatedAt: timestamppb.New(b.UpdatedAt), FullAt: timestamppb.New(b.FullAt)}
	// "<limit>|<per>|<value>": a limit's name and per hold no "|"; the
	// value may (a tool's name, a subject).
	parts := strings.SplitN(b.Key, "|", 3)
	if len(parts) == 3 {
		p.Limit, p.Per, p.Value = parts[0], parts[1], parts[2]
	}
	if rate, burst, ok := limits.Configured(p.Limit); ok && p.Limit != "" {
		p.Configured, p.RatePerSecond, p.Burst = true, rate, uint32(burst)
		p.TokensNow, _, _ = ratelimit.Take(b.Tokens, b.UpdatedAt, readAt, rate, burst, 0)
	}
	return p
}
