package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

func testSealer(t *testing.T) *Sealer {
	t.Helper()
	s, err := NewSealer("", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// An input request id opens only for the session it was sealed for, as it
// was written, and only while its owner waits.
func TestInputRequestIDs(t *testing.T) {
	s := testSealer(t)
	until := time.Now().Add(time.Minute)
	id, err := s.SealInputRequestID("session-a", "replica-1", until)
	if err != nil {
		t.Fatal(err)
	}
	owner, expires, err := s.OpenInputRequestID("session-a", id)
	if err != nil || owner != "replica-1" || expires.Unix() != until.Unix() {
		t.Fatalf("open: %q %v %v", owner, expires, err)
	}
	var text string
	_ = json.Unmarshal(id, &text)
	// One character of the sealed bytes changed (to another that is never
	// itself): setting the tail to a fixed "AA" left an id that already
	// ended so untouched, and it opened.
	flip := []byte(text)
	if i := len(flip) - 3; flip[i] == 'A' {
		flip[i] = 'B'
	} else {
		flip[i] = 'A'
	}
	tampered, _ := json.Marshal(string(flip))
	other, _ := NewSealer("", time.Hour)
	for name, open := range map[string]func() error{
		"another session": func() error { _, _, err := s.OpenInputRequestID("session-b", id); return err },
		"tampered":        func() error { _, _, err := s.OpenInputRequestID("session-a", tampered); return err },
		"a number":        func() error { _, _, err := s.OpenInputRequestID("session-a", json.RawMessage(`7`)); return err },
		"a client's id":   func() error { _, _, err := s.OpenInputRequestID("session-a", json.RawMessage(`"i1.abc"`)); return err },
		"another key":     func() error { _, _, err := other.OpenInputRequestID("session-a", id); return err },
		"after the wait": func() error {
			s.now = func() time.Time { return until.Add(time.Second) }
			defer func() { s.now = time.Now }()
			_, _, err := s.OpenInputRequestID("session-a", id)
			return err
		},
	} {
		if err := open(); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}

// Copies from the indexer replace older ones only, wake a GET stream when
// the URIs change, count against the bounds Admit checks, and go when a
// new snapshot no longer lists them.
func TestMirror(t *testing.T) {
	limits := testLimits
	limits.PerPrincipal = 1
	l := NewLocal(limits)
	done := l.OpenStream("s1", nil)
	defer done()
	_, woken := l.Subscriptions("s1", time.Time{})
	expires := time.Now().Add(time.Hour)
	l.Mirror(MirroredState{Session: "s1", Principal: "p", Level: "info", URIs: []string{"a://1"}, Expires: expires, Version: 2})
	select {
	case <-woken:
	default:
		t.Fatal("an open GET stream did not hear of the session's first state")
	}
	uris, changed := l.Subscriptions("s1", time.Time{})
	if !slices.Equal(uris, []string{"a://1"}) || l.LogLevel("s1") != "info" {
		t.Fatalf("held %v %q", uris, l.LogLevel("s1"))
	}
	l.Mirror(MirroredState{Session: "s1", Principal: "p", Level: "debug", Expires: expires, Version: 1})
	if l.LogLevel("s1") != "info" {
		t.Fatal("an older copy replaced a newer one")
	}
	l.Mirror(MirroredState{Session: "s1", Principal: "p", Level: "debug", URIs: []string{"a://1", "a://2"}, Expires: expires, Version: 3})
	select {
	case <-changed:
	default:
		t.Fatal("a change of the URIs did not wake the stream")
	}
	if _, bytes := l.Held(); bytes != int64(sessionOverhead+len("debug")+2*(len("a://1")+uriOverhead)) {
		t.Fatalf("held %d bytes", bytes)
	}
	// The principal's one session with state is s1: another is refused
	// before the indexer is asked; s1 itself may change.
	if err := l.Admit("s2", "p", "info", ""); !errors.Is(err, ErrPrincipalFull) {
		t.Fatalf("a second session of the principal: %v", err)
	}
	if err := l.Admit("s1", "p", "", "a://3"); err != nil {
		t.Fatalf("another URI of s1: %v", err)
	}
	if err := l.Admit("s1", "p", "", strings.Repeat("u", limits.URIBytes+1)); !errors.Is(err, ErrURITooLong) {
		t.Fatalf("a URI too long: %v", err)
	}
	l.Retain(map[string]struct{}{})
	if n, bytes := l.Held(); n != 0 || bytes != 0 {
		t.Fatalf("after a snapshot without s1: %d sessions, %d bytes", n, bytes)
	}
}

// relayRecorder is an indexer that records the answers relayed to it.
type relayRecorder struct {
	indexerv1.IndexerServiceClient
	relayed []*indexerv1.RelayInputResponseRequest
}

func (r *relayRecorder) RelayInputResponse(_ context.Context, req *indexerv1.RelayInputResponseRequest, _ ...grpc.CallOption) (*indexerv1.RelayInputResponseResponse, error) {
	r.relayed = append(r.relayed, req)
	return &indexerv1.RelayInputResponseResponse{}, nil
}

// Only an answer to an id another replica sealed for this very session is
// relayed, to that replica.
func TestRelayOnlyAnswersOfThisSession(t *testing.T) {
	sealer := testSealer(t)
	rec := &relayRecorder{}
	s := &Shared{client: rec, local: NewLocal(testLimits), sealer: sealer, replica: "me", log: slog.New(slog.DiscardHandler)}
	until := time.Now().Add(time.Minute)
	theirs, _ := sealer.SealInputRequestID("session-a", "them", until)
	mine, _ := sealer.SealInputRequestID("session-a", "me", until)
	reply := json.RawMessage(`{"result":{}}`)
	s.Relay(t.Context(), "session-b", "principal-a", theirs, reply)
	s.Relay(t.Context(), "session-a", "principal-a", mine, reply)
	s.Relay(t.Context(), "session-a", "principal-a", json.RawMessage(`"sb-1"`), reply)
	if len(rec.relayed) != 0 {
		t.Fatalf("relayed %v", rec.relayed)
	}
	s.Relay(t.Context(), "session-a", "principal-a", theirs, reply)
	if len(rec.relayed) != 1 || rec.relayed[0].GetOwnerReplica() != "them" || rec.relayed[0].GetResponse().GetSessionDigest() != "session-a" ||
		rec.relayed[0].GetResponse().GetRequestIdJson() != string(theirs) || rec.relayed[0].GetResponse().GetResponseJson() != string(reply) ||
		rec.relayed[0].GetPrincipalDigest() != "principal-a" {
		t.Fatalf("relayed %v", rec.relayed)
	}
}

// An answer naming a sealed id in another JSON escaping is relayed under
// the id's one canonical spelling, so the indexer answers it once.
func TestRelayCanonicalisesTheID(t *testing.T) {
	sealer := testSealer(t)
	rec := &relayRecorder{}
	s := &Shared{client: rec, local: NewLocal(testLimits), sealer: sealer, replica: "me", log: slog.New(slog.DiscardHandler)}
	theirs, _ := sealer.SealInputRequestID("session-a", "them", time.Now().Add(time.Minute))
	var text string
	_ = json.Unmarshal(theirs, &text)
	escaped := json.RawMessage(`"\u00` + fmt.Sprintf("%02x", text[0]) + text[1:] + `"`)
	reply := json.RawMessage(`{"result":{}}`)
	s.Relay(t.Context(), "session-a", "principal-a", escaped, reply)
	s.Relay(t.Context(), "session-a", "principal-a", theirs, reply)
	if len(rec.relayed) != 2 {
		t.Fatalf("relayed %d answers, want 2", len(rec.relayed))
	}
	for i, r := range rec.relayed {
		if got := r.GetResponse().GetRequestIdJson(); got != string(theirs) {
			t.Errorf("answer %d relayed under %s, want %s", i, got, theirs)
		}
	}
}

// Refused relays are logged once per interval, not once each.
func TestRelayWarningsAreLimited(t *testing.T) {
	var l logLimiter
	now := time.Now()
	if !l.allow(now) || l.allow(now.Add(time.Second)) || !l.allow(now.Add(relayWarnInterval+time.Second)) {
		t.Fatal("the limiter lets through other than one line per interval")
	}
}

// refusingIndexer refuses every state change with one status.
type refusingIndexer struct {
	indexerv1.IndexerServiceClient
	err error
}

func (r refusingIndexer) UpdateSessionState(context.Context, *indexerv1.UpdateSessionStateRequest, ...grpc.CallOption) (*indexerv1.UpdateSessionStateResponse, error) {
	return nil, r.err
}

// The indexer's refusals are told apart by their reason, not their code:
// each bound of the cluster has its own error, and a refusal the gateway
// cannot name is a change not recorded (not a URI too long).
func TestUpdateRefusalsByReason(t *testing.T) {
	for _, c := range []struct {
		code   codes.Code
		reason commonv1.ErrorReason
		want   error
	}{
		{codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_URI_TOO_LONG, ErrURITooLong},
		{codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT, ErrStateUnrecorded},
		{codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_TOO_MANY_SUBSCRIPTIONS, ErrTooManySubscriptions},
		{codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_PRINCIPAL_STATE_FULL, ErrPrincipalClusterFull},
		{codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_SESSION_STATES_FULL, ErrClusterFull},
		{codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED, ErrStateUnrecorded},
	} {
		s := &Shared{client: refusingIndexer{err: apierr.New(c.code, c.reason, "refused")}, local: NewLocal(testLimits),
			sealer: testSealer(t), replica: "me", log: slog.New(slog.DiscardHandler)}
		err := s.Subscribe(t.Context(), "session-a", "p", "a://1", time.Now().Add(time.Hour))
		if !errors.Is(err, c.want) {
			t.Errorf("%v %v: %v, want %v", c.code, c.reason, err, c.want)
		}
	}
}

// A copy of a session's state sent before the session was deleted does not
// bring it back once it was forgotten; the memory of forgotten sessions is
// bounded and ends.
func TestMirrorAfterForget(t *testing.T) {
	l := NewLocal(testLimits)
	now := time.Now()
	l.now = func() time.Time { return now }
	stale := MirroredState{Session: "s1", Principal: "p", Level: "info", Expires: now.Add(time.Hour), Version: 5}
	l.Mirror(stale)
	l.Forget("s1")
	l.Mirror(stale)
	if n, _ := l.Held(); n != 0 || l.LogLevel("s1") != "" {
		t.Fatalf("a stale copy brought the forgotten session back: %d sessions, level %q", n, l.LogLevel("s1"))
	}
	for i := range maxTombstones + 10 {
		l.Forget(fmt.Sprintf("other-%d", i))
	}
	if len(l.forgotten) > maxTombstones {
		t.Fatalf("%d forgotten sessions remembered, want at most %d", len(l.forgotten), maxTombstones)
	}
	now = now.Add(tombstoneTTL)
	l.Mirror(MirroredState{Session: "other-1", Principal: "p", Level: "debug", Expires: now.Add(time.Hour), Version: 6})
	if l.LogLevel("other-1") != "debug" {
		t.Fatal("a session forgotten longer than tombstoneTTL ago is still ignored")
	}
}

// lateIndexer answers every change with the state it makes, with an
// expiry later than the session's, as an indexer that kept session states
// past their sessions (by its clock skew margin) did. With streamed set,
// the state reaches it first as the WatchSessionEvents stream would
// carry it, before the answer.
type lateIndexer struct {
	indexerv1.IndexerServiceClient
	version  uint64
	streamed *Local
}

func (l *lateIndexer) UpdateSessionState(_ context.Context, req *indexerv1.UpdateSessionStateRequest, _ ...grpc.CallOption) (*indexerv1.UpdateSessionStateResponse, error) {
	l.version++
	st := &indexerv1.SessionState{SessionDigest: req.GetSessionDigest(), PrincipalDigest: req.GetPrincipalDigest(),
		LogLevel: req.GetLogLevel(), ExpiresAt: timestamppb.New(req.GetExpiresAt().AsTime().Add(5 * time.Minute)), Version: l.version}
	if l.streamed != nil {
		l.streamed.Mirror(mirrored(st))
	}
	return &indexerv1.UpdateSessionStateResponse{State: st}, nil
}

// A state change recorded in the indexer is held here until the session's
// own expiry, which this replica knows, never later, whether the
// indexer's answer or its stream brings the state first: held until an
// expiry the indexer answered five minutes later, an expired session kept
// counting against its principal's sessions with state, and its
// principal's next one was refused.
func TestRecordedStateGoesWithItsSession(t *testing.T) {
	for _, streamedFirst := range []bool{false, true} {
		limits := testLimits
		limits.PerPrincipal = 1
		l := NewLocal(limits)
		now := time.Now()
		l.now = func() time.Time { return now }
		indexer := &lateIndexer{}
		if streamedFirst {
			indexer.streamed = l
		}
		s := &Shared{client: indexer, local: l, sealer: testSealer(t), replica: "me", log: slog.New(slog.DiscardHandler), echoes: newEchoes()}
		expires := now.Add(3 * time.Second)
		if err := s.SetLogLevel(t.Context(), "session-a", "p", "info", expires); err != nil {
			t.Fatal(err)
		}
		if level := l.LogLevel("session-a"); level != "info" {
			t.Fatalf("streamed first %v: level %q before the session expired", streamedFirst, level)
		}
		now = expires
		if level := l.LogLevel("session-a"); level != "" {
			t.Fatalf("streamed first %v: level %q once the session expired", streamedFirst, level)
		}
		if err := s.Subscribe(t.Context(), "session-b", "p", "a://1", now.Add(time.Hour)); err != nil {
			t.Fatalf("streamed first %v: the principal's next session, once its only one with state expired: %v", streamedFirst, err)
		}
	}
}
