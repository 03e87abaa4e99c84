package app_test

import (
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// eventsWatcher collects what one WatchSessionEvents stream delivers.
type eventsWatcher struct {
	msgs chan *indexerv1.WatchSessionEventsResponse
	errs chan error
}

// watchEvents opens a stream for replica once the indexer has read the
// states (until then it ends at once with NOT_READY) and reads its
// snapshot.
func (h *harness) watchEvents(t *testing.T, replica string) (*eventsWatcher, []*indexerv1.SessionState) {
	t.Helper()
	var w *eventsWatcher
	var snapshot []*indexerv1.SessionState
	testkit.Eventually(t, "the session event stream to open", 30*time.Second, func() bool {
		stream, err := h.client.WatchSessionEvents(t.Context(), &indexerv1.WatchSessionEventsRequest{ReplicaId: replica})
		if err != nil {
			t.Fatal(err)
		}
		w = &eventsWatcher{msgs: make(chan *indexerv1.WatchSessionEventsResponse, 100), errs: make(chan error, 1)}
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
		for {
			select {
			case err := <-w.errs:
				wantReason(t, err, codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_NOT_READY)
				return false
			case msg := <-w.msgs:
				snapshot = append(snapshot, msg.GetStates()...)
				if msg.GetSnapshotComplete() {
					return true
				}
			case <-time.After(30 * time.Second):
				t.Fatal("no snapshot")
			}
		}
	})
	return w, snapshot
}

func (w *eventsWatcher) next(t *testing.T, what string) *indexerv1.WatchSessionEventsResponse {
	t.Helper()
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

// The session state RPCs through the server: what they refuse, the bounds
// of gateway.sessions (defaults here), the stream, deletion, and relayed
// answers reaching their owner's stream only, once.
func TestSessionStateRPCs(t *testing.T) {
	h := start(t, env.NewDatabase(t))
	h.waitServing(t)
	session, principal := strings.Repeat("1a", 32), strings.Repeat("2b", 32)
	at := time.Now().Add(time.Hour).Truncate(time.Second)
	update := func(change func(*indexerv1.UpdateSessionStateRequest)) (*indexerv1.UpdateSessionStateResponse, error) {
		req := &indexerv1.UpdateSessionStateRequest{SessionDigest: session, PrincipalDigest: principal, ExpiresAt: timestamppb.New(at)}
		change(req)
		return h.client.UpdateSessionState(t.Context(), req)
	}
	subscribe := func(uri string) func(*indexerv1.UpdateSessionStateRequest) {
		return func(r *indexerv1.UpdateSessionStateRequest) {
			r.Change = &indexerv1.UpdateSessionStateRequest_SubscribeUri{SubscribeUri: uri}
		}
	}
	for name, change := range map[string]func(*indexerv1.UpdateSessionStateRequest){
		"no change": func(*indexerv1.UpdateSessionStateRequest) {},
		"a bad level": func(r *indexerv1.UpdateSessionStateRequest) {
			r.Change = &indexerv1.UpdateSessionStateRequest_LogLevel{LogLevel: "loud"}
		},
		"an empty URI":    subscribe(""),
		"a URI too long":  subscribe(strings.Repeat("u", 4097)),
		"a bad principal": func(r *indexerv1.UpdateSessionStateRequest) { r.PrincipalDigest = "me"; subscribe("a://1")(r) },
		"no expiry":       func(r *indexerv1.UpdateSessionStateRequest) { r.ExpiresAt = nil; subscribe("a://1")(r) },
	} {
		if _, err := update(change); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want INVALID_ARGUMENT", name, err)
		}
	}
	w, snapshot := h.watchEvents(t, "gw-1")
	if len(snapshot) != 0 {
		t.Fatalf("snapshot of an empty database: %v", snapshot)
	}
	other, _ := h.watchEvents(t, "gw-2")
	resp, err := update(func(r *indexerv1.UpdateSessionStateRequest) {
		r.Change = &indexerv1.UpdateSessionStateRequest_LogLevel{LogLevel: "info"}
	})
	if err != nil || resp.GetState().GetLogLevel() != "info" || resp.GetState().GetVersion() == 0 {
		t.Fatalf("setting the level: %v %v", resp, err)
	}
	if got := w.next(t, "the level").GetStates(); len(got) != 1 || got[0].GetLogLevel() != "info" || got[0].GetVersion() != resp.GetState().GetVersion() {
		t.Fatalf("stream delivered %v", got)
	}
	for i := range 256 {
		if _, err := update(subscribe("a://" + string(rune('a'+i%26)) + strings.Repeat("x", i))); err != nil {
			t.Fatalf("subscription %d: %v", i, err)
		}
	}
	_, err = update(subscribe("a://one-too-many"))
	wantReason(t, err, codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_TOO_MANY_SUBSCRIPTIONS)
	_, err = update(subscribe(strings.Repeat("u", 4097)))
	wantReason(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_URI_TOO_LONG)

	relay := func(owner, id, answer string) error {
		_, err := h.client.RelayInputResponse(t.Context(), &indexerv1.RelayInputResponseRequest{OwnerReplica: owner, ExpiresAt: timestamppb.New(at), PrincipalDigest: principal,
			Response: &indexerv1.RelayedInputResponse{SessionDigest: session, RequestIdJson: id, ResponseJson: answer}})
		return err
	}
	if err := relay("gw-1", `"i1.x"`, `{"result":{"action":"accept"}}`); err != nil {
		t.Fatal(err)
	}
	if err := relay("gw-1", `"i1.x"`, `{"result":{"action":"decline"}}`); status.Code(err) != codes.AlreadyExists {
		t.Fatalf("a second answer: %v, want ALREADY_EXISTS", err)
	}
	if _, err := h.client.RelayInputResponse(t.Context(), &indexerv1.RelayInputResponseRequest{OwnerReplica: "gw-1", ExpiresAt: timestamppb.New(at), PrincipalDigest: "me",
		Response: &indexerv1.RelayedInputResponse{SessionDigest: session, RequestIdJson: `"i1.z"`, ResponseJson: `{}`}}); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("an answer naming a principal that is no digest: %v, want INVALID_ARGUMENT", err)
	}
	// One id has one spelling: another escaping of "i1.x" is refused, not
	// taken as a second request.
	for _, spelling := range []string{`"\u00691.x"`, `"i1\u002ex"`, `7`} {
		if err := relay("gw-1", spelling, `{"result":{"action":"decline"}}`); status.Code(err) != codes.InvalidArgument {
			t.Fatalf("the id spelt %s: %v, want INVALID_ARGUMENT", spelling, err)
		}
	}
	if err := relay("gw-1", `"i1.y"`, `{"result":"`+strings.Repeat("a", 4<<20)+`"}`); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("an answer over 4 MiB: %v, want INVALID_ARGUMENT", err)
	}
	for {
		msg := w.next(t, "the answer")
		if rs := msg.GetInputResponses(); len(rs) > 0 {
			if len(rs) != 1 || rs[0].GetRequestIdJson() != `"i1.x"` || rs[0].GetResponseJson() != `{"result":{"action":"accept"}}` {
				t.Fatalf("answers delivered %v", rs)
			}
			break
		}
	}

	// Deleting the session drops its state, on every stream; it gets no
	// state after. gw-2 never heard the answer meant for gw-1.
	if err := h.revoke(t, session, at); err != nil {
		t.Fatal(err)
	}
	for name, s := range map[string]*eventsWatcher{"gw-1": w, "gw-2": other} {
		for {
			msg := s.next(t, name+": the removal")
			if len(msg.GetInputResponses()) > 0 {
				t.Fatalf("%s heard answers %v", name, msg.GetInputResponses())
			}
			if st := msg.GetStates(); len(st) > 0 && st[len(st)-1].GetRemoved() {
				break
			}
		}
	}
	if _, err := update(subscribe("a://again")); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("a change of the deleted session: %v, want FAILED_PRECONDITION", err)
	}
	if _, snapshot := h.watchEvents(t, "gw-3"); len(snapshot) != 0 {
		t.Fatalf("snapshot after the deletion: %v", snapshot)
	}
}

// A relayed cancellation reaches every gateway replica's stream (the owner
// is unknown), as it was sent; bad ones are refused, and a caller that
// relays too fast is held back.
func TestRelayCancellationRPC(t *testing.T) {
	h := start(t, env.NewDatabase(t))
	session := strings.Repeat("ab", 32)
	relay := func(digest, id string) error {
		_, err := h.client.RelayCancellation(t.Context(), &indexerv1.RelayCancellationRequest{
			Cancellation: &indexerv1.RelayedCancellation{SessionDigest: digest, RequestIdJson: id}})
		return err
	}
	w1, _ := h.watchEvents(t, "gw-1")
	w2, _ := h.watchEvents(t, "gw-2")
	for name, err := range map[string]error{
		"a bad digest":   relay("me", `7`),
		"an object id":   relay(session, `{"id":7}`),
		"a null id":      relay(session, `null`),
		"no id":          relay(session, ``),
		"an id too long": relay(session, `"`+strings.Repeat("x", 256)+`"`),
		"not JSON":       relay(session, `7 8`),
		"no cancellation": func() error {
			_, err := h.client.RelayCancellation(t.Context(), &indexerv1.RelayCancellationRequest{})
			return err
		}(),
		"a boolean id":     relay(session, `true`),
		"an unquoted word": relay(session, `call`),
	} {
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("%s: %v, want INVALID_ARGUMENT", name, err)
		}
	}
	if err := relay(session, `"call 7"`); err != nil {
		t.Fatal(err)
	}
	for name, w := range map[string]*eventsWatcher{"gw-1": w1, "gw-2": w2} {
		msg := w.next(t, name+": the cancellation")
		if cs := msg.GetCancellations(); len(cs) != 1 || cs[0].GetSessionDigest() != session || cs[0].GetRequestIdJson() != `"call 7"` ||
			len(msg.GetStates())+len(msg.GetInputResponses()) != 0 {
			t.Fatalf("%s heard %v", name, msg)
		}
	}
	// Nothing was stored: a stream opened now hears no cancellation.
	w3, snapshot := h.watchEvents(t, "gw-3")
	if len(snapshot) != 0 {
		t.Fatalf("snapshot %v", snapshot)
	}
	select {
	case msg := <-w3.msgs:
		t.Fatalf("a stream opened after the cancellation heard %v", msg)
	case <-time.After(200 * time.Millisecond):
	}

	// A flood: the burst (400) passes, then the caller is refused. Eight
	// relayers outpace the refill (200/s) unless one relay takes 40 ms;
	// the exact arithmetic is TestCancellationRateQuota's, on a frozen
	// clock. A refusal stops the relayers after their calls in flight,
	// which are counted.
	var relayed, refused atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	deadline := start.Add(time.Minute)
	for range 8 {
		wg.Go(func() {
			for refused.Load() == 0 && time.Now().Before(deadline) && !t.Failed() {
				switch err := relay(session, `1`); {
				case err == nil:
					relayed.Add(1)
				case status.Code(err) == codes.ResourceExhausted:
					refused.Add(1)
				default:
					t.Errorf("cancellation: %v, want RESOURCE_EXHAUSTED", err)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	if refused.Load() == 0 {
		t.Fatalf("%d cancellations relayed in %.1fs and none refused", relayed.Load(), elapsed)
	}
	if n := float64(relayed.Load()); n < 400 || n > 400+200*elapsed+1 {
		t.Fatalf("%.0f cancellations relayed in %.2fs before the flood was refused, want the burst of 400 and at most 200/s more", n, elapsed)
	}
}
