package session

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// cancelRecorder is an indexer that records the cancellations relayed to
// it and answers with err.
type cancelRecorder struct {
	indexerv1.IndexerServiceClient
	mu      sync.Mutex
	relayed []*indexerv1.RelayedCancellation
	err     error
}

func (r *cancelRecorder) RelayCancellation(_ context.Context, req *indexerv1.RelayCancellationRequest, _ ...grpc.CallOption) (*indexerv1.RelayCancellationResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return nil, r.err
	}
	r.relayed = append(r.relayed, req.GetCancellation())
	return &indexerv1.RelayCancellationResponse{}, nil
}

// outcomes reads switchboard_gateway_relayed_cancellations_total{outcome}
// as a registry exposes it.
func outcomes(t *testing.T, s *Shared, outcome string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	if err := reg.Register(s.cancels.outcomes); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "outcome" && l.GetValue() == outcome {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

func newCancelShared(client indexerv1.IndexerServiceClient) *Shared {
	return &Shared{client: client, local: NewLocal(testLimits), replica: "me", log: slog.New(slog.DiscardHandler), cancels: newCancelRelay()}
}

// A cancellation is relayed with the session the replica verified and the
// id as the client wrote it; an id that cannot name a request is not.
func TestRelayCancellationIDs(t *testing.T) {
	rec := &cancelRecorder{}
	s := newCancelShared(rec)
	for _, id := range []string{`{"a":1}`, `null`, `true`, `[7]`, `"` + strings.Repeat("x", maxCancelIDBytes) + `"`, `7 8`} {
		if err := s.RelayCancellation(t.Context(), "session-a", "p", json.RawMessage(id)); err != nil {
			t.Fatalf("id %.20s: %v", id, err)
		}
	}
	if len(rec.relayed) != 0 {
		t.Fatalf("relayed %v", rec.relayed)
	}
	for _, id := range []string{`7`, `"call-7"`, `-1.5`} {
		if err := s.RelayCancellation(t.Context(), "session-a", "p", json.RawMessage(id)); err != nil {
			t.Fatal(err)
		}
	}
	if len(rec.relayed) != 3 || rec.relayed[0].GetSessionDigest() != "session-a" || rec.relayed[1].GetRequestIdJson() != `"call-7"` {
		t.Fatalf("relayed %v", rec.relayed)
	}
	if n := outcomes(t, s, "sent"); n != 3 {
		t.Fatalf("sent %v", n)
	}
	// Without an indexer there is nothing to relay to.
	if err := newCancelShared(nil).RelayCancellation(t.Context(), "session-a", "p", json.RawMessage(`7`)); err != nil {
		t.Fatal(err)
	}
}

// A principal relays a burst, then cancelRate a second; another principal
// is not held back by it; the indexer's own refusal is a refusal too, and
// an indexer that cannot relay leaves the cancellation undone.
func TestRelayCancellationBounds(t *testing.T) {
	rec := &cancelRecorder{}
	s := newCancelShared(rec)
	now := time.Now()
	s.cancels.now = func() time.Time { return now }
	id := json.RawMessage(`7`)
	for i := range cancelBurst {
		if err := s.RelayCancellation(t.Context(), "session-a", "p", id); err != nil {
			t.Fatalf("cancellation %d of the burst: %v", i, err)
		}
	}
	if err := s.RelayCancellation(t.Context(), "session-a", "p", id); !errors.Is(err, ErrCancellationsLimited) {
		t.Fatalf("past the burst: %v", err)
	}
	if err := s.RelayCancellation(t.Context(), "session-b", "q", id); err != nil {
		t.Fatalf("another principal: %v", err)
	}
	now = now.Add(time.Second / cancelRate)
	if err := s.RelayCancellation(t.Context(), "session-a", "p", id); err != nil {
		t.Fatalf("after a token's time: %v", err)
	}
	if err := s.RelayCancellation(t.Context(), "session-a", "p", id); !errors.Is(err, ErrCancellationsLimited) {
		t.Fatalf("the token spent: %v", err)
	}
	if len(rec.relayed) != cancelBurst+2 {
		t.Fatalf("relayed %d", len(rec.relayed))
	}
	if n := outcomes(t, s, "limited"); n != 2 {
		t.Fatalf("limited %v", n)
	}
	rec.err = status.Error(codes.ResourceExhausted, "slow down")
	if err := s.RelayCancellation(t.Context(), "session-c", "r", id); !errors.Is(err, ErrCancellationsLimited) {
		t.Fatalf("the indexer refused: %v", err)
	}
	rec.err = status.Error(codes.PermissionDenied, "not allowed")
	if err := s.RelayCancellation(t.Context(), "session-d", "r2", id); err != nil {
		t.Fatalf("an indexer that does not allow it: %v", err)
	}
	// The replica's relays in flight are bounded too.
	for range maxCancelsInFlight {
		s.cancels.inFlight <- struct{}{}
	}
	if err := s.RelayCancellation(t.Context(), "session-e", "r3", id); !errors.Is(err, ErrCancellationsLimited) {
		t.Fatalf("with the relays in flight at their bound: %v", err)
	}
}

// The principals whose rates are held are bounded: those that may relay a
// whole burst again make room for new ones.
func TestRelayCancellationPrincipalsBounded(t *testing.T) {
	r := newCancelRelay()
	now := time.Now()
	for i := range maxRatedPrincipals {
		if !r.allow(string(rune(i)), 1, now) {
			t.Fatalf("principal %d refused", i)
		}
	}
	if r.allow("one more", 1, now) {
		t.Fatal("a principal past the bound was let in while every other's bucket is in use")
	}
	if !r.allow("one more", 1, now.Add(time.Second)) {
		t.Fatal("no room made once the buckets refilled")
	}
	if len(r.rates) != 1 {
		t.Fatalf("%d principals held", len(r.rates))
	}
}

// A relayed cancellation ends the request it names only in its own
// session, as a local one does.
func TestRelayedCancellationCancelsOnlyItsSessionsRequest(t *testing.T) {
	s := newCancelShared(&cancelRecorder{})
	ctx, cancel := context.WithCancel(t.Context())
	cancelled, done := s.local.Track("session-a", json.RawMessage(`7`), cancel)
	defer done()
	for _, c := range []*indexerv1.RelayedCancellation{
		{SessionDigest: "session-b", RequestIdJson: `7`},
		{SessionDigest: "session-a", RequestIdJson: `"7"`},
		{SessionDigest: "session-a", RequestIdJson: `8`},
	} {
		s.applyCancellation(c)
		if ctx.Err() != nil || cancelled() {
			t.Fatalf("%v cancelled session-a's request 7", c)
		}
	}
	s.applyCancellation(&indexerv1.RelayedCancellation{SessionDigest: "session-a", RequestIdJson: `7`})
	if ctx.Err() == nil || !cancelled() {
		t.Fatal("the relayed cancellation did not end the request")
	}
	if n := outcomes(t, s, "applied"); n != 1 {
		t.Fatalf("applied %v", n)
	}
}

// TestFailedCancellationRelaysLogBounded: while the indexer cannot take
// cancellations, each one a client sends is counted but logged at most
// once a minute: a client could otherwise fill the log at its
// cancellation budget for as long as the outage lasts.
func TestFailedCancellationRelaysLogBounded(t *testing.T) {
	var logs bytes.Buffer
	s := newCancelShared(&cancelRecorder{err: status.Error(codes.Unavailable, "indexer down")})
	s.log = slog.New(slog.NewTextHandler(&logs, nil))
	for i := range 20 {
		_ = s.RelayCancellation(t.Context(), "session-a", "one-client", json.RawMessage(strconv.Itoa(i)))
	}
	if n := strings.Count(logs.String(), "level=WARN"); n != 1 {
		t.Errorf("one client's 20 cancellations while the indexer is down: %d warnings, want 1", n)
	}
	if got := outcomes(t, s, "failed"); got != 20 {
		t.Errorf("failed cancellations counted %v, want 20", got)
	}
}
