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

// nthDigest is a distinct 64-hex-digit digest for each (space, i): a
// session's, a principal's.
func nthDigest(space, i int) string { return fmt.Sprintf("%08x%056x", space, i) }

// Digest spaces of nthDigest.
const (
	sessionSpace = iota + 1
	principalSpace
)

func session(i int) string   { return nthDigest(sessionSpace, i) }
func principal(i int) string { return nthDigest(principalSpace, i) }

// roomyLimits bound nothing a check does unless it means to.
var roomyLimits = store.SessionStateLimits{Subscriptions: 64, URIBytes: 256, PerPrincipal: 64, PrincipalBytes: 1 << 20}

// inAnHour is an expiry an hour ahead, at the microsecond precision a
// database keeps.
func inAnHour() time.Time { return time.Now().Add(time.Hour).Truncate(time.Microsecond) }

func updateState(t *testing.T, st store.SessionStates, c store.SessionStateChange, limits store.SessionStateLimits) store.SessionState {
	t.Helper()
	got, err := st.UpdateSessionState(t.Context(), c, limits)
	if err != nil {
		t.Fatalf("change %+v: %v", c, err)
	}
	return got
}

// stateOf is the session's state, read through st; found false if none.
func stateOf(t *testing.T, st store.SessionStates, digest string) (store.SessionState, bool) {
	t.Helper()
	got, found, err := st.SessionStateOf(t.Context(), digest)
	if err != nil {
		t.Fatalf("state of %s…: %v", digest[:12], err)
	}
	return got, found
}

// sameSet reports whether a and b hold the same strings, in any order.
func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}

// sameState reports how got differs from want ("" if it does not): the
// URIs as a set, the expiry as an instant.
func sameState(got, want store.SessionState) string {
	if got.Digest != want.Digest || got.Principal != want.Principal || got.LogLevel != want.LogLevel || !sameSet(got.URIs, want.URIs) ||
		!got.ExpiresAt.Equal(want.ExpiresAt) || got.Version != want.Version {
		return fmt.Sprintf("%+v, want %+v", got, want)
	}
	return ""
}

// wantState fails unless the session's state read through st is want.
func wantState(t *testing.T, st store.SessionStates, want store.SessionState, what string) {
	t.Helper()
	got, found := stateOf(t, st, want.Digest)
	if !found {
		t.Fatalf("%s: no state, want %+v", what, want)
	}
	if diff := sameState(got, want); diff != "" {
		t.Fatalf("%s: %s", what, diff)
	}
}

// wantNoState fails if the session has a state.
func wantNoState(t *testing.T, st store.SessionStates, digest, what string) {
	t.Helper()
	if got, found := stateOf(t, st, digest); found {
		t.Fatalf("%s: state %+v, want none", what, got)
	}
}

// wantBound fails unless err is a bound's, of the kind asked: on one URI,
// on one session's subscriptions, or (neither) on the principal's.
func wantBound(t *testing.T, err error, uri, subscriptions bool, what string) {
	t.Helper()
	var bound *store.SessionStateBoundError
	if !errors.As(err, &bound) || bound.URI != uri || bound.Subscriptions != subscriptions {
		t.Fatalf("%s: %v (%#v), want a bound error with URI %v, Subscriptions %v", what, err, bound, uri, subscriptions)
	}
}

// listedStates are the live states as SessionStates lists them, by digest;
// no session twice.
func listedStates(t *testing.T, st store.SessionStates) map[string]store.SessionState {
	t.Helper()
	all, err := st.SessionStates(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]store.SessionState{}
	for _, s := range all {
		if _, twice := out[s.Digest]; twice {
			t.Fatalf("session %s… listed twice", s.Digest[:12])
		}
		out[s.Digest] = s
	}
	return out
}

// A session's state is what its changes made it, read back through any
// handle: its principal, expiry and log level, its subscriptions as a set,
// and a version that grows with every change (replicas keep the copy of
// the highest). A change that changes nothing leaves it as it was. Each
// session's state is its own, and only its principal changes it.
func sessionStatesStoredAndChanged(t *testing.T, open Open[SessionStateStore]) {
	one, two := open(t), open(t)
	s, p, at := session(1), principal(1), inAnHour()
	change := func(c store.SessionStateChange) store.SessionStateChange {
		c.Digest, c.Principal, c.ExpiresAt = s, p, at
		return c
	}
	first := updateState(t, one, change(store.SessionStateChange{LogLevel: "debug"}), roomyLimits)
	if first.Digest != s || first.Principal != p || first.LogLevel != "debug" || len(first.URIs) != 0 || !first.ExpiresAt.Equal(at) || first.Version == 0 {
		t.Fatalf("a new session's log level: %+v", first)
	}
	wantState(t, two, first, "the state read through another handle")

	a := updateState(t, two, change(store.SessionStateChange{Subscribe: "demo://a"}), roomyLimits)
	ab := updateState(t, one, change(store.SessionStateChange{Subscribe: "demo://b"}), roomyLimits)
	if ab.LogLevel != "debug" || sameState(ab, store.SessionState{Digest: s, Principal: p, LogLevel: "debug", URIs: []string{"demo://a", "demo://b"}, ExpiresAt: at, Version: ab.Version}) != "" {
		t.Fatalf("after subscribing a and b through two handles: %+v", ab)
	}
	if !(first.Version < a.Version && a.Version < ab.Version) {
		t.Fatalf("versions %d, %d, %d: each change must have a higher one", first.Version, a.Version, ab.Version)
	}
	wantState(t, two, ab, "after two subscriptions")

	// Changes that change nothing.
	for _, c := range []store.SessionStateChange{{Subscribe: "demo://a"}, {Unsubscribe: "demo://never"}, {LogLevel: "debug"}} {
		got := updateState(t, two, change(c), roomyLimits)
		if got.Version < ab.Version || sameState(got, store.SessionState{Digest: s, Principal: p, LogLevel: "debug", URIs: ab.URIs, ExpiresAt: at, Version: got.Version}) != "" {
			t.Fatalf("%+v changed the state: %+v, was %+v", c, got, ab)
		}
	}
	now, _ := stateOf(t, one, s)
	if now.Version < ab.Version || sameState(now, store.SessionState{Digest: s, Principal: p, LogLevel: "debug", URIs: ab.URIs, ExpiresAt: at, Version: now.Version}) != "" {
		t.Fatalf("after changes that change nothing: %+v, was %+v", now, ab)
	}

	b := updateState(t, one, change(store.SessionStateChange{Unsubscribe: "demo://a"}), roomyLimits)
	if b.Version <= now.Version || !slices.Equal(b.URIs, []string{"demo://b"}) || b.LogLevel != "debug" {
		t.Fatalf("after unsubscribing a: %+v", b)
	}
	leveled := updateState(t, two, change(store.SessionStateChange{LogLevel: "error"}), roomyLimits)
	if leveled.Version <= b.Version || leveled.LogLevel != "error" || !slices.Equal(leveled.URIs, []string{"demo://b"}) {
		t.Fatalf("after setting the level to error: %+v", leveled)
	}
	wantState(t, one, leveled, "after unsubscribing and setting the level")

	// Another session of the principal has a state of its own.
	other := updateState(t, two, store.SessionStateChange{Digest: session(2), Principal: p, ExpiresAt: at, Subscribe: "demo://c"}, roomyLimits)
	if !slices.Equal(other.URIs, []string{"demo://c"}) || other.LogLevel != "" || other.Version == 0 {
		t.Fatalf("another session: %+v", other)
	}
	wantState(t, one, leveled, "the first session, after another's change")
	listed := listedStates(t, one)
	if len(listed) != 2 || sameState(listed[s], leveled) != "" || sameState(listed[session(2)], other) != "" {
		t.Fatalf("listed %+v, want the two sessions' states", listed)
	}

	// Another principal naming the session: as if it had no state, and it
	// changes nothing.
	if _, err := one.UpdateSessionState(t.Context(), store.SessionStateChange{Digest: s, Principal: principal(2), ExpiresAt: at, Subscribe: "demo://x"}, roomyLimits); !errors.Is(err, store.ErrSessionGone) {
		t.Fatalf("another principal's change of the session: %v, want ErrSessionGone", err)
	}
	wantState(t, two, leveled, "after another principal's change")

	// A session that expired gets no state.
	if _, err := two.UpdateSessionState(t.Context(), store.SessionStateChange{Digest: session(3), Principal: p, ExpiresAt: time.Now().Add(-time.Minute), LogLevel: "info"}, roomyLimits); !errors.Is(err, store.ErrSessionGone) {
		t.Fatalf("an expired session's change: %v, want ErrSessionGone", err)
	}
	wantNoState(t, one, session(3), "an expired session")
}

// The bounds hold, and a change that would pass one changes nothing: one
// URI's length, one session's subscriptions, the sessions with state of
// one principal and their bytes (as store.SessionState.Cost counts them).
// A change that shrinks a state passes whatever the bounds, and a
// principal's bounds are its own.
func sessionStateBounds(t *testing.T, open Open[SessionStateStore]) {
	one, two := open(t), open(t)
	ctx := t.Context()
	at := inAnHour()

	// One URI's length: at most URIBytes, on a new session or not.
	limits := store.SessionStateLimits{Subscriptions: 3, URIBytes: 32, PerPrincipal: 2, PrincipalBytes: 1 << 20}
	s, p := session(1), principal(1)
	sub := func(st store.SessionStates, s, p, uri string) (store.SessionState, error) {
		return st.UpdateSessionState(ctx, store.SessionStateChange{Digest: s, Principal: p, ExpiresAt: at, Subscribe: uri}, limits)
	}
	_, err := sub(one, s, p, "demo://"+strings.Repeat("u", 26))
	wantBound(t, err, true, false, "a new session subscribing a URI of 33 bytes")
	wantNoState(t, two, s, "a new session refused")
	long, err := sub(two, s, p, "demo://"+strings.Repeat("u", 25))
	if err != nil || len(long.URIs) != 1 {
		t.Fatalf("a URI of 32 bytes, the bound: %+v, %v", long, err)
	}

	// One session's subscriptions: at most Subscriptions.
	if _, err := sub(one, s, p, "demo://2"); err != nil {
		t.Fatal(err)
	}
	full, err := sub(two, s, p, "demo://3")
	if err != nil || len(full.URIs) != 3 {
		t.Fatalf("the third subscription: %+v, %v", full, err)
	}
	_, err = sub(one, s, p, "demo://4")
	wantBound(t, err, false, true, "a fourth subscription of 3")
	_, err = sub(two, s, p, "demo://"+strings.Repeat("u", 26))
	wantBound(t, err, true, false, "a URI of 33 bytes on a session with state")
	wantState(t, one, full, "after the refused subscriptions")
	if again, err := sub(one, s, p, "demo://3"); err != nil || !sameSet(again.URIs, full.URIs) || again.Version < full.Version {
		t.Fatalf("subscribing again at the bound: %+v, %v; want no change", again, err)
	}
	if _, err := two.UpdateSessionState(ctx, store.SessionStateChange{Digest: s, Principal: p, ExpiresAt: at, Unsubscribe: "demo://2"}, limits); err != nil {
		t.Fatalf("unsubscribing at the bound: %v", err)
	}
	if got, err := sub(one, s, p, "demo://4"); err != nil || len(got.URIs) != 3 || !slices.Contains(got.URIs, "demo://4") {
		t.Fatalf("subscribing once there is room again: %+v, %v", got, err)
	}

	// The sessions with state of one principal: at most PerPrincipal.
	second, err := sub(two, session(2), p, "demo://a")
	if err != nil {
		t.Fatalf("the principal's second session: %v", err)
	}
	_, err = sub(one, session(3), p, "demo://a")
	wantBound(t, err, false, false, "the principal's third session with state of 2")
	wantNoState(t, two, session(3), "the refused third session")
	// Another principal is not bound by the first's sessions.
	if _, err := sub(one, session(4), principal(2), "demo://a"); err != nil {
		t.Fatalf("another principal's session: %v", err)
	}
	// The second session, revoked, no longer counts.
	if err := two.RevokeSession(ctx, second.Digest, at); err != nil {
		t.Fatal(err)
	}
	if _, err := sub(one, session(3), p, "demo://a"); err != nil {
		t.Fatalf("the third session once the second was revoked: %v", err)
	}
	// A session that unsubscribed from everything holds no state, and
	// no longer counts either.
	if _, err := one.UpdateSessionState(ctx, store.SessionStateChange{Digest: session(3), Principal: p, ExpiresAt: at, Unsubscribe: "demo://a"}, limits); err != nil {
		t.Fatal(err)
	}
	if _, err := sub(two, session(5), p, "demo://a"); err != nil {
		t.Fatalf("a session once another unsubscribed from everything: %v", err)
	}

	// The bytes of one principal's sessions: at most PrincipalBytes.
	q := principal(3)
	level := store.SessionState{LogLevel: "info"}
	uri := store.SessionState{LogLevel: "info", URIs: []string{"demo://12345678"}}
	bytesLimits := store.SessionStateLimits{Subscriptions: 8, URIBytes: 64, PerPrincipal: 8, PrincipalBytes: 2*level.Cost() + uri.Cost() - level.Cost()}
	set := func(st store.SessionStates, c store.SessionStateChange) (store.SessionState, error) {
		c.Principal, c.ExpiresAt = q, at
		return st.UpdateSessionState(ctx, c, bytesLimits)
	}
	for i := range 2 {
		if _, err := set(one, store.SessionStateChange{Digest: session(10 + i), LogLevel: "info"}); err != nil {
			t.Fatalf("session %d of the bytes bound: %v", i, err)
		}
	}
	_, err = set(two, store.SessionStateChange{Digest: session(10), Subscribe: "demo://123456789"})
	wantBound(t, err, false, false, "a subscription one byte past the principal's bytes")
	exact, err := set(two, store.SessionStateChange{Digest: session(10), Subscribe: "demo://12345678"})
	if err != nil || len(exact.URIs) != 1 {
		t.Fatalf("a subscription that fills the principal's bytes exactly: %+v, %v", exact, err)
	}
	_, err = set(one, store.SessionStateChange{Digest: session(11), LogLevel: "debug"})
	wantBound(t, err, false, false, "a longer log level with the principal's bytes full")
	_, err = set(one, store.SessionStateChange{Digest: session(12), LogLevel: "info"})
	wantBound(t, err, false, false, "a new session with the principal's bytes full")
	wantNoState(t, two, session(12), "the new session refused for bytes")
	wantState(t, two, exact, "after the refused changes")
	// Shrinking passes, and makes room.
	if _, err := set(two, store.SessionStateChange{Digest: session(10), Unsubscribe: "demo://12345678"}); err != nil {
		t.Fatalf("unsubscribing with the principal's bytes full: %v", err)
	}
	if got, err := set(one, store.SessionStateChange{Digest: session(11), LogLevel: "debug"}); err != nil || got.LogLevel != "debug" {
		t.Fatalf("a longer log level once there is room: %+v, %v", got, err)
	}
	// Another principal's bytes are its own.
	if _, err := two.UpdateSessionState(ctx, store.SessionStateChange{Digest: session(13), Principal: principal(4), ExpiresAt: at, LogLevel: "info"}, bytesLimits); err != nil {
		t.Fatalf("another principal under the same bytes bound: %v", err)
	}

	// A session that held state, then none, is charged in full when it
	// takes state again, its overhead included: it once was charged only
	// its new bytes, and each such session took its principal an
	// overhead past its bound.
	r := principal(5)
	withURI := store.SessionState{URIs: []string{"demo://a"}}
	withLevel := store.SessionState{LogLevel: "info"}
	tight := store.SessionStateLimits{Subscriptions: 8, URIBytes: 64, PerPrincipal: 8, PrincipalBytes: withURI.Cost() + withLevel.Cost() - 1}
	change := func(c store.SessionStateChange) error {
		c.Principal, c.ExpiresAt = r, at
		_, err := one.UpdateSessionState(ctx, c, tight)
		return err
	}
	for _, c := range []store.SessionStateChange{{Digest: session(20), Subscribe: "demo://a"}, {Digest: session(20), Unsubscribe: "demo://a"},
		{Digest: session(21), LogLevel: "info"}} {
		if err := change(c); err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
	}
	wantBound(t, change(store.SessionStateChange{Digest: session(20), Subscribe: "demo://a"}), false, false,
		"a session that held nothing taking state again, one byte past the principal's bytes")
}

// The bounds hold across handles (replicas) changing at once: of many
// concurrent subscriptions to one session, exactly as many as it may hold
// land, and of many concurrent new sessions of one principal, exactly as
// many as it may have; the others are refused by the bound, and what is
// stored is exactly what landed.
func sessionStateBoundsAcrossHandles(t *testing.T, open Open[SessionStateStore]) {
	handles := []SessionStateStore{open(t), open(t)}
	ctx := t.Context()
	at := inAnHour()
	limits := store.SessionStateLimits{Subscriptions: 5, URIBytes: 64, PerPrincipal: 4, PrincipalBytes: 1 << 20}
	s, p := session(1), principal(1)
	if _, err := handles[0].UpdateSessionState(ctx, store.SessionStateChange{Digest: s, Principal: p, ExpiresAt: at, LogLevel: "info"}, limits); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	var landed []string
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Go(func() {
			uri := fmt.Sprintf("demo://%d", i)
			_, err := handles[i%2].UpdateSessionState(ctx, store.SessionStateChange{Digest: s, Principal: p, ExpiresAt: at, Subscribe: uri}, limits)
			var bound *store.SessionStateBoundError
			switch {
			case err == nil:
				mu.Lock()
				landed = append(landed, uri)
				mu.Unlock()
			case !errors.As(err, &bound) || !bound.Subscriptions:
				t.Errorf("subscription %d: %v, want success or the subscriptions bound", i, err)
			}
		})
	}
	wg.Wait()
	got, _ := stateOf(t, handles[1], s)
	if len(landed) != limits.Subscriptions || !sameSet(got.URIs, landed) {
		t.Fatalf("%d of 16 concurrent subscriptions landed (%v), the state holds %v; want the %d it may hold", len(landed), landed, got.URIs, limits.Subscriptions)
	}

	landed = nil
	for i := range 12 {
		wg.Go(func() {
			d := session(100 + i)
			_, err := handles[i%2].UpdateSessionState(ctx, store.SessionStateChange{Digest: d, Principal: principal(2), ExpiresAt: at, LogLevel: "info"}, limits)
			var bound *store.SessionStateBoundError
			switch {
			case err == nil:
				mu.Lock()
				landed = append(landed, d)
				mu.Unlock()
			case !errors.As(err, &bound) || bound.Subscriptions || bound.URI:
				t.Errorf("session %d: %v, want success or the principal's bound", i, err)
			}
		})
	}
	wg.Wait()
	var stored []string
	for d, st := range listedStates(t, handles[0]) {
		if st.Principal == principal(2) {
			stored = append(stored, d)
		}
	}
	if len(landed) != limits.PerPrincipal || !sameSet(stored, landed) {
		t.Fatalf("%d of 12 concurrent new sessions of one principal landed, %d stored; want the %d it may have", len(landed), len(stored), limits.PerPrincipal)
	}
}

// A session's state goes with the session: revoked (through any handle),
// or expired, it has none, is not listed, gets none again, and no longer
// counts against its principal's bounds; garbage collection purges the
// expired state.
func sessionStateGoesWithItsSession(t *testing.T, open Open[SessionStateStore]) {
	one, two := open(t), open(t)
	ctx := t.Context()
	at := inAnHour()
	limits := store.SessionStateLimits{Subscriptions: 8, URIBytes: 64, PerPrincipal: 1, PrincipalBytes: 1 << 20}
	p := principal(1)
	revoked := session(1)
	updateState(t, one, store.SessionStateChange{Digest: revoked, Principal: p, ExpiresAt: at, Subscribe: "demo://a"}, limits)
	kept := updateState(t, one, store.SessionStateChange{Digest: session(2), Principal: principal(2), ExpiresAt: at, LogLevel: "info"}, limits)
	if err := two.RevokeSession(ctx, revoked, at); err != nil {
		t.Fatal(err)
	}
	wantNoState(t, one, revoked, "a revoked session")
	if _, err := one.UpdateSessionState(ctx, store.SessionStateChange{Digest: revoked, Principal: p, ExpiresAt: at, Subscribe: "demo://b"}, limits); !errors.Is(err, store.ErrSessionGone) {
		t.Fatalf("a revoked session's change: %v, want ErrSessionGone", err)
	}
	wantNoState(t, two, revoked, "a revoked session after a change")
	if listed := listedStates(t, two); len(listed) != 1 || sameState(listed[kept.Digest], kept) != "" {
		t.Fatalf("listed %+v, want the one state kept", listed)
	}

	// A session expiring in two seconds, of a principal that may have one
	// session with state.
	soon := time.Now().Add(2 * time.Second).Truncate(time.Microsecond)
	short := updateState(t, two, store.SessionStateChange{Digest: session(3), Principal: p, ExpiresAt: soon, LogLevel: "info"}, limits)
	wantState(t, one, short, "the short-lived state")
	_, err := one.UpdateSessionState(ctx, store.SessionStateChange{Digest: session(4), Principal: p, ExpiresAt: at, LogLevel: "info"}, limits)
	if time.Now().Before(soon) { // else it may have expired already (a very slow machine)
		wantBound(t, err, false, false, "a second session of a principal that may have one")
	}
	testkit.Eventually(t, "the short-lived state to expire", pollDeadline, func() bool {
		_, found := stateOf(t, one, short.Digest)
		return !found
	})
	if _, listed := listedStates(t, two)[short.Digest]; listed {
		t.Fatal("an expired state is listed")
	}
	if _, err := two.UpdateSessionState(ctx, store.SessionStateChange{Digest: short.Digest, Principal: p, ExpiresAt: soon, LogLevel: "debug"}, limits); !errors.Is(err, store.ErrSessionGone) {
		t.Fatalf("an expired session's change: %v, want ErrSessionGone", err)
	}
	if _, err := one.UpdateSessionState(ctx, store.SessionStateChange{Digest: session(4), Principal: p, ExpiresAt: at, LogLevel: "info"}, limits); err != nil {
		t.Fatalf("a new session once the principal's other one expired: %v", err)
	}
	collected, err := two.CollectGarbage(ctx, time.Hour)
	if err != nil || collected.SessionStates != 1 {
		t.Fatalf("collected %+v (%v), want the one expired session state", collected, err)
	}
	if listed := listedStates(t, one); len(listed) != 2 || sameState(listed[kept.Digest], kept) != "" {
		t.Fatalf("listed after garbage collection: %+v, want the two live states", listed)
	}
}
