package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

func relay(t *testing.T, st store.SessionStates, r store.InputResponse, limits store.RelayLimits) int64 {
	t.Helper()
	id, err := st.RelayInputResponse(t.Context(), r, limits)
	if err != nil {
		t.Fatalf("relay %+v: %v", r, err)
	}
	return id
}

// wantAnswer fails unless the answer with id, read through st, is want.
func wantAnswer(t *testing.T, st store.SessionStates, id int64, want store.InputResponse, what string) {
	t.Helper()
	got, found, err := st.InputResponse(t.Context(), id)
	if err != nil || !found || got.Owner != want.Owner || got.SessionDigest != want.SessionDigest || got.RequestID != want.RequestID ||
		got.Response != want.Response || !got.ExpiresAt.Equal(want.ExpiresAt) {
		t.Fatalf("%s: answer %d is %+v (found %v, %v), want %+v", what, id, got, found, err, want)
	}
}

// answerIDs lists every id InputResponseIDs gives for owner above after,
// in pages of page, checking that each page is in order, above the last,
// and no longer than asked.
func answerIDs(t *testing.T, st store.SessionStates, owner string, after int64, page int) []int64 {
	t.Helper()
	var all []int64
	for range 1000 {
		ids, err := st.InputResponseIDs(t.Context(), owner, after, page)
		if err != nil {
			t.Fatal(err)
		}
		if len(ids) > page {
			t.Fatalf("answers of %q above %d: %v, more than the %d asked", owner, after, ids, page)
		}
		for _, id := range ids {
			if id <= after {
				t.Fatalf("answers of %q above %d: %v, not in order above it", owner, after, ids)
			}
			after = id
		}
		all = append(all, ids...)
		if len(ids) < page {
			return all
		}
	}
	t.Fatalf("answers of %q: no end after 1000 pages", owner)
	return nil
}

// A relayed answer is read back, field for field, through another handle,
// by the id it got; ids grow in the order answers are recorded. A request
// of a session is answered once, whatever handle a second answer comes
// through; the same request id in another session is another request. A
// session holds at most PerSession answers and SessionBytes of them,
// another session's are its own, and a refused answer is not recorded.
// The live answers are listed by id, for one owner or all, in pages.
func inputResponsesRelayed(t *testing.T, open Open[SessionStateStore]) {
	one, two := open(t), open(t)
	ctx := t.Context()
	at := inAnHour()
	limits := store.RelayLimits{PerSession: 3, SessionBytes: 1 << 20}
	answer := func(owner string, s int, request, response string) store.InputResponse {
		return store.InputResponse{Owner: owner, SessionDigest: session(s), RequestID: request, Response: response, ExpiresAt: at}
	}
	first := answer("replica-a", 1, `"r1"`, `{"action":"accept","content":{"n":1}}`)
	id1 := relay(t, one, first, limits)
	wantAnswer(t, two, id1, first, "read through another handle")
	for _, st := range []store.SessionStates{one, two} {
		if _, err := st.RelayInputResponse(ctx, answer("replica-b", 1, `"r1"`, `{"action":"decline"}`), limits); !errors.Is(err, store.ErrAlreadyAnswered) {
			t.Fatalf("a second answer to the same request: %v, want ErrAlreadyAnswered", err)
		}
	}
	wantAnswer(t, one, id1, first, "after a second answer")

	id2 := relay(t, two, answer("replica-b", 2, `"r1"`, `{}`), limits) // another session's r1
	id3 := relay(t, one, answer("replica-a", 1, `"r2"`, `{}`), limits)
	id4 := relay(t, two, answer("replica-a", 1, `"r3"`, `[1,2,3]`), limits)
	if !(id1 < id2 && id2 < id3 && id3 < id4) {
		t.Fatalf("ids %d, %d, %d, %d: want them growing in the order recorded", id1, id2, id3, id4)
	}
	if _, err := one.RelayInputResponse(ctx, answer("replica-a", 1, `"r4"`, `{}`), limits); !errors.Is(err, store.ErrRelaysFull) {
		t.Fatalf("a fourth answer of a session that may hold 3: %v, want ErrRelaysFull", err)
	}
	id5 := relay(t, one, answer("replica-b", 2, `"r2"`, `{}`), limits) // another session has room

	// The bytes: a session of 100 bytes takes one answer of 60, not two,
	// and still a small one.
	byBytes := store.RelayLimits{PerSession: 10, SessionBytes: 100}
	big := `"` + strings.Repeat("x", 58) + `"`
	id6 := relay(t, two, answer("replica-c", 3, `"b1"`, big), byBytes)
	if _, err := one.RelayInputResponse(ctx, answer("replica-c", 3, `"b2"`, big), byBytes); !errors.Is(err, store.ErrRelaysFull) {
		t.Fatalf("a second answer of 60 bytes in a session of 100: %v, want ErrRelaysFull", err)
	}
	id7 := relay(t, one, answer("replica-c", 3, `"b3"`, `1`), byBytes)

	// Listing: the refused answers are not there.
	all := []int64{id1, id2, id3, id4, id5, id6, id7}
	for _, page := range []int{100, 2, 1} {
		if got := answerIDs(t, two, "", 0, page); !slices.Equal(got, all) {
			t.Fatalf("every answer, in pages of %d: %v, want %v", page, got, all)
		}
	}
	for owner, want := range map[string][]int64{"replica-a": {id1, id3, id4}, "replica-b": {id2, id5}, "replica-c": {id6, id7}, "replica-d": nil} {
		if got := answerIDs(t, one, owner, 0, 2); !slices.Equal(got, want) {
			t.Fatalf("answers of %s: %v, want %v", owner, got, want)
		}
	}
	if got := answerIDs(t, one, "replica-a", id1, 100); !slices.Equal(got, []int64{id3, id4}) {
		t.Fatalf("answers of replica-a above %d: %v, want %v", id1, got, []int64{id3, id4})
	}
	if got := answerIDs(t, two, "", id7, 100); len(got) != 0 {
		t.Fatalf("answers above the last: %v", got)
	}
	if got, found, err := one.InputResponse(ctx, id7+1000); err != nil || found {
		t.Fatalf("an answer never recorded: %+v, found %v, %v", got, found, err)
	}
}

// Of many answers to one request through two handles (replicas) at once,
// exactly one is recorded, and it is the one read back; of many answers to
// distinct requests of one session at once, exactly as many as it may hold.
func inputResponsesAnsweredOnceAcrossHandles(t *testing.T, open Open[SessionStateStore]) {
	handles := []SessionStateStore{open(t), open(t)}
	ctx := t.Context()
	at := inAnHour()
	limits := store.RelayLimits{PerSession: 5, SessionBytes: 1 << 20}
	var mu sync.Mutex
	won := map[int64]string{}
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			response := fmt.Sprintf(`{"n":%d}`, i)
			id, err := handles[i%2].RelayInputResponse(ctx, store.InputResponse{Owner: "replica-a", SessionDigest: session(1), RequestID: `"r1"`, Response: response, ExpiresAt: at}, limits)
			switch {
			case err == nil:
				mu.Lock()
				won[id] = response
				mu.Unlock()
			case !errors.Is(err, store.ErrAlreadyAnswered):
				t.Errorf("answer %d: %v, want success or ErrAlreadyAnswered", i, err)
			}
		})
	}
	wg.Wait()
	if len(won) != 1 {
		t.Fatalf("%d of 16 concurrent answers to one request were recorded (%v), want exactly 1", len(won), won)
	}
	for id, response := range won {
		wantAnswer(t, handles[1], id, store.InputResponse{Owner: "replica-a", SessionDigest: session(1), RequestID: `"r1"`, Response: response, ExpiresAt: at}, "the one answer recorded")
	}

	var landed []int64
	for i := range 16 {
		wg.Go(func() {
			id, err := handles[i%2].RelayInputResponse(ctx, store.InputResponse{Owner: "replica-b", SessionDigest: session(2), RequestID: fmt.Sprintf(`"q%d"`, i), Response: `{}`, ExpiresAt: at}, limits)
			switch {
			case err == nil:
				mu.Lock()
				landed = append(landed, id)
				mu.Unlock()
			case !errors.Is(err, store.ErrRelaysFull):
				t.Errorf("answer to q%d: %v, want success or ErrRelaysFull", i, err)
			}
		})
	}
	wg.Wait()
	slices.Sort(landed)
	if got := answerIDs(t, handles[0], "replica-b", 0, 100); len(landed) != limits.PerSession || !slices.Equal(got, landed) {
		t.Fatalf("%d of 16 concurrent answers to a session that may hold %d were recorded (%v), %v listed", len(landed), limits.PerSession, landed, got)
	}
}

// An answer lives until its expiry: then it is not read, not listed, and
// no longer counts against its session's bounds; garbage collection purges
// it.
func inputResponsesExpire(t *testing.T, open Open[SessionStateStore]) {
	one, two := open(t), open(t)
	ctx := t.Context()
	limits := store.RelayLimits{PerSession: 1, SessionBytes: 1 << 20}
	soon := time.Now().Add(2 * time.Second).Truncate(time.Microsecond)
	short := store.InputResponse{Owner: "replica-a", SessionDigest: session(1), RequestID: `"r1"`, Response: `{}`, ExpiresAt: soon}
	id1 := relay(t, one, short, limits)
	live := store.InputResponse{Owner: "replica-b", SessionDigest: session(2), RequestID: `"r1"`, Response: `{}`, ExpiresAt: inAnHour()}
	id2 := relay(t, two, live, limits)
	wantAnswer(t, two, id1, short, "the short-lived answer")
	next := store.InputResponse{Owner: "replica-a", SessionDigest: session(1), RequestID: `"r2"`, Response: `{}`, ExpiresAt: inAnHour()}
	id3, err := one.RelayInputResponse(ctx, next, limits)
	switch inTime := time.Now().Before(soon); {
	case inTime && !errors.Is(err, store.ErrRelaysFull):
		t.Fatalf("a second answer of a session that may hold 1: %v, want ErrRelaysFull", err)
	case !inTime && err != nil && !errors.Is(err, store.ErrRelaysFull): // the first may have expired already (a very slow machine)
		t.Fatal(err)
	}
	testkit.Eventually(t, "the short-lived answer to expire", pollDeadline, func() bool {
		_, found, err := two.InputResponse(ctx, id1)
		if err != nil {
			t.Fatal(err)
		}
		return !found
	})
	// On a very slow machine the second answer may have come after the
	// first expired, and been recorded.
	early := err == nil
	wantLive, wantOwners := []int64{id2}, []int64(nil)
	if early {
		wantLive, wantOwners = []int64{id2, id3}, []int64{id3}
	}
	if got := answerIDs(t, one, "", 0, 10); !slices.Equal(got, wantLive) {
		t.Fatalf("live answers: %v, want %v", got, wantLive)
	}
	if got := answerIDs(t, one, "replica-a", 0, 10); !slices.Equal(got, wantOwners) {
		t.Fatalf("live answers of the expired one's owner: %v, want %v", got, wantOwners)
	}
	if !early {
		id3 = relay(t, two, next, limits)
	}
	collected, err := one.CollectGarbage(ctx, time.Hour)
	if err != nil || collected.SessionStates != 1 {
		t.Fatalf("collected %+v (%v), want the one expired answer", collected, err)
	}
	if got := answerIDs(t, two, "", 0, 10); !slices.Equal(got, []int64{id2, id3}) {
		t.Fatalf("live answers after garbage collection: %v, want %v", got, []int64{id2, id3})
	}
	wantAnswer(t, one, id3, next, "an answer recorded once the first expired")
}

// What any handle changes, answers or cancels reaches a listener on
// another, and on itself: the session of each state changed or gone, the
// id of each answer, each cancellation as relayed. A cancellation relayed
// before the listener followed is never heard (nothing is recorded).
func listenSessionEventsAcrossHandles(t *testing.T, open Open[SessionStateStore]) {
	listener, writer := open(t), open(t)
	ctx := t.Context()
	at := inAnHour()
	unheard := store.Cancellation{SessionDigest: session(9), RequestID: `"before"`}
	if err := writer.RelayCancellation(ctx, unheard); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	changed := map[string]int{}
	answered := map[int64]int{}
	cancelled := map[store.Cancellation]int{}
	listening := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- listener.ListenSessionEvents(ctx, func() { close(listening) },
			func(d string) { mu.Lock(); changed[d]++; mu.Unlock() },
			func(id int64) { mu.Lock(); answered[id]++; mu.Unlock() },
			func(c store.Cancellation) { mu.Lock(); cancelled[c]++; mu.Unlock() })
	}()
	t.Cleanup(func() { <-done }) // the listen ends with the test's context
	select {
	case <-listening:
	case err := <-done:
		t.Fatalf("ListenSessionEvents ended before listening: %v", err)
	}
	heard := func(cond func() bool) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return cond()
		}
	}
	changes := func(d string) int {
		mu.Lock()
		defer mu.Unlock()
		return changed[d]
	}

	s := session(1)
	updateState(t, writer, store.SessionStateChange{Digest: s, Principal: principal(1), ExpiresAt: at, Subscribe: "demo://a"}, roomyLimits)
	testkit.Eventually(t, "a state change to reach the listener", pollDeadline, heard(func() bool { return changed[s] > 0 }))
	n := changes(s)
	updateState(t, listener, store.SessionStateChange{Digest: s, Principal: principal(1), ExpiresAt: at, LogLevel: "info"}, roomyLimits)
	testkit.Eventually(t, "the listener's own state change", pollDeadline, heard(func() bool { return changed[s] > n }))

	id := relay(t, writer, store.InputResponse{Owner: "replica-a", SessionDigest: s, RequestID: `"r1"`, Response: `{}`, ExpiresAt: at}, store.RelayLimits{PerSession: 8, SessionBytes: 1 << 20})
	testkit.Eventually(t, "an answer to reach the listener", pollDeadline, heard(func() bool { return answered[id] > 0 }))

	c := store.Cancellation{SessionDigest: s, RequestID: `7`}
	if err := writer.RelayCancellation(ctx, c); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "a cancellation to reach the listener", pollDeadline, heard(func() bool { return cancelled[c] > 0 }))
	own := store.Cancellation{SessionDigest: s, RequestID: `"r 8 \u00e9 é"`}
	if err := listener.RelayCancellation(ctx, own); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the listener's own cancellation", pollDeadline, heard(func() bool { return cancelled[own] > 0 }))

	n = changes(s)
	if err := writer.RevokeSession(ctx, s, at); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the revoked session's state going to reach the listener", pollDeadline, heard(func() bool { return changed[s] > n }))

	mu.Lock()
	defer mu.Unlock()
	if cancelled[unheard] != 0 {
		t.Fatalf("a cancellation relayed before the listener followed was heard")
	}
	for k := range cancelled {
		if k != c && k != own {
			t.Fatalf("heard a cancellation never relayed: %+v", k)
		}
	}
}
