package store

import (
	"context"
	"time"
)

// RequestStates records the sealed request states (multi-round-trip
// retries) gateways accepted, so that each is accepted once whatever
// gateway replica a retry reaches.
type RequestStates interface {
	// ConsumeRequestState records one use of the state with digest, kept
	// until expiresAt, and reports whether it was the first: of
	// concurrent calls for one digest, through any handle on the same
	// backing store, exactly one gets true.
	ConsumeRequestState(ctx context.Context, digest string, expiresAt time.Time) (first bool, err error)
	// ReleaseRequestState drops the record of digest, so that its next
	// ConsumeRequestState is first again; without one it does nothing.
	ReleaseRequestState(ctx context.Context, digest string) error
}
