package app_test

import (
	"fmt"
	"maps"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// watcher collects what one WatchRevocations stream delivers.
type watcher struct {
	msgs chan *indexerv1.WatchRevocationsResponse
	errs chan error
	// first is a message already read (readyWatch), returned by next first.
	first *indexerv1.WatchRevocationsResponse
}

// readyWatch opens a stream once the replica has read the revocations: until
// then a stream ends at once with NOT_READY, and a client opens it again.
func (h *harness) readyWatch(t *testing.T, what string) *watcher {
	t.Helper()
	var w *watcher
	testkit.Eventually(t, what+" to open", 30*time.Second, func() bool {
		w = h.watch(t)
		select {
		case err := <-w.errs:
			wantReason(t, err, codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_NOT_READY)
			return false
		case w.first = <-w.msgs:
			return true
		case <-time.After(30 * time.Second):
			t.Fatalf("no answer on %s", what)
		}
		return false
	})
	return w
}

func (h *harness) watch(t *testing.T) *watcher {
	t.Helper()
	stream, err := h.client.WatchRevocations(t.Context(), &indexerv1.WatchRevocationsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	w := &watcher{msgs: make(chan *indexerv1.WatchRevocationsResponse, 100), errs: make(chan error, 1)}
	go func() {
		for {
			msg, err := stream.Recv()
			if err != nil {
				w.errs <- err
				return
			}
			w.msgs <- msg
		}
	}()
	return w
}

// next returns the next message, failing the test if none comes in time.
func (w *watcher) next(t *testing.T, what string) *indexerv1.WatchRevocationsResponse {
	t.Helper()
	if msg := w.first; msg != nil {
		w.first = nil
		return msg
	}
	select {
	case msg := <-w.msgs:
		return msg
	case err := <-w.errs:
		t.Fatalf("%s: stream ended: %v", what, err)
	case <-time.After(30 * time.Second):
		t.Fatalf("timed out waiting for %s", what)
	}
	return nil
}

// snapshot reads the initial snapshot.
func (w *watcher) snapshot(t *testing.T) map[string]time.Time {
	t.Helper()
	got := map[string]time.Time{}
	for {
		msg := w.next(t, "the snapshot")
		for _, r := range msg.GetRevocations() {
			got[r.GetSessionDigest()] = r.GetExpiresAt().AsTime()
		}
		if msg.GetSnapshotComplete() {
			return got
		}
	}
}

// revocationMargin is how long past the expiry it is given the indexer
// keeps a revocation (its allowance for a gateway's clock running
// behind): a stream reports that later expiry.
const revocationMargin = 5 * time.Minute

func (h *harness) revoke(t *testing.T, digest string, at time.Time) error {
	_, err := h.client.RevokeSession(t.Context(), &indexerv1.RevokeSessionRequest{SessionDigest: digest, ExpiresAt: timestamppb.New(at)})
	return err
}

// A revocation recorded through one replica reaches the WatchRevocations
// streams of every replica; a stream opened later gets it in its
// snapshot.
func TestRevocationsReachEveryReplica(t *testing.T) {
	db := env.NewDatabase(t)
	a := start(t, db)
	b := a.replica(t, db)
	a.waitServing(t)
	b.waitServing(t)
	before := strings.Repeat("0a", 32)
	asked := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	at := asked.Add(revocationMargin)
	if err := a.revoke(t, before, asked); err != nil {
		t.Fatal(err)
	}
	// The hub of b reads the revocations when its listen starts; until
	// then its stream answers NOT_READY, and the client retries.
	var wb *watcher
	var first *indexerv1.WatchRevocationsResponse
	testkit.Eventually(t, "b's stream to open", 30*time.Second, func() bool {
		wb = b.watch(t)
		select {
		case err := <-wb.errs:
			wantReason(t, err, codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_NOT_READY)
			return false
		case first = <-wb.msgs:
			return true
		case <-time.After(30 * time.Second):
			t.Fatal("no answer on b's stream")
		}
		return false
	})
	// b hears of the revocation recorded through a either before its
	// stream opened (then it is in the snapshot) or just after (then it
	// follows the snapshot).
	heard := map[string]time.Time{}
	for _, r := range first.GetRevocations() {
		heard[r.GetSessionDigest()] = r.GetExpiresAt().AsTime()
	}
	if !first.GetSnapshotComplete() {
		maps.Copy(heard, wb.snapshot(t))
	}
	for !heard[before].Equal(at) {
		for _, r := range wb.next(t, "the earlier revocation on b's stream").GetRevocations() {
			heard[r.GetSessionDigest()] = r.GetExpiresAt().AsTime()
		}
	}
	if len(heard) != 1 {
		t.Fatalf("b's stream delivered %v, want %s… until %v only", heard, before[:4], at)
	}
	wa := a.readyWatch(t, "a's stream")
	if got := wa.snapshot(t); len(got) != 1 || !got[before].Equal(at) {
		t.Fatalf("a's snapshot %v", got)
	}

	after := strings.Repeat("0b", 32)
	if err := a.revoke(t, after, asked); err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string]*watcher{"a": wa, "b": wb} {
		msg := w.next(t, name+"'s stream to deliver the new revocation")
		if len(msg.GetRevocations()) != 1 || msg.GetRevocations()[0].GetSessionDigest() != after || !msg.GetRevocations()[0].GetExpiresAt().AsTime().Equal(at) || msg.GetSnapshotComplete() {
			t.Fatalf("%s's stream delivered %v", name, msg)
		}
	}
	// Through b this time, extending the first one: both hear the later
	// expiry.
	if err := b.revoke(t, before, asked.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string]*watcher{"a": wa, "b": wb} {
		msg := w.next(t, name+"'s stream to deliver the extension")
		if len(msg.GetRevocations()) != 1 || !msg.GetRevocations()[0].GetExpiresAt().AsTime().Equal(at.Add(time.Hour)) {
			t.Fatalf("%s's stream delivered %v", name, msg)
		}
	}
	// CheckSession, kept for older gateways, agrees.
	resp, err := b.client.CheckSession(t.Context(), &indexerv1.CheckSessionRequest{SessionDigest: after})
	if err != nil || !resp.GetRevoked() {
		t.Fatalf("CheckSession: %v, %v", resp, err)
	}
}

// A revocation may not outlive the longest session (24h by default, with
// a few minutes for clock skew): one asked to expire later is kept until
// then.
func TestRevocationExpiryIsBounded(t *testing.T) {
	h := start(t, env.NewDatabase(t))
	h.waitServing(t)
	full, further := strings.Repeat("0c", 32), strings.Repeat("0d", 32)
	if err := h.revoke(t, full, time.Now().Add(24*time.Hour)); err != nil {
		t.Fatalf("a full session TTL ahead: %v", err)
	}
	if err := h.revoke(t, further, time.Now().Add(25*time.Hour)); err != nil {
		t.Fatalf("further ahead than a session lives: %v, want it clamped", err)
	}
	latest := time.Now().Add(24*time.Hour + 5*time.Minute + revocationMargin)
	snap := h.readyWatch(t, "the revocation stream").snapshot(t)
	if at, ok := snap[further]; !ok || at.After(latest) || at.Before(time.Now().Add(24*time.Hour)) {
		t.Fatalf("the clamped revocation expires at %v (held %v), want by %v", at, ok, latest)
	}
	_, err := h.client.RevokeSession(t.Context(), &indexerv1.RevokeSessionRequest{SessionDigest: full, ExpiresAt: &timestamppb.Timestamp{Seconds: 1, Nanos: -5}})
	wantReason(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	_, err = h.client.RevokeSession(t.Context(), &indexerv1.RevokeSessionRequest{SessionDigest: full})
	wantReason(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
}

// gateway.sessions.ttl bounds how long a revocation is kept, and a reload
// applies a change of it: the gateways take a longer TTL when they
// restart, and revocations still cut to the shorter one would let a
// deleted session open again on every replica once they expired.
func TestRevocationTTLFollowsAReload(t *testing.T) {
	db := env.NewDatabase(t)
	aggSrv := testkit.Serve(t, []config.ServiceCredential{{Name: "indexer", Token: fakeAggregatorToken, AssertPrincipals: true, Allow: config.IndexerMethods}},
		(&testkit.FakeAggregator{}).Register)
	path := filepath.Join(t.TempDir(), "switchboard.yaml")
	file := func(sessionTTL string) string {
		return fmt.Sprintf(`reload: {interval: 100ms}
serviceAuth:
  credentials:
    - {name: gateway, token: %s, role: gateway}
indexer:
  listen: 127.0.0.1:0
  database: %q
  aggregator: {address: %s, token: %s}
gateway:
  sessions: {ttl: %s}
`, gatewayToken, db, aggSrv.Addr, fakeAggregatorToken, sessionTTL)
	}
	writeConfig(t, path, file("1h"))
	h := startWatching(t, path)
	h.client = h.as(t, gatewayToken)
	digest := strings.Repeat("0e", 32)
	testkit.Eventually(t, "the indexer serves", 30*time.Second, func() error {
		_, err := h.client.CheckSession(t.Context(), &indexerv1.CheckSessionRequest{SessionDigest: digest})
		return err
	})
	writeConfig(t, path, file("24h"))
	testkit.Eventually(t, "the reload in force", 10*time.Second, func() bool {
		return h.logs.count("configuration reloaded") == 1
	})
	wanted := time.Now().Add(23 * time.Hour)
	if err := h.revoke(t, digest, wanted); err != nil {
		t.Fatal(err)
	}
	if at := h.readyWatch(t, "the revocation stream").snapshot(t)[digest]; at.Before(wanted.Add(-time.Second)) {
		t.Fatalf("a revocation asked to last 23h under a 24h session TTL expires in %v", time.Until(at).Round(time.Minute))
	}
	if n := h.logs.count("needs a restart"); n != 0 {
		t.Fatalf("the TTL change logged as needing a restart:\n%s", h.logs.String())
	}
}
