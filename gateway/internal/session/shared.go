package session

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	"github.com/switchboard-mcp/switchboard/services/follow"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// Shared makes a Legacy session's state the same on every gateway replica.
// A change (logging/setLevel, resources/subscribe, resources/unsubscribe)
// is checked against this replica's bounds, recorded in the indexer's
// database (UpdateSessionState: the one round trip, on the change itself)
// and held in Local; every replica hears of it from the indexer's
// WatchSessionEvents stream, usually within milliseconds, and holds it in
// its Local too. So a tools/call reads the session's log level, and a GET
// stream follows its subscriptions, from memory on whichever replica they
// reach, never waiting on the indexer.
//
// The same stream brings this replica the answers to its input requests
// that clients POSTed to another replica (Relay): the input request ids are
// sealed with the replica's id (inputids.go), and the indexer pushes each
// relayed answer to the stream of the replica named there. It also brings
// every replica the cancellations of requests that reached a replica not
// running them (RelayCancellation, cancellations.go).
//
// While the stream is down, changes made on other replicas are not seen
// here until it is back (it reconnects with backoff and takes the new
// snapshot as the whole truth), and answers relayed meanwhile arrive then
// (the indexer sends a replica that subscribes every live answer for it;
// DeliverReply ignores one no request waits for any more); a change made
// through this replica is refused while the indexer cannot record it.
// Without an indexer, Shared is Local: state lives on the replica that
// received it.
type Shared struct {
	client  indexerv1.IndexerServiceClient // nil: this replica only
	local   *Local
	sealer  *Sealer
	replica string
	log     *slog.Logger

	watching atomic.Bool
	// warnedLocal is set once the fallback to this replica was logged.
	warnedLocal atomic.Bool
	// cancels bounds and counts relayed cancellations (cancellations.go);
	// warnedCancel is set once an indexer that cannot relay them was
	// logged.
	cancels      *cancelRelay
	warnedCancel atomic.Bool
	// changes bounds the bytes of each principal's state changes: each
	// writes its session's whole state to the indexer's database and
	// sends it to every replica, so a change costs its session's state
	// (at least minStateChangeCost).
	changes principalRates
	// relayWarn and cancelWarn limit the warnings for answers and
	// cancellations not relayed: clients choose what they send, so they
	// could otherwise fill the log (the metrics count every one).
	relayWarn, cancelWarn logLimiter
	// echoes lets a change wait for the stream to carry it back (echo.go).
	echoes *echoes
	stop   context.CancelFunc
	done   sync.WaitGroup
}

// ErrStateUnrecorded means the change could not be recorded in the
// indexer now; nothing changed.
var ErrStateUnrecorded = errors.New("session state cannot be recorded now")

// ErrPrincipalClusterFull and ErrClusterFull are the indexer's bounds on
// every replica together: what one principal's sessions hold
// (gateway.sessions.maxPerPrincipal, maxPrincipalStateBytes), and what all
// sessions hold (indexer.sessionStates.maxBytes).
var (
	ErrPrincipalClusterFull = errors.New("this principal's sessions hold as much state as they may in the cluster")
	ErrClusterFull          = errors.New("all sessions of the cluster hold as much state as they may")
)

// ErrStateChangesLimited means a state change was refused: its principal
// changed as much state as it may through this replica now.
var ErrStateChangesLimited = errors.New("too many session state changes now; retry in a second")

// Bounds of a principal's state changes through one replica, in bytes of
// the states written: a client changing a small state (a log level, a few
// subscriptions) is never held back, one rewriting a large state in a
// loop (256 URIs of 4 KiB: 1 MiB, sent to every replica each time) is
// held to a few changes a second.
const (
	stateChangeBytesPerSecond = 4 << 20
	stateChangeBurstBytes     = 8 << 20
	minStateChangeCost        = 4 << 10
)

// ErrSessionGone means the indexer knows the session as deleted or
// expired.
var ErrSessionGone = errors.New("session deleted or expired")

// maxRelayWait is the longest the indexer keeps a relayed answer.
const maxRelayWait = 55 * time.Minute

// updateTimeout bounds one UpdateSessionState or RelayInputResponse.
const updateTimeout = 5 * time.Second

// NewShared shares local's state through the indexer behind client (nil:
// local only), and starts following it. Close stops.
func NewShared(client indexerv1.IndexerServiceClient, local *Local, sealer *Sealer, log *slog.Logger) *Shared {
	id := make([]byte, 12)
	_, _ = rand.Read(id)
	s := &Shared{client: client, local: local, sealer: sealer, replica: hex.EncodeToString(id), log: log, cancels: newCancelRelay(), echoes: newEchoes(),
		changes: principalRates{rate: stateChangeBytesPerSecond, burst: stateChangeBurstBytes}}
	ctx, stop := context.WithCancel(context.Background())
	s.stop = stop
	if client != nil {
		s.done.Add(1)
		go func() {
			defer s.done.Done()
			s.watch(ctx)
		}()
	}
	return s
}

// Close stops following the indexer.
func (s *Shared) Close() {
	s.stop()
	s.done.Wait()
}

// Replica is this replica's id: the owner sealed into its input request
// ids.
func (s *Shared) Replica() string { return s.replica }

// Watching reports whether the stream is up and its snapshot complete.
func (s *Shared) Watching() bool { return s.client == nil || s.watching.Load() }

// SetLogLevel records the session's log level.
func (s *Shared) SetLogLevel(ctx context.Context, session, principal, level string, expires time.Time) error {
	if s.client == nil {
		return s.local.SetLogLevel(session, principal, level, expires)
	}
	if err := s.local.Admit(session, principal, level, ""); err != nil {
		return err
	}
	return s.update(ctx, &indexerv1.UpdateSessionStateRequest{SessionDigest: session, PrincipalDigest: principal,
		ExpiresAt: timestamppb.New(expires), Change: &indexerv1.UpdateSessionStateRequest_LogLevel{LogLevel: level}})
}

// Subscribe adds uri to the session's subscriptions.
func (s *Shared) Subscribe(ctx context.Context, session, principal, uri string, expires time.Time) error {
	if s.client == nil {
		return s.local.Subscribe(session, principal, uri, expires)
	}
	if err := s.local.Admit(session, principal, "", uri); err != nil {
		return err
	}
	return s.update(ctx, &indexerv1.UpdateSessionStateRequest{SessionDigest: session, PrincipalDigest: principal,
		ExpiresAt: timestamppb.New(expires), Change: &indexerv1.UpdateSessionStateRequest_SubscribeUri{SubscribeUri: uri}})
}

// Unsubscribe removes uri from the session's subscriptions.
func (s *Shared) Unsubscribe(ctx context.Context, session, principal, uri string, expires time.Time) error {
	if s.client == nil {
		s.local.Unsubscribe(session, uri)
		return nil
	}
	if len(uri) > s.local.limits.URIBytes {
		// Never subscribed: nothing to remove.
		return nil
	}
	return s.update(ctx, &indexerv1.UpdateSessionStateRequest{SessionDigest: session, PrincipalDigest: principal,
		ExpiresAt: timestamppb.New(expires), Change: &indexerv1.UpdateSessionStateRequest_UnsubscribeUri{UnsubscribeUri: uri}})
}

// update records one change and holds the state the indexer answers. An
// indexer without UpdateSessionState (an older release, during a rolling
// upgrade), or one that does not let this gateway's credential call it,
// leaves the change to this replica, as before there was one, with a
// warning: the state then works on this replica only.
func (s *Shared) update(ctx context.Context, req *indexerv1.UpdateSessionStateRequest) error {
	cost := max(minStateChangeCost, s.local.StateBytes(req.GetSessionDigest())+int64(len(req.GetSubscribeUri())))
	if !s.changes.allow(req.GetPrincipalDigest(), float64(cost), time.Now()) {
		return ErrStateChangesLimited
	}
	ctx, cancel := context.WithTimeout(ctx, updateTimeout)
	defer cancel()
	started := time.Now()
	resp, err := s.client.UpdateSessionState(ctx, req)
	switch status.Code(err) {
	case codes.OK:
	case codes.Unimplemented, codes.PermissionDenied:
		if !s.warnedLocal.Swap(true) {
			s.log.WarnContext(ctx, "the indexer does not record Legacy session state for this gateway (an older indexer, or a credential without UpdateSessionState and WatchSessionEvents): log levels and subscriptions work on the replica that received them only", "err", err)
		}
		return s.updateLocally(req)
	case codes.ResourceExhausted, codes.InvalidArgument:
		return boundError(err)
	case codes.FailedPrecondition:
		return ErrSessionGone
	default:
		return errors.Join(ErrStateUnrecorded, err)
	}
	if st := resp.GetState(); st.GetVersion() > 0 {
		m := mirrored(st)
		// The state goes when its session does, and this replica knows
		// when: an indexer may answer a later expiry (one that kept
		// states its clock skew margin past their sessions did), and
		// held until then an expired session kept counting against its
		// principal's bounds.
		if own := req.GetExpiresAt().AsTime(); own.Before(m.Expires) {
			m.Expires = own
		}
		s.local.Mirror(m)
		if s.watching.Load() {
			s.echoes.wait(ctx, st.GetSessionDigest(), st.GetVersion(), started)
		}
	}
	return nil
}

// boundError names the bound of the cluster (the indexer's) that a refused
// change would pass, by the status's reason; a refusal without one the
// gateway knows (an invalid request it sent) is a change not recorded.
func boundError(err error) error {
	switch apierr.Reason(err) {
	case commonv1.ErrorReason_ERROR_REASON_URI_TOO_LONG:
		return ErrURITooLong
	case commonv1.ErrorReason_ERROR_REASON_TOO_MANY_SUBSCRIPTIONS:
		return ErrTooManySubscriptions
	case commonv1.ErrorReason_ERROR_REASON_PRINCIPAL_STATE_FULL:
		return ErrPrincipalClusterFull
	case commonv1.ErrorReason_ERROR_REASON_SESSION_STATES_FULL:
		return ErrClusterFull
	default:
		return errors.Join(ErrStateUnrecorded, err)
	}
}

func (s *Shared) updateLocally(req *indexerv1.UpdateSessionStateRequest) error {
	session, principal, expires := req.GetSessionDigest(), req.GetPrincipalDigest(), req.GetExpiresAt().AsTime()
	switch ch := req.GetChange().(type) {
	case *indexerv1.UpdateSessionStateRequest_LogLevel:
		return s.local.SetLogLevel(session, principal, ch.LogLevel, expires)
	case *indexerv1.UpdateSessionStateRequest_SubscribeUri:
		return s.local.Subscribe(session, principal, ch.SubscribeUri, expires)
	case *indexerv1.UpdateSessionStateRequest_UnsubscribeUri:
		s.local.Unsubscribe(session, ch.UnsubscribeUri)
	}
	return nil
}

func mirrored(st *indexerv1.SessionState) MirroredState {
	return MirroredState{Session: st.GetSessionDigest(), Principal: st.GetPrincipalDigest(), Level: st.GetLogLevel(),
		URIs: st.GetSubscribedUris(), Expires: st.GetExpiresAt().AsTime(), Version: st.GetVersion()}
}

// Relay passes a client's answer that no request of this replica waits for
// to the replica that does, if its id is one a replica sealed for this
// session and still waits for; anything else is dropped, as is an answer
// when the indexer cannot take it (the request waiting for it then ends
// at its timeout). principal is the session's PrincipalDigest, which the
// indexer bounds answers by.
func (s *Shared) Relay(ctx context.Context, session, principal string, id, reply json.RawMessage) {
	if s.client == nil {
		return
	}
	owner, expires, err := s.sealer.OpenInputRequestID(session, id)
	if err != nil || owner == s.replica {
		return
	}
	// One id, one spelling: the indexer answers each request once by its
	// id's bytes, and a sealed id opens in any JSON escaping of its text.
	var text string
	_ = json.Unmarshal(id, &text) // it opened, so it is a JSON string
	id, _ = json.Marshal(text)
	// The indexer keeps an answer an hour at most; a longer wait
	// (timeouts.clientInput) is rare, and its answer is relayed then.
	if latest := time.Now().Add(maxRelayWait); expires.After(latest) {
		expires = latest
	}
	ctx, cancel := context.WithTimeout(ctx, updateTimeout)
	defer cancel()
	_, err = s.client.RelayInputResponse(ctx, &indexerv1.RelayInputResponseRequest{OwnerReplica: owner, ExpiresAt: timestamppb.New(expires), PrincipalDigest: principal,
		Response: &indexerv1.RelayedInputResponse{SessionDigest: session, RequestIdJson: string(id), ResponseJson: string(reply)}})
	if err != nil && status.Code(err) != codes.AlreadyExists && s.relayWarn.allow(time.Now()) {
		s.log.WarnContext(ctx, "a client's answer to another replica's input request was not relayed; that request waits until its timeout (logged at most once a minute)", "err", err)
	}
}

// RegisterMetrics registers switchboard_gateway_session_state_watch_up
// and switchboard_gateway_relayed_cancellations_total.
func (s *Shared) RegisterMetrics(reg prometheus.Registerer) error {
	if err := reg.Register(s.cancels.outcomes); err != nil {
		return err
	}
	return reg.Register(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "switchboard_gateway_session_state_watch_up",
		Help: "1 while this replica follows the Legacy session states and relayed input answers on the indexer (or has no indexer); 0 while changes made on other replicas are not seen.",
	}, func() float64 {
		if s.Watching() {
			return 1
		}
		return 0
	}))
}

// watch follows WatchSessionEvents until ctx ends (follow).
func (s *Shared) watch(ctx context.Context) {
	follow.Run(ctx, follow.Streams, func(ctx context.Context, connected func()) error {
		return s.watchOnce(ctx, func() {
			connected()
			s.log.InfoContext(ctx, "session state watch up")
		})
	}, func(err error, first bool, _ time.Duration) {
		s.watching.Store(false)
		if first {
			s.log.WarnContext(ctx, "session state watch down: Legacy session changes made on other replicas are not seen here until it reconnects", "err", err)
		}
	})
}

// watchOnce reads one stream until it breaks.
func (s *Shared) watchOnce(ctx context.Context, connected func()) error {
	stream, err := s.client.WatchSessionEvents(ctx, &indexerv1.WatchSessionEventsRequest{ReplicaId: s.replica})
	if err != nil {
		return err
	}
	snapshot := map[string]struct{}{}
	for {
		msg, err := stream.Recv()
		if err != nil {
			return err
		}
		for _, st := range msg.GetStates() {
			if st.GetRemoved() {
				s.local.Forget(st.GetSessionDigest())
				continue
			}
			if snapshot != nil {
				snapshot[st.GetSessionDigest()] = struct{}{}
			}
			s.local.Mirror(mirrored(st))
			s.echoes.carried(st.GetSessionDigest(), st.GetVersion())
		}
		for _, r := range msg.GetInputResponses() {
			s.local.DeliverReply(r.GetSessionDigest(), json.RawMessage(r.GetRequestIdJson()), json.RawMessage(r.GetResponseJson()))
		}
		for _, c := range msg.GetCancellations() {
			s.applyCancellation(c)
		}
		if msg.GetSnapshotComplete() && snapshot != nil {
			s.local.Retain(snapshot)
			snapshot = nil
			s.watching.Store(true)
			connected()
		}
	}
}

// logLimiter lets one log line through per relayWarnInterval.
type logLimiter struct{ last atomic.Int64 }

const relayWarnInterval = time.Minute

func (l *logLimiter) allow(now time.Time) bool {
	last := l.last.Load()
	if last != 0 && now.UnixNano()-last < int64(relayWarnInterval) {
		return false
	}
	return l.last.CompareAndSwap(last, now.UnixNano())
}
