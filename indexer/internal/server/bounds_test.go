package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboard-mcp/switchboard/services/config"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"

	"github.com/switchboard-mcp/switchboard/indexer/internal/revocation"
	"github.com/switchboard-mcp/switchboard/indexer/internal/sessionevents"
	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// A principal digest is chosen by the caller, so the relay quota keeps no
// principal whose answers have all expired: answers recorded already
// expired (a past expires_at) under ever new digests leave nothing
// behind, and neither do the principals whose answers expired since.
func TestRelayQuotaForgetsExpiredPrincipals(t *testing.T) {
	var q relayQuota
	now := time.Now()
	for i := range 10000 {
		done, err := q.reserve(fmt.Sprintf("%064x", i), now, 10, maxInputResponsesPerPrincipal)
		if err != nil {
			t.Fatal(err)
		}
		done(true, now.Add(-time.Minute))
	}
	for i := range 100 {
		done, err := q.reserve(fmt.Sprintf("live%060x", i), now, 10, maxInputResponsesPerPrincipal)
		if err != nil {
			t.Fatal(err)
		}
		done(true, now.Add(time.Minute))
	}
	if n := len(q.byPrincipal); n > 100 {
		t.Fatalf("%d principals tracked, want only the 100 with live answers", n)
	}
	now = now.Add(2 * time.Minute)
	done, err := q.reserve("last", now, 10, maxInputResponsesPerPrincipal)
	if err != nil {
		t.Fatal(err)
	}
	done(false, time.Time{})
	if n := len(q.byPrincipal); n != 0 {
		t.Fatalf("%d principals tracked once every answer expired, want none", n)
	}
}

// requestStateStore records request state uses in memory, and until
// when each record is kept.
type requestStateStore struct {
	store.Store
	used map[string]bool
	kept map[string]time.Time
}

func (s *requestStateStore) ConsumeRequestState(_ context.Context, digest string, until time.Time) (bool, error) {
	first := !s.used[digest]
	s.used[digest] = true
	if s.kept != nil {
		s.kept[digest] = until
	}
	return first, nil
}

// TestRequestStateRecordsOutliveClockSkew: the record of a used request
// state is kept clockSkew past the state's expiry, as revocations are: a
// gateway whose clock runs behind the indexer's still accepts the state
// a little after it expired by the indexer's, and a record dropped at
// the expiry would let a replay through then.
func TestRequestStateRecordsOutliveClockSkew(t *testing.T) {
	st := &requestStateStore{used: map[string]bool{}, kept: map[string]time.Time{}}
	s := New(Deps{Store: st, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	s.SetReady()
	expires := time.Now().Add(10 * time.Minute)
	digest := strings.Repeat("ab", 32)
	if _, err := s.ConsumeRequestState(context.Background(), &indexerv1.ConsumeRequestStateRequest{StateDigest: digest, ExpiresAt: timestamppb.New(expires)}); err != nil {
		t.Fatal(err)
	}
	if got := st.kept[digest]; got.Before(expires.Add(clockSkew)) {
		t.Fatalf("the record is kept until %v, %v after the state expires; want at least %v", got, got.Sub(expires), clockSkew)
	}
}

// revocationStore records until when each revocation is kept.
type revocationStore struct {
	store.Store
	kept map[string]time.Time
}

func (s *revocationStore) RevokeSession(_ context.Context, digest string, until time.Time) error {
	s.kept[digest] = until
	return nil
}

// TestRevocationsOutliveClockSkew: a session's revocation is kept
// clockSkew past the session's expiry, as a used request state's record
// is. The database forgets a revocation (the WatchRevocations snapshot,
// CheckSession, the collection) when it expires by the database's clock;
// a gateway whose clock runs behind still opens the session then, so one
// whose watch opened in that window would serve the deleted session.
// Clamped to a session's life, the margin is kept too.
func TestRevocationsOutliveClockSkew(t *testing.T) {
	st := &revocationStore{kept: map[string]time.Time{}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var ttl atomic.Int64
	ttl.Store(int64(time.Hour))
	s := New(Deps{Store: st, Log: log, RevocationTTL: &ttl, MaxRevocationsPerCaller: 100,
		Revocations: revocation.New(st, time.Hour, log), SessionEvents: sessionevents.New(st, time.Hour, log)})
	s.SetReady()
	now := time.Now()
	s.now = func() time.Time { return now }
	ctx, err := callerContext("gateway-token", indexerv1.IndexerService_RevokeSession_FullMethodName)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name          string
		expires, want time.Time
	}{
		{"within the TTL", now.Add(10 * time.Minute), now.Add(10*time.Minute + clockSkew)},
		{"past the TTL", now.Add(48 * time.Hour), now.Add(time.Hour + 2*clockSkew)},
	} {
		digest := fmt.Sprintf("%064x", len(st.kept))
		if _, err := s.RevokeSession(ctx, &indexerv1.RevokeSessionRequest{SessionDigest: digest, ExpiresAt: timestamppb.New(c.expires)}); err != nil {
			t.Fatal(err)
		}
		if got := st.kept[digest]; !got.Equal(c.want) {
			t.Errorf("%s: the revocation is kept until %v after now, want %v", c.name, got.Sub(now), c.want.Sub(now))
		}
	}
}

// sessionStateStore keeps the one state its changes make, as the
// database does: until the expiry the change carries.
type sessionStateStore struct {
	store.Store
	kept map[string]time.Time
}

func (s *sessionStateStore) UpdateSessionState(_ context.Context, c store.SessionStateChange, _ store.SessionStateLimits) (store.SessionState, error) {
	s.kept[c.Digest] = c.ExpiresAt
	return store.SessionState{Digest: c.Digest, Principal: c.Principal, LogLevel: c.LogLevel, ExpiresAt: c.ExpiresAt, Version: 1}, nil
}

// TestSessionStateExpiresWithItsSession: a Legacy session's state is
// kept until the session expires, not clockSkew past it as its
// revocation is: the state counts against its principal's bounds
// (gateway.sessions.maxPerPrincipal), and the gateways hold it until the
// expiry the indexer answers. With the margin, an expired session's
// state kept its principal's new sessions from taking any for five
// minutes. Past a session's life it is clamped as a revocation is.
func TestSessionStateExpiresWithItsSession(t *testing.T) {
	st := &sessionStateStore{kept: map[string]time.Time{}}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	var ttl atomic.Int64
	ttl.Store(int64(time.Hour))
	s := New(Deps{Store: st, Log: log, RevocationTTL: &ttl, MaxSessionStateBytes: 1 << 20,
		SessionLimits: store.SessionStateLimits{Subscriptions: 8, URIBytes: 256, PerPrincipal: 8, PrincipalBytes: 1 << 20},
		SessionEvents: sessionevents.New(st, time.Hour, log)})
	s.SetReady()
	now := time.Now()
	s.now = func() time.Time { return now }
	for _, c := range []struct {
		name          string
		expires, want time.Time
	}{
		{"within the TTL", now.Add(10 * time.Minute), now.Add(10 * time.Minute)},
		{"past the TTL", now.Add(48 * time.Hour), now.Add(time.Hour + clockSkew)},
	} {
		digest := fmt.Sprintf("%064x", len(st.kept))
		resp, err := s.UpdateSessionState(t.Context(), &indexerv1.UpdateSessionStateRequest{SessionDigest: digest, PrincipalDigest: strings.Repeat("ab", 32),
			ExpiresAt: timestamppb.New(c.expires), Change: &indexerv1.UpdateSessionStateRequest_LogLevel{LogLevel: "info"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := st.kept[digest]; !got.Equal(c.want) {
			t.Errorf("%s: the state is kept until %v after now, want %v", c.name, got.Sub(now), c.want.Sub(now))
		}
		if got := resp.GetState().GetExpiresAt().AsTime(); !got.Equal(c.want) {
			t.Errorf("%s: the gateway is told the state expires %v after now, want %v", c.name, got.Sub(now), c.want.Sub(now))
		}
	}
}

// requestStateServer is a ready indexer server over st whose clock reads
// *now.
func requestStateServer(st store.Store, now *time.Time) *Server {
	s := New(Deps{Store: st, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	s.SetReady()
	s.now = func() time.Time { return *now }
	return s
}

// callerContext is the context a call of fullMethod has once the
// service authentication the indexer uses let it in, as the caller whose
// token it is given (gateway-token and other-token, two gateways';
// operator-token, an operator's): in process, as 100,000 calls over a
// socket would take long.
func callerContext(token, fullMethod string) (context.Context, error) {
	allow := []string{strings.TrimPrefix(fullMethod, "/")}
	intercept := svcauth.NewAuthenticator([]config.ServiceCredential{
		{Name: "gateway", Token: "gateway-token", AssertPrincipals: true, Allow: allow},
		{Name: "other", Token: "other-token", AssertPrincipals: true, Allow: allow},
		{Name: "operator", Token: "operator-token", Operator: true, Allow: allow},
	}).UnaryInterceptor()
	var authed context.Context
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+token))
	_, err := intercept(ctx, nil, &grpc.UnaryServerInfo{FullMethod: fullMethod}, func(ctx context.Context, _ any) (any, error) {
		authed = ctx
		return nil, nil
	})
	return authed, err
}

// consumeAs calls s's ConsumeRequestState as the caller whose token it is
// given (callerContext).
func consumeAs(s *Server) func(token string, req *indexerv1.ConsumeRequestStateRequest) (*indexerv1.ConsumeRequestStateResponse, error) {
	return func(token string, req *indexerv1.ConsumeRequestStateRequest) (*indexerv1.ConsumeRequestStateResponse, error) {
		ctx, err := callerContext(token, indexerv1.IndexerService_ConsumeRequestState_FullMethodName)
		if err != nil {
			return nil, err
		}
		return s.ConsumeRequestState(ctx, req)
	}
}

// hexDigest is the hex SHA-256 of of, as principals' and states'
// digests are written.
func hexDigest(of string) string {
	sum := sha256.Sum256([]byte(of))
	return hex.EncodeToString(sum[:])
}

// consumeFor records, as the gateway, a state never used before for the
// principal given, through a ready server whose clock reads *now.
func consumeFor(now *time.Time) func(principal string) error {
	send := consumeAs(requestStateServer(&requestStateStore{used: map[string]bool{}}, now))
	n := 0
	return func(principal string) error {
		n++
		_, err := send("gateway-token", &indexerv1.ConsumeRequestStateRequest{
			StateDigest: hexDigest(fmt.Sprint(n)), ExpiresAt: timestamppb.New(now.Add(10 * time.Minute)), PrincipalDigest: principal,
		})
		return err
	}
}

// A caller that is not an operator holds at most
// maxRequestStatesPerCaller live request state records through one
// replica, as it does revocations and relayed answers: past it
// ConsumeRequestState is RESOURCE_EXHAUSTED and records nothing until
// some expire (a call at the bound is refused before the store is asked,
// so a replay then too: the gateway refuses the retry for now). A replay
// records nothing and counts nothing; operators are not held to the
// bound, and callers are counted apart.
func TestConsumeRequestStatePerCaller(t *testing.T) {
	st, now := &requestStateStore{used: map[string]bool{}}, time.Now()
	send := consumeAs(requestStateServer(st, &now))
	gateway, other, operator := "gateway-token", "other-token", "operator-token"
	n := 0
	consume := func(token, digest string) (*indexerv1.ConsumeRequestStateResponse, error) {
		return send(token, &indexerv1.ConsumeRequestStateRequest{StateDigest: digest, ExpiresAt: timestamppb.New(now.Add(10 * time.Minute))})
	}
	fresh := func() string {
		n++
		sum := sha256.Sum256(fmt.Append(nil, n))
		return hex.EncodeToString(sum[:])
	}
	for i := range maxRequestStatesPerCaller {
		digest := fresh()
		if resp, err := consume(gateway, digest); err != nil || !resp.GetFirstUse() {
			t.Fatalf("state %d: %v, %v", i+1, resp, err)
		}
		if i == 0 {
			// Replays record nothing, so they leave the bound as it was.
			for range 10 {
				if resp, err := consume(gateway, digest); err != nil || resp.GetFirstUse() {
					t.Fatalf("a replay: %v, %v; want first_use false", resp, err)
				}
			}
		}
	}
	tooMany := fresh()
	if _, err := consume(gateway, tooMany); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("one state past the bound: %v, want RESOURCE_EXHAUSTED", err)
	}
	if st.used[tooMany] {
		t.Fatal("a refused state was recorded")
	}
	for name, token := range map[string]string{"another caller": other, "an operator": operator} {
		if _, err := consume(token, fresh()); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	now = now.Add(11 * time.Minute)
	if _, err := consume(gateway, fresh()); err != nil {
		t.Fatalf("once the states expired: %v", err)
	}
}

// Each principal behind a caller has a tenth of the caller's records:
// every principal behind a gateway shares its credential, and one
// principal's retries once used up the whole bound, refusing everyone
// else's until they expired. A request without a principal (an older
// gateway) counts against the caller's bound alone.
func TestConsumeRequestStatePerPrincipal(t *testing.T) {
	now := time.Now()
	consume := consumeFor(&now)
	digest := hexDigest
	mallory, alice := digest("mallory"), digest("alice")
	for i := range maxRequestStatesPerPrincipal {
		if err := consume(mallory); err != nil {
			t.Fatalf("mallory's state %d: %v", i+1, err)
		}
	}
	if err := consume(mallory); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("mallory's state past her share: %v, want RESOURCE_EXHAUSTED", err)
	}
	for name, p := range map[string]string{"alice": alice, "a request naming no principal": ""} {
		if err := consume(p); err != nil {
			t.Fatalf("%s, once mallory used her share: %v", name, err)
		}
	}
	if err := consume("not-a-digest"); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a principal_digest that is not one: %v, want INVALID_ARGUMENT", err)
	}
	now = now.Add(11 * time.Minute)
	if err := consume(mallory); err != nil {
		t.Fatalf("mallory once her states expired: %v", err)
	}
}

// A quota forgets the keys whose records all expired, at most once a
// minute: one kept per principal would otherwise keep every principal it
// ever saw.
func TestLiveQuotaForgetsIdleKeys(t *testing.T) {
	q := newLiveQuota(10, errTooManyRequestStates)
	now := time.Now()
	for i := range 1000 {
		done, err := q.reserve(fmt.Sprint("principal-", i), now)
		if err != nil {
			t.Fatal(err)
		}
		done(true, now.Add(time.Second))
	}
	done, err := q.reserve("one more", now.Add(2*time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	done(false, time.Time{})
	if len(q.byCaller) > 1 {
		t.Fatalf("%d keys kept after every record expired", len(q.byCaller))
	}
}

// Principals share what is left of their caller's bound fairly: ten
// principals that each kept to their tenth once used up the caller's
// whole bound, and every other principal's retries were refused until
// their records expired. Now a principal's share shrinks once half the
// caller's bound is used, so those holding many are refused first and
// a newcomer still gets a fair part of what is left.
func TestRequestStateSharesAreFair(t *testing.T) {
	now := time.Now()
	consume, digest := consumeFor(&now), hexDigest
	// useShare takes records for principal until it is refused, and
	// says how many it got.
	useShare := func(principal string) int {
		for got := 0; ; got++ {
			err := consume(principal)
			if status.Code(err) == codes.ResourceExhausted {
				return got
			}
			if err != nil || got > maxRequestStatesPerPrincipal {
				t.Fatalf("principal's record %d: %v", got+1, err)
			}
		}
	}
	var coalition []int
	total := 0
	for i := range 10 {
		got := useShare(digest(fmt.Sprint("mallory-", i)))
		coalition, total = append(coalition, got), total+got
	}
	if coalition[0] != maxRequestStatesPerPrincipal {
		t.Fatalf("the first principal got %d records with the caller's bound unused, want its whole share of %d", coalition[0], maxRequestStatesPerPrincipal)
	}
	if total >= maxRequestStatesPerCaller*9/10 {
		t.Fatalf("ten principals took %d of the caller's %d records (%v)", total, maxRequestStatesPerCaller, coalition)
	}
	if alice := useShare(digest("alice")); alice < maxRequestStatesPerPrincipal/4 {
		t.Fatalf("alice got %d records after ten principals took theirs (%v); want a fair part of what is left", alice, coalition)
	}
}

// relayStore records relayed input responses and keeps none.
type relayStore struct{ store.Store }

func (relayStore) RelayInputResponse(context.Context, store.InputResponse, store.RelayLimits) (int64, error) {
	return 0, nil
}

// Relayed answers share their caller's bound as request states do: a
// hundred principals that each kept to their 1,000 once used up the
// caller's 100,000, and every other principal's answers were refused.
func TestRelayedAnswerSharesAreFair(t *testing.T) {
	now := time.Now()
	s := requestStateServer(relayStore{}, &now)
	ctx, err := callerContext("gateway-token", indexerv1.ClusterStateService_RelayInputResponse_FullMethodName)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	relayUntilRefused := func(principal string) int {
		for got := 0; ; got++ {
			n++
			_, err := s.RelayInputResponse(ctx, &indexerv1.RelayInputResponseRequest{
				OwnerReplica: "gw-1", ExpiresAt: timestamppb.New(now.Add(time.Minute)), PrincipalDigest: principal,
				Response: &indexerv1.RelayedInputResponse{SessionDigest: strings.Repeat("ab", 32), RequestIdJson: fmt.Sprintf("%q", fmt.Sprint(n)), ResponseJson: "{}"},
			})
			if status.Code(err) == codes.ResourceExhausted {
				return got
			}
			if err != nil || got > maxInputResponsesPerPrincipal {
				t.Fatalf("answer %d: %v", got+1, err)
			}
		}
	}
	total := 0
	for i := range maxInputResponsesPerCaller / maxInputResponsesPerPrincipal {
		total += relayUntilRefused(fmt.Sprintf("%064x", i))
	}
	if total >= maxInputResponsesPerCaller*9/10 {
		t.Fatalf("%d principals took %d of the caller's %d answers", maxInputResponsesPerCaller/maxInputResponsesPerPrincipal, total, maxInputResponsesPerCaller)
	}
	if alice := relayUntilRefused(strings.Repeat("a1", 32)); alice < maxInputResponsesPerPrincipal/10 {
		t.Fatalf("alice relayed %d answers after the others took theirs; want a fair part of what is left", alice)
	}
}
