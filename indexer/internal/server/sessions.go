package server

import (
	"context"
	"errors"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// clockSkew is how far a gateway's clock may run ahead of or behind the
// indexer's and its database's: a record a gateway asks to keep until a
// time by its clock is kept that much longer (revocationExpiry), and one
// expiring at the end of a full TTL by its clock is not cut short by a
// clamp (sessionExpiry).
const clockSkew = 5 * time.Minute

// revocationsPerMessage bounds one WatchRevocations message (each
// revocation is about 80 bytes).
const revocationsPerMessage = 1000

// errFellBehind ends a WatchRevocations stream whose subscriber did not
// keep up.
var errFellBehind = errors.New("revocation subscriber fell behind")

// RevokeSession records a deleted gateway session, and passes it to this
// replica's WatchRevocations streams at once (the other replicas hear of
// it from the database). Its expiry is clamped to the session TTL, and a
// caller that is not an operator holds at most MaxRevocationsPerCaller
// (quota.go).
func (s *Server) RevokeSession(ctx context.Context, req *indexerv1.RevokeSessionRequest) (*indexerv1.RevokeSessionResponse, error) {
	err := s.checkReady()
	if err == nil {
		err = validDigest(req.GetSessionDigest())
	}
	var expiresAt time.Time
	if err == nil {
		expiresAt, err = s.revocationExpiry(req.GetExpiresAt())
	}
	rev := store.Revocation{Digest: req.GetSessionDigest(), ExpiresAt: expiresAt}
	if err == nil {
		if caller, _ := svcauth.CallerFrom(ctx); caller.Operator {
			err = s.Store.RevokeSession(ctx, rev.Digest, rev.ExpiresAt)
		} else {
			var done func(bool, time.Time)
			if done, err = s.quota.reserve(caller.Name, s.now()); err == nil {
				err = s.Store.RevokeSession(ctx, rev.Digest, rev.ExpiresAt)
				done(err == nil, rev.ExpiresAt)
			}
		}
	}
	if err != nil {
		return nil, s.toStatus(ctx, "RevokeSession", err)
	}
	s.Revocations.Add(rev)
	s.SessionEvents.Remove(rev.Digest)
	return &indexerv1.RevokeSessionResponse{}, nil
}

// revocationExpiry is when a revocation may be forgotten: clockSkew after
// the session expires (sessionExpiry), so that a gateway whose clock runs
// behind the database's (which forgets the revocation by its own clock)
// never opens the deleted session after its revocation is gone.
func (s *Server) revocationExpiry(at *timestamppb.Timestamp) (time.Time, error) {
	expires, err := s.sessionExpiry(at)
	if err != nil {
		return time.Time{}, err
	}
	return expires.Add(clockSkew), nil
}

// sessionExpiry is when the session a gateway names expires: as it says,
// but no later than a session could live (plus clockSkew, so that the
// clamp never cuts a real one short). A session's state goes then, with
// no margin: it counts against its principal's bounds, and a gateway
// without an indexer frees it at that moment too.
func (s *Server) sessionExpiry(at *timestamppb.Timestamp) (time.Time, error) {
	if at == nil {
		return time.Time{}, invalidArgument("expires_at is required")
	}
	if err := at.CheckValid(); err != nil {
		return time.Time{}, invalidArgument("expires_at is not a valid timestamp")
	}
	if latest := s.now().Add(time.Duration(s.RevocationTTL.Load()) + clockSkew); at.AsTime().After(latest) {
		return latest, nil
	}
	return at.AsTime(), nil
}

// CheckSession reports whether a session was revoked.
func (s *Server) CheckSession(ctx context.Context, req *indexerv1.CheckSessionRequest) (*indexerv1.CheckSessionResponse, error) {
	err := s.checkReady()
	if err == nil {
		err = validDigest(req.GetSessionDigest())
	}
	var revoked bool
	if err == nil {
		revoked, err = s.Store.SessionRevoked(ctx, req.GetSessionDigest())
	}
	if err != nil {
		return nil, s.toStatus(ctx, "CheckSession", err)
	}
	return &indexerv1.CheckSessionResponse{Revoked: revoked}, nil
}

// WatchRevocations streams every live revocation, then each new one. A
// caller that is not an operator holds at most 256 open here
// (rpc.StreamQuota).
func (s *Server) WatchRevocations(_ *indexerv1.WatchRevocationsRequest, stream indexerv1.IndexerService_WatchRevocationsServer) error {
	ctx := stream.Context()
	if err := s.checkReady(); err != nil {
		return s.toStatus(ctx, "WatchRevocations", err)
	}
	if caller, _ := svcauth.CallerFrom(ctx); !caller.Operator {
		release, err := s.revocationWatchers.Acquire(caller.Name)
		if err != nil {
			return s.toStatus(ctx, "WatchRevocations", err)
		}
		defer release()
	}
	snapshot, updates, cancel, err := s.Revocations.Subscribe()
	if err != nil {
		return s.toStatus(ctx, "WatchRevocations", err)
	}
	defer cancel()
	for first := true; first || len(snapshot) > 0; first = false {
		n := min(len(snapshot), revocationsPerMessage)
		msg := &indexerv1.WatchRevocationsResponse{Revocations: revocationsProto(snapshot[:n]), SnapshotComplete: n == len(snapshot)}
		snapshot = snapshot[n:]
		if err := stream.Send(msg); err != nil {
			return err
		}
	}
	for {
		select {
		case <-ctx.Done():
			// The caller went away or its deadline passed: say which, rather
			// than end the stream as if it had completed.
			return s.toStatus(ctx, "WatchRevocations", ctx.Err())
		case <-s.Stopping:
			// Shutting down: end the stream so the graceful stop is not
			// held up; the gateway reconnects to another replica.
			return nil
		case r, ok := <-updates:
			if !ok {
				return s.toStatus(ctx, "WatchRevocations", errFellBehind)
			}
			batch := []store.Revocation{r}
		drain:
			for len(batch) < revocationsPerMessage {
				select {
				case r, ok := <-updates:
					if !ok {
						break drain
					}
					batch = append(batch, r)
				default:
					break drain
				}
			}
			if err := stream.Send(&indexerv1.WatchRevocationsResponse{Revocations: revocationsProto(batch)}); err != nil {
				return err
			}
		}
	}
}

func revocationsProto(revs []store.Revocation) []*indexerv1.SessionRevocation {
	out := make([]*indexerv1.SessionRevocation, len(revs))
	for i, r := range revs {
		out[i] = &indexerv1.SessionRevocation{SessionDigest: r.Digest, ExpiresAt: timestamppb.New(r.ExpiresAt)}
	}
	return out
}

// validDigest accepts a hex SHA-256.
func validDigest(d string) error {
	if len(d) != 64 {
		return invalidArgument("session_digest must be a hex SHA-256 (64 characters)")
	}
	for _, c := range d {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return invalidArgument("session_digest must be a hex SHA-256 (64 characters)")
		}
	}
	return nil
}
