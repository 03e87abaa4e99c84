package sessionevents

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
	"github.com/switchboard-mcp/switchboard/indexer/internal/store/postgres"
	"github.com/switchboard-mcp/switchboard/indexer/internal/storetest/pgtest"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

var env *pgtest.Env

func TestMain(m *testing.M) { pgtest.Main(m, &env) }

func digest(i int) string { return fmt.Sprintf("%064x", i) }

var limits = store.SessionStateLimits{Subscriptions: 2, URIBytes: 64, PerPrincipal: 2, PrincipalBytes: 4096}

var relayLimits = store.RelayLimits{PerSession: 3, SessionBytes: 1024}

// next waits for the next event on events.
func next(t *testing.T, events <-chan Event) Event {
	t.Helper()
	select {
	case ev, ok := <-events:
		if !ok {
			t.Fatal("events closed")
		}
		return ev
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	return Event{}
}

// subscribe subscribes replica to h's events once h can take subscribers
// (it has read the states), until the test ends.
func subscribe(t *testing.T, h *Hub, replica string) <-chan Event {
	t.Helper()
	var events <-chan Event
	testkit.Eventually(t, replica+" subscribed", 10*time.Second, func() error {
		_, ev, unsubscribe, err := h.Subscribe(replica)
		if err == nil {
			events = ev
			t.Cleanup(unsubscribe)
		}
		return err
	})
	return events
}

// A change made through one store handle reaches a hub following another
// (another replica) through LISTEN/NOTIFY, and deleting the session drops
// its state there too.
func TestChangesReachEveryReplica(t *testing.T) {
	url := env.NewDatabase(t)
	writer, reader := env.Open(t, url), env.Open(t, url)
	h := New(reader, time.Hour, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	events := subscribe(t, h, "replica-a")
	at := time.Now().Add(time.Hour)
	sub := store.SessionStateChange{Digest: digest(1), Principal: digest(100), ExpiresAt: at, Subscribe: "demo://a"}
	if _, err := writer.UpdateSessionState(t.Context(), sub, limits); err != nil {
		t.Fatal(err)
	}
	lvl := sub
	lvl.Subscribe, lvl.LogLevel = "", "debug"
	want, err := writer.UpdateSessionState(t.Context(), lvl, limits)
	if err != nil {
		t.Fatal(err)
	}
	var got Event
	for got = next(t, events); got.State.Version < want.Version; got = next(t, events) {
	}
	if got.State.LogLevel != "debug" || len(got.State.URIs) != 1 || got.State.URIs[0] != "demo://a" {
		t.Fatalf("state heard: %+v", got.State)
	}
	if err := writer.RevokeSession(t.Context(), digest(1), at); err != nil {
		t.Fatal(err)
	}
	if got = next(t, events); !got.Removed || got.State.Digest != digest(1) {
		t.Fatalf("after the deletion: %+v", got)
	}
	if _, err := writer.UpdateSessionState(t.Context(), sub, limits); !errors.Is(err, store.ErrSessionGone) {
		t.Fatalf("a change of a deleted session: %v", err)
	}

	// An answer recorded through the writer reaches the owner's stream
	// only, once.
	r := store.InputResponse{Owner: "replica-a", SessionDigest: digest(2), RequestID: `"sb-1"`, Response: `{"result":{}}`, ExpiresAt: at}
	if _, err := writer.RelayInputResponse(t.Context(), r, relayLimits); err != nil {
		t.Fatal(err)
	}
	if got = next(t, events); got.Response == nil || *got.Response != (store.InputResponse{Owner: r.Owner, SessionDigest: r.SessionDigest,
		RequestID: r.RequestID, Response: r.Response, ExpiresAt: got.Response.ExpiresAt}) {
		t.Fatalf("answer heard: %+v", got)
	}
	if _, err := writer.RelayInputResponse(t.Context(), r, relayLimits); !errors.Is(err, store.ErrAlreadyAnswered) {
		t.Fatalf("a second answer: %v", err)
	}
	r.Owner, r.RequestID = "replica-b", `"sb-2"`
	if _, err := writer.RelayInputResponse(t.Context(), r, relayLimits); err != nil {
		t.Fatal(err)
	}
	r.Owner, r.RequestID = "replica-a", `"sb-3"`
	if _, err := writer.RelayInputResponse(t.Context(), r, relayLimits); err != nil {
		t.Fatal(err)
	}
	if got = next(t, events); got.Response == nil || got.Response.RequestID != `"sb-3"` {
		t.Fatalf("after another replica's answer, heard %+v, want this replica's next answer only", got)
	}
	// The session's bounds hold whichever replica an answer reaches: its
	// fourth answer is refused, and another session's answers count bytes.
	r.RequestID = `"sb-4"`
	if _, err := writer.RelayInputResponse(t.Context(), r, relayLimits); !errors.Is(err, store.ErrRelaysFull) {
		t.Fatalf("a fourth answer of the session: %v, want ErrRelaysFull", err)
	}
	r.SessionDigest, r.RequestID, r.Response = digest(3), `"sb-5"`, `"`+strings.Repeat("a", 600)+`"`
	if _, err := writer.RelayInputResponse(t.Context(), r, relayLimits); err != nil {
		t.Fatal(err)
	}
	r.RequestID = `"sb-6"`
	if _, err := reader.RelayInputResponse(t.Context(), r, relayLimits); !errors.Is(err, store.ErrRelaysFull) {
		t.Fatalf("answers past the session's bytes: %v, want ErrRelaysFull", err)
	}
}

// Every bound is kept, and a refused change changes nothing.
func TestUpdateBounds(t *testing.T) {
	st := env.OpenStore(t)
	at := time.Now().Add(time.Hour)
	change := func(session, principal int, uri string) error {
		_, err := st.UpdateSessionState(t.Context(), store.SessionStateChange{Digest: digest(session), Principal: digest(principal), ExpiresAt: at, Subscribe: uri}, limits)
		return err
	}
	var bound *store.SessionStateBoundError
	if err := change(1, 100, strings.Repeat("u", 65)); !errors.As(err, &bound) || !bound.URI {
		t.Fatalf("a URI too long: %v", err)
	}
	for _, uri := range []string{"demo://a", "demo://b", "demo://b"} {
		if err := change(1, 100, uri); err != nil {
			t.Fatal(err)
		}
	}
	if err := change(1, 100, "demo://c"); !errors.As(err, &bound) || bound.URI {
		t.Fatalf("a third subscription: %v", err)
	}
	if err := change(2, 100, "demo://a"); err != nil {
		t.Fatal(err)
	}
	if err := change(3, 100, "demo://a"); !errors.As(err, &bound) {
		t.Fatalf("a third session of the principal: %v", err)
	}
	if err := change(3, 101, "demo://a"); err != nil {
		t.Fatalf("another principal: %v", err)
	}
	// Naming another principal for a session does not reach its state.
	if err := change(1, 101, "demo://z"); !errors.Is(err, store.ErrSessionGone) {
		t.Fatalf("another principal's session: %v", err)
	}
	got, found, err := st.SessionStateOf(t.Context(), digest(1))
	if err != nil || !found || len(got.URIs) != 2 || got.Principal != digest(100) {
		t.Fatalf("state after refusals: %+v %v %v", got, found, err)
	}
	if _, err := st.UpdateSessionState(t.Context(), store.SessionStateChange{Digest: digest(9), Principal: digest(100),
		ExpiresAt: time.Now().Add(-time.Second), LogLevel: "info"}, limits); !errors.Is(err, store.ErrSessionGone) {
		t.Fatalf("an expired session: %v", err)
	}
}

// A full read passes on what the announcements missed: a state written
// and one deleted while the hub was not listening.
func TestResyncRepairsWhatWasMissed(t *testing.T) {
	st := env.OpenStore(t)
	h := New(st, time.Hour, slog.New(slog.DiscardHandler))
	if err := h.Resync(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, events, cancel, err := h.Subscribe("replica-a")
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	at := time.Now().Add(time.Hour)
	gone, err := st.UpdateSessionState(t.Context(), store.SessionStateChange{Digest: digest(1), Principal: digest(100), ExpiresAt: at, LogLevel: "info"}, limits)
	if err != nil {
		t.Fatal(err)
	}
	h.Apply(gone)
	if ev := next(t, events); ev.State.Digest != digest(1) {
		t.Fatalf("applied: %+v", ev)
	}
	// Unheard: digest(1) is deleted and digest(2) gets state.
	if err := st.RevokeSession(t.Context(), digest(1), at); err != nil {
		t.Fatal(err)
	}
	if _, err := st.UpdateSessionState(t.Context(), store.SessionStateChange{Digest: digest(2), Principal: digest(100), ExpiresAt: at, Subscribe: "demo://b"}, limits); err != nil {
		t.Fatal(err)
	}
	if err := h.Resync(t.Context()); err != nil {
		t.Fatal(err)
	}
	heard := map[string]Event{}
	for range 2 {
		ev := next(t, events)
		heard[ev.State.Digest] = ev
	}
	if !heard[digest(1)].Removed || heard[digest(2)].Removed || len(heard[digest(2)].State.URIs) != 1 {
		t.Fatalf("after the full read: %+v", heard)
	}
	if h.Live() != 1 || h.Bytes() != heard[digest(2)].State.Cost() {
		t.Fatalf("holds %d states, %d bytes", h.Live(), h.Bytes())
	}
	// A session that holds nothing any more counts nothing against the
	// cluster's bound, though its (empty) state is still held.
	empty, err := st.UpdateSessionState(t.Context(), store.SessionStateChange{Digest: digest(2), Principal: digest(100), ExpiresAt: at, Unsubscribe: "demo://b"}, limits)
	if err != nil {
		t.Fatal(err)
	}
	h.Apply(empty)
	if h.Bytes() != 0 {
		t.Fatalf("a session holding nothing counts %d bytes", h.Bytes())
	}
}

// gatedListen is a store whose listens the test ends and admits: listen n
// waits for admit to be sent to, then follows until end is sent to.
type gatedListen struct {
	*postgres.Store
	admit, end chan struct{}
	listening  chan struct{}
}

func (g *gatedListen) ListenSessionEvents(ctx context.Context, listening func(), stateChanged func(string), answered func(int64), cancelled func(store.Cancellation)) error {
	select {
	case <-g.admit:
	case <-ctx.Done():
		return ctx.Err()
	}
	inner, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-g.end:
			cancel()
		case <-inner.Done():
		}
	}()
	err := g.Store.ListenSessionEvents(inner, func() { listening(); g.listening <- struct{}{} }, stateChanged, answered, cancelled)
	if ctx.Err() == nil {
		return errors.New("listen ended by the test")
	}
	return err
}

// Answers announced while nobody heard them still reach their owner: one
// recorded while the hub's listen was down, once the listen is back, and
// one recorded before its owner subscribed, when it does.
func TestAnswersMissedAreCaughtUp(t *testing.T) {
	url := env.NewDatabase(t)
	writer := env.Open(t, url)
	g := &gatedListen{Store: env.Open(t, url), admit: make(chan struct{}), end: make(chan struct{}), listening: make(chan struct{}, 1)}
	h := New(g, time.Hour, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	g.admit <- struct{}{}
	<-g.listening
	events := subscribe(t, h, "replica-a")
	at := time.Now().Add(time.Hour)
	heard := func(id string) {
		t.Helper()
		for {
			if ev := next(t, events); ev.Response != nil {
				if ev.Response.RequestID != id {
					t.Fatalf("heard the answer %s, want %s", ev.Response.RequestID, id)
				}
				return
			}
		}
	}
	r := store.InputResponse{Owner: "replica-a", SessionDigest: digest(1), RequestID: `"sb-1"`, Response: `{"result":{}}`, ExpiresAt: at}
	if _, err := writer.RelayInputResponse(t.Context(), r, relayLimits); err != nil {
		t.Fatal(err)
	}
	heard(`"sb-1"`)

	g.end <- struct{}{}
	r.RequestID = `"sb-2"`
	if _, err := writer.RelayInputResponse(t.Context(), r, relayLimits); err != nil {
		t.Fatal(err)
	}
	g.admit <- struct{}{}
	heard(`"sb-2"`)

	r.Owner, r.RequestID = "replica-b", `"sb-3"`
	if _, err := writer.RelayInputResponse(t.Context(), r, relayLimits); err != nil {
		t.Fatal(err)
	}
	_, late, unsubscribe, err := h.Subscribe("replica-b")
	if err != nil {
		t.Fatal(err)
	}
	defer unsubscribe()
	for {
		if ev := next(t, late); ev.Response != nil {
			if ev.Response.RequestID != `"sb-3"` {
				t.Fatalf("the late subscriber heard %s, want sb-3", ev.Response.RequestID)
			}
			break
		}
	}
}

// A subscriber is dropped once the events queued for it pass its byte
// budget, though far fewer than its count bound; one that takes what it is
// sent stays.
func TestSubscriberByteBudget(t *testing.T) {
	h := New(nil, time.Hour, slog.New(slog.DiscardHandler))
	h.synced = true
	_, slow, cancelSlow, _ := h.Subscribe("replica-a")
	defer cancelSlow()
	_, quick, cancelQuick, _ := h.Subscribe("replica-a")
	defer cancelQuick()
	answer := store.InputResponse{Owner: "replica-a", SessionDigest: digest(1), Response: strings.Repeat("a", 4<<20)}
	for i := range 2 * subscriberBytes / len(answer.Response) {
		answer.RequestID = fmt.Sprintf(`"sb-%d"`, i)
		h.mu.Lock()
		for s := range h.subs {
			if s.ch == quick {
				h.send(s, Event{Response: &answer})
			}
		}
		for s := range h.subs {
			if s.ch == slow {
				h.send(s, Event{Response: &answer})
			}
		}
		h.mu.Unlock()
		(<-quick).Taken()
	}
	for closed := false; !closed; {
		select {
		case _, ok := <-slow:
			closed = !ok
		default:
			t.Fatal("the subscriber that took nothing was not dropped past its byte budget")
		}
	}
	select {
	case _, ok := <-quick:
		t.Fatalf("the subscriber that keeps up heard more, or was dropped (open: %v)", ok)
	default:
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.subs) != 1 {
		t.Fatalf("%d subscribers, want only the one that kept up", len(h.subs))
	}
}

// A cancellation announced through one store handle reaches every
// subscriber of a hub following another, whichever replica they are; it is
// not stored, and a subscriber too far behind misses cancellations rather
// than being dropped for them.
func TestCancellationsReachEverySubscriber(t *testing.T) {
	url := env.NewDatabase(t)
	writer, reader := env.Open(t, url), env.Open(t, url)
	h := New(reader, time.Hour, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	a, b := subscribe(t, h, "replica-a"), subscribe(t, h, "replica-b")
	want := store.Cancellation{SessionDigest: digest(1), RequestID: `"call 1"`}
	// The listen may not be up yet when the hub first reads: announce
	// until a subscriber hears one.
	var got Event
	for deadline := time.Now().Add(10 * time.Second); got.Cancellation == nil; {
		if err := writer.RelayCancellation(t.Context(), want); err != nil {
			t.Fatal(err)
		}
		select {
		case got = <-a:
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no cancellation heard")
		}
	}
	if *got.Cancellation != want || got.Response != nil || got.State.Digest != "" {
		t.Fatalf("replica-a heard %+v", got)
	}
	if got = next(t, b); got.Cancellation == nil || *got.Cancellation != want {
		t.Fatalf("replica-b heard %+v", got)
	}
	if _, found, err := reader.SessionStateOf(t.Context(), digest(1)); err != nil || found {
		t.Fatalf("a cancellation left a state: %v %v", found, err)
	}

	// replica-c never reads: past its buffer it misses cancellations, and
	// still hears the next state change.
	slow := subscribe(t, h, "replica-c")
	for range subscriberBuffer + 10 {
		h.cancelled(want)
	}
	for range subscriberBuffer {
		if ev := next(t, slow); ev.Cancellation == nil {
			t.Fatalf("heard %+v, want a cancellation", ev)
		}
	}
	if _, err := writer.UpdateSessionState(t.Context(), store.SessionStateChange{Digest: digest(2), Principal: digest(100),
		ExpiresAt: time.Now().Add(time.Hour), LogLevel: "info"}, limits); err != nil {
		t.Fatal(err)
	}
	for {
		ev := next(t, slow)
		if ev.Cancellation != nil {
			continue
		}
		if ev.State.Digest != digest(2) {
			t.Fatalf("heard %+v, want the state of %s", ev, digest(2))
		}
		break
	}
}

// An answer both announced and read by a catch-up reaches its owner's
// stream once; another subscription of the same replica (a reconnected
// gateway) gets it again.
func TestAnswerReachesItsStreamOnce(t *testing.T) {
	h := New(nil, time.Hour, slog.New(slog.DiscardHandler))
	h.synced = true
	_, events, cancel, err := h.Subscribe("replica-a")
	if err != nil {
		t.Fatal(err)
	}
	r := store.InputResponse{Owner: "replica-a", SessionDigest: digest(1), RequestID: `"sb-1"`, Response: `{"result":{}}`}
	other := r
	other.RequestID = `"sb-2"`
	for _, resp := range []store.InputResponse{r, r, other, r} {
		if !h.deliver(resp) {
			t.Fatalf("%s not delivered", resp.RequestID)
		}
	}
	var got []string
	for len(events) > 0 {
		got = append(got, (<-events).Response.RequestID)
	}
	if !slices.Equal(got, []string{`"sb-1"`, `"sb-2"`}) {
		t.Errorf("the stream carried %v, want sb-1 and sb-2 once each", got)
	}
	cancel()
	_, again, cancel, err := h.Subscribe("replica-a")
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	h.deliver(r)
	if len(again) != 1 {
		t.Errorf("a new subscription got %d events, want the answer once", len(again))
	}
	for i := range 2 * rememberedAnswers {
		x := r
		x.RequestID = fmt.Sprint(i)
		h.deliver(x)
		<-again
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for sub := range h.subs {
		if n := len(sub.answered); n != rememberedAnswers || len(sub.answeredOrder) != rememberedAnswers {
			t.Errorf("a subscriber remembers %d answers (%d in order), want %d", n, len(sub.answeredOrder), rememberedAnswers)
		}
	}
}
