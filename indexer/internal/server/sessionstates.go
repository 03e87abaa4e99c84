package server

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboard-mcp/switchboard/services/config"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
	"github.com/switchboard-mcp/switchboard/services/ratelimit"
	"github.com/switchboard-mcp/switchboard/services/svcauth"

	"github.com/switchboard-mcp/switchboard/indexer/internal/sessionevents"
	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// Bounds of a relayed input response: its size, how long it may wait for
// its owner (gateways wait timeouts.clientInput, minutes), and the ids.
const (
	maxInputResponseBytes = 4 << 20
	maxInputResponseTTL   = time.Hour
	maxReplicaIDBytes     = 64
	maxRequestIDBytes     = config.MaxRequestIDBytes
)

// maxInputResponsesPerCaller bounds the live relayed input responses one
// caller that is not an operator has recorded through this replica. A
// gateway relays only answers to ids it sealed itself, each once, so this
// bounds a credential that is misused; every gateway may share it, so each
// principal has a smaller bound of its own (relayquota.go).
const maxInputResponsesPerCaller = 100_000

// relayLimits bound the live relayed answers of one session across the
// cluster: rows and bytes, so that one principal's sessions cannot fill the
// table the gateways share (they share one credential, so the per-caller
// bound cannot tell principals apart). A session gets answers only to the
// ids its gateway sealed for it, each once.
var relayLimits = store.RelayLimits{PerSession: 256, SessionBytes: 32 << 20}

// canonicalRequestID reports whether id is a JSON string spelt as
// encoding/json writes its value: the uniqueness of an answer is on the
// bytes, so each id must have one spelling (the gateway writes it so).
func canonicalRequestID(id string) bool {
	var text string
	if json.Unmarshal([]byte(id), &text) != nil {
		return false
	}
	b, err := json.Marshal(text)
	return err == nil && string(b) == id
}

// errTooManyInputResponses: the caller holds as many live relayed input
// responses as it may.
var errTooManyInputResponses = errors.New("too many live relayed input responses for this caller")

// statesPerMessage and messageBytes bound one WatchSessionEvents message:
// a message is closed once it holds either (one state is at most about
// 1 MiB, one input response 4 MiB), well within what a gateway receives.
const (
	statesPerMessage = 1000
	messageBytes     = 4 << 20
)

// errSessionEventsBehind ends a WatchSessionEvents stream whose subscriber
// did not keep up.
var errSessionEventsBehind = errors.New("session event subscriber fell behind")

// errStateFull: the states of every session together are at
// indexer.sessionStates.maxBytes.
var errStateFull = errors.New("the session states of all sessions are at their bound")

// UpdateSessionState applies one change of a Legacy session's state,
// within the gateway's bounds, and passes it to this replica's
// WatchSessionEvents streams at once (the other replicas hear of it from
// the database).
func (s *Server) UpdateSessionState(ctx context.Context, req *indexerv1.UpdateSessionStateRequest) (*indexerv1.UpdateSessionStateResponse, error) {
	change, grows, err := s.sessionStateChange(req)
	var st store.SessionState
	if err == nil && grows > 0 && s.SessionEvents.Bytes()+grows > s.MaxSessionStateBytes {
		// The total is this replica's view of every state, current to
		// within the notifications in flight.
		err = errStateFull
	}
	if err == nil {
		st, err = s.Store.UpdateSessionState(ctx, change, s.SessionLimits)
	}
	if err != nil {
		return nil, s.toStatus(ctx, "UpdateSessionState", err)
	}
	if st.Version > 0 {
		s.SessionEvents.Apply(st)
	}
	if st.Digest == "" {
		st = store.SessionState{Digest: change.Digest, Principal: change.Principal, ExpiresAt: change.ExpiresAt}
	}
	return &indexerv1.UpdateSessionStateResponse{State: sessionStateProto(st)}, nil
}

// sessionStateChange checks a request and says how much it may add to
// what is held.
func (s *Server) sessionStateChange(req *indexerv1.UpdateSessionStateRequest) (store.SessionStateChange, int64, error) {
	if err := s.checkReady(); err != nil {
		return store.SessionStateChange{}, 0, err
	}
	if err := validDigest(req.GetSessionDigest()); err != nil {
		return store.SessionStateChange{}, 0, err
	}
	if validDigest(req.GetPrincipalDigest()) != nil {
		return store.SessionStateChange{}, 0, invalidArgument("principal_digest must be a hex SHA-256 (64 characters)")
	}
	expiresAt, err := s.sessionExpiry(req.GetExpiresAt())
	if err != nil {
		return store.SessionStateChange{}, 0, err
	}
	c := store.SessionStateChange{Digest: req.GetSessionDigest(), Principal: req.GetPrincipalDigest(), ExpiresAt: expiresAt}
	var grows int64
	switch ch := req.GetChange().(type) {
	case *indexerv1.UpdateSessionStateRequest_LogLevel:
		if !mcpspec.IsLogLevel(ch.LogLevel) {
			return c, 0, invalidArgument("log_level must be an MCP log level")
		}
		c.LogLevel, grows = ch.LogLevel, int64(store.SessionStateOverhead+len(ch.LogLevel))
	case *indexerv1.UpdateSessionStateRequest_SubscribeUri:
		c.Subscribe, grows = ch.SubscribeUri, int64(store.SessionStateOverhead+len(ch.SubscribeUri)+store.URIOverhead)
	case *indexerv1.UpdateSessionStateRequest_UnsubscribeUri:
		c.Unsubscribe = ch.UnsubscribeUri
	default:
		return c, 0, invalidArgument("one of log_level, subscribe_uri and unsubscribe_uri is required")
	}
	if uri := c.Subscribe + c.Unsubscribe; req.GetLogLevel() == "" && uri == "" {
		return c, 0, invalidArgument("the URI must not be empty")
	} else if len(uri) > s.SessionLimits.URIBytes {
		return c, 0, &store.SessionStateBoundError{Msg: "resource URI too long", URI: true}
	}
	return c, grows, nil
}

// WatchSessionEvents streams every live session state, then each change
// and the answers relayed for the subscriber's input requests.
func (s *Server) WatchSessionEvents(req *indexerv1.WatchSessionEventsRequest, stream indexerv1.IndexerService_WatchSessionEventsServer) error {
	ctx := stream.Context()
	if err := s.checkReady(); err != nil {
		return s.toStatus(ctx, "WatchSessionEvents", err)
	}
	if len(req.GetReplicaId()) > maxReplicaIDBytes {
		return s.toStatus(ctx, "WatchSessionEvents", invalidArgument("replica_id is longer than 64 characters"))
	}
	if caller, _ := svcauth.CallerFrom(ctx); !caller.Operator {
		release, err := s.watchers.Acquire(caller.Name)
		if err != nil {
			return s.toStatus(ctx, "WatchSessionEvents", err)
		}
		defer release()
	}
	snapshot, events, cancel, err := s.SessionEvents.Subscribe(req.GetReplicaId())
	if err != nil {
		return s.toStatus(ctx, "WatchSessionEvents", err)
	}
	defer cancel()
	for first := true; first || len(snapshot) > 0; first = false {
		msg := &indexerv1.WatchSessionEventsResponse{}
		var size int64
		for len(snapshot) > 0 && len(msg.States) < statesPerMessage && size < messageBytes {
			msg.States = append(msg.States, sessionStateProto(snapshot[0]))
			size += snapshot[0].Cost()
			snapshot = snapshot[1:]
		}
		msg.SnapshotComplete = len(snapshot) == 0
		if err := stream.Send(msg); err != nil {
			return err
		}
	}
	for {
		select {
		case <-ctx.Done():
			// The caller went away or its deadline passed: say which, rather
			// than end the stream as if it had completed.
			return s.toStatus(ctx, "WatchSessionEvents", ctx.Err())
		case <-s.Stopping:
			return nil
		case ev, ok := <-events:
			if !ok {
				return s.toStatus(ctx, "WatchSessionEvents", errSessionEventsBehind)
			}
			ev.Taken()
			msg := &indexerv1.WatchSessionEventsResponse{}
			size := addEvent(msg, ev)
		drain:
			for len(msg.States)+len(msg.InputResponses)+len(msg.Cancellations) < statesPerMessage && size < messageBytes {
				select {
				case ev, ok := <-events:
					if !ok {
						break drain
					}
					ev.Taken()
					size += addEvent(msg, ev)
				default:
					break drain
				}
			}
			if err := stream.Send(msg); err != nil {
				return err
			}
		}
	}
}

// addEvent adds ev to msg and returns about how many bytes it adds.
func addEvent(msg *indexerv1.WatchSessionEventsResponse, ev sessionevents.Event) int64 {
	switch {
	case ev.Response != nil:
		msg.InputResponses = append(msg.InputResponses, &indexerv1.RelayedInputResponse{
			SessionDigest: ev.Response.SessionDigest, RequestIdJson: ev.Response.RequestID, ResponseJson: ev.Response.Response,
		})
		return int64(len(ev.Response.Response) + len(ev.Response.RequestID) + store.SessionStateOverhead)
	case ev.Cancellation != nil:
		msg.Cancellations = append(msg.Cancellations, &indexerv1.RelayedCancellation{
			SessionDigest: ev.Cancellation.SessionDigest, RequestIdJson: ev.Cancellation.RequestID,
		})
		return int64(len(ev.Cancellation.RequestID) + len(ev.Cancellation.SessionDigest))
	case ev.Removed:
		msg.States = append(msg.States, &indexerv1.SessionState{SessionDigest: ev.State.Digest, Removed: true})
		return store.SessionStateOverhead
	default:
		msg.States = append(msg.States, sessionStateProto(ev.State))
		return ev.State.Cost()
	}
}

// RelayInputResponse records a client's answer for the gateway replica
// waiting for it; the replica holding the owner's stream passes it on.
func (s *Server) RelayInputResponse(ctx context.Context, req *indexerv1.RelayInputResponseRequest) (*indexerv1.RelayInputResponseResponse, error) {
	r := req.GetResponse()
	err := s.checkReady()
	if err == nil {
		err = validDigest(r.GetSessionDigest())
	}
	at := req.GetExpiresAt()
	switch {
	case err != nil:
	case req.GetOwnerReplica() == "" || len(req.GetOwnerReplica()) > maxReplicaIDBytes:
		err = invalidArgument("owner_replica must have 1 to 64 characters")
	case r.GetRequestIdJson() == "" || len(r.GetRequestIdJson()) > maxRequestIDBytes || !json.Valid([]byte(r.GetRequestIdJson())):
		err = invalidArgument("request_id_json must be JSON of at most 256 bytes")
	case !canonicalRequestID(r.GetRequestIdJson()):
		err = invalidArgument("request_id_json must be a JSON string as encoding/json writes it (no escapes it would not write)")
	case len(r.GetResponseJson()) > maxInputResponseBytes:
		err = invalidArgument("response_json is larger than 4 MiB")
	case !json.Valid([]byte(r.GetResponseJson())):
		err = invalidArgument("response_json must be JSON")
	case at == nil || at.CheckValid() != nil:
		err = invalidArgument("expires_at is required and must be a valid timestamp")
	case at.AsTime().After(s.now().Add(maxInputResponseTTL + clockSkew)):
		err = invalidArgument("expires_at is further ahead than an input request waits (" + maxInputResponseTTL.String() + ")")
	case validDigest(req.GetPrincipalDigest()) != nil:
		err = invalidArgument("principal_digest is required: a hex SHA-256 (64 characters)")
	}
	if err == nil {
		answer := store.InputResponse{Owner: req.GetOwnerReplica(), SessionDigest: r.GetSessionDigest(),
			RequestID: r.GetRequestIdJson(), Response: r.GetResponseJson(), ExpiresAt: at.AsTime()}
		if caller, _ := svcauth.CallerFrom(ctx); caller.Operator {
			_, err = s.Store.RelayInputResponse(ctx, answer, relayLimits)
		} else {
			size := int64(len(answer.Response) + len(answer.RequestID))
			var principalDone, done func(bool, time.Time)
			// The caller's answers, this one included.
			share := ratelimit.FairShare(maxInputResponsesPerPrincipal, s.answers.held(caller.Name, s.now())+1, maxInputResponsesPerCaller)
			principalDone, err = s.relays.reserve(req.GetPrincipalDigest(), s.now(), size, share)
			if err == nil {
				if done, err = s.answers.reserve(caller.Name, s.now()); err == nil {
					_, err = s.Store.RelayInputResponse(ctx, answer, relayLimits)
					done(err == nil, answer.ExpiresAt)
				}
				principalDone(err == nil, answer.ExpiresAt)
			}
		}
	}
	if err != nil {
		return nil, s.toStatus(ctx, "RelayInputResponse", err)
	}
	return &indexerv1.RelayInputResponseResponse{}, nil
}

func sessionStateProto(st store.SessionState) *indexerv1.SessionState {
	return &indexerv1.SessionState{SessionDigest: st.Digest, PrincipalDigest: st.Principal, LogLevel: st.LogLevel,
		SubscribedUris: st.URIs, ExpiresAt: timestamppb.New(st.ExpiresAt), Version: st.Version}
}
