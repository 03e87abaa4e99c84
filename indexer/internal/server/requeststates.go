package server

import (
	"context"
	"errors"
	"time"

	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/ratelimit"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// maxRequestStateTTL bounds how far ahead a request state record may
// expire: gateways seal states for ten minutes, and a record outliving
// its state would only take space.
const maxRequestStateTTL = time.Hour

// maxRequestStatesPerCaller bounds the live request state records one
// caller that is not an operator has made through this replica (a
// gateway records one per retry of a multi-round-trip request; every
// gateway may share one credential), so that a credential that is misused
// cannot fill the table: past it ConsumeRequestState is
// RESOURCE_EXHAUSTED until some expire, and the gateway refuses the retry
// for now.
const maxRequestStatesPerCaller = 100_000

// maxRequestStatesPerPrincipal bounds the live records one principal's
// retries have made through one caller and this replica: every principal
// behind a gateway shares its credential, so without a share of their
// own one principal's retries could use up the caller's bound and have
// everyone else's refused until they expire. Once half the caller's bound
// is used a principal's share shrinks (ratelimit.FairShare).
const maxRequestStatesPerPrincipal = maxRequestStatesPerCaller / 10

// errTooManyRequestStates: the caller holds as many live request state
// records as it may; errTooManyPrincipalRequestStates: the principal does.
var (
	errTooManyRequestStates          = errors.New("too many live request state records for this caller")
	errTooManyPrincipalRequestStates = errors.New("too many live request state records for this principal")
)

// ConsumeRequestState records one use of a gateway's sealed request state
// and says whether it was the first, across every replica. A first use
// (a record made) counts against the caller's bound until the record
// expires; a replay makes none and counts nothing.
func (s *Server) ConsumeRequestState(ctx context.Context, req *indexerv1.ConsumeRequestStateRequest) (*indexerv1.ConsumeRequestStateResponse, error) {
	err := s.checkReady()
	if err == nil && validDigest(req.GetStateDigest()) != nil {
		err = invalidArgument("state_digest must be a hex SHA-256 (64 characters)")
	}
	at := req.GetExpiresAt()
	switch {
	case err != nil:
	case at == nil:
		err = invalidArgument("expires_at is required")
	case at.CheckValid() != nil:
		err = invalidArgument("expires_at is not a valid timestamp")
	case at.AsTime().After(s.now().Add(maxRequestStateTTL + clockSkew)):
		err = invalidArgument("expires_at is further ahead than a request state lives (" + maxRequestStateTTL.String() + ")")
	}
	if p := req.GetPrincipalDigest(); err == nil && p != "" && validDigest(p) != nil {
		err = invalidArgument("principal_digest must be a hex SHA-256 (64 characters)")
	}
	var first bool
	if err == nil {
		var done func(bool, time.Time)
		if done, err = s.reserveRequestState(ctx, req.GetPrincipalDigest()); err == nil {
			// Kept clockSkew past the state's expiry, as revocations are:
			// a gateway whose clock runs behind still takes the state then.
			first, err = s.Store.ConsumeRequestState(ctx, req.GetStateDigest(), at.AsTime().Add(clockSkew))
			done(err == nil && first, at.AsTime())
		}
	}
	if err != nil {
		return nil, s.toStatus(ctx, "ConsumeRequestState", err)
	}
	return &indexerv1.ConsumeRequestStateResponse{FirstUse: first}, nil
}

// ReleaseRequestState gives back a use of a request state, for a retry
// refused before its backend saw it. The record's place in the caller's
// and the principal's bounds stays taken until the record would have
// expired: a client made to wait by a rate limit cannot so make records
// faster than it retries.
func (s *Server) ReleaseRequestState(ctx context.Context, req *indexerv1.ReleaseRequestStateRequest) (*indexerv1.ReleaseRequestStateResponse, error) {
	err := s.checkReady()
	if err == nil && validDigest(req.GetStateDigest()) != nil {
		err = invalidArgument("state_digest must be a hex SHA-256 (64 characters)")
	}
	if err == nil {
		err = s.Store.ReleaseRequestState(ctx, req.GetStateDigest())
	}
	if err != nil {
		return nil, s.toStatus(ctx, "ReleaseRequestState", err)
	}
	return &indexerv1.ReleaseRequestStateResponse{}, nil
}

// reserveRequestState takes a place for one more record of the caller's
// and, when the request names one, of the principal's through that
// caller; an operator's records count against nothing. done must be
// called with whether the record was made, expiring at expiresAt.
func (s *Server) reserveRequestState(ctx context.Context, principal string) (done func(recorded bool, expiresAt time.Time), err error) {
	caller, _ := svcauth.CallerFrom(ctx)
	if caller.Operator {
		return func(bool, time.Time) {}, nil
	}
	now := s.now()
	callerDone, err := s.requestStates.reserve(caller.Name, now)
	if err != nil || principal == "" {
		return callerDone, err
	}
	share := ratelimit.FairShare(maxRequestStatesPerPrincipal, s.requestStates.held(caller.Name, now), maxRequestStatesPerCaller)
	principalDone, err := s.principalRequestStates.reserveUpTo(caller.Name+"\x00"+principal, now, share)
	if err != nil {
		callerDone(false, now)
		return nil, err
	}
	return func(recorded bool, expiresAt time.Time) {
		callerDone(recorded, expiresAt)
		principalDone(recorded, expiresAt)
	}, nil
}
