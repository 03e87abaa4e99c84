package storetest

import (
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

func digest(c byte) string { return strings.Repeat(string(c), 64) }

// A revocation holds until its expiry; revoking again keeps the later
// expiry; garbage collection purges the expired ones.
func sessions(t *testing.T, open Open[RevocationStore]) {
	st := open(t)
	ctx := t.Context()
	live, expired, extended := digest('a'), digest('b'), digest('c')
	in := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	for _, r := range []store.Revocation{
		{Digest: live, ExpiresAt: in},
		{Digest: expired, ExpiresAt: time.Now().Add(-time.Minute)},
		{Digest: extended, ExpiresAt: in},
		{Digest: extended, ExpiresAt: in.Add(time.Hour)},
		{Digest: extended, ExpiresAt: in.Add(-30 * time.Minute)},
	} {
		if err := st.RevokeSession(ctx, r.Digest, r.ExpiresAt); err != nil {
			t.Fatal(err)
		}
	}
	for d, want := range map[string]bool{live: true, expired: false, extended: true, digest('d'): false} {
		got, err := st.SessionRevoked(ctx, d)
		if err != nil || got != want {
			t.Errorf("SessionRevoked(%s…) = %v, %v; want %v", d[:4], got, err, want)
		}
	}
	revs, err := st.Revocations(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]time.Time{}
	for _, r := range revs {
		got[r.Digest] = r.ExpiresAt
	}
	if len(got) != 2 || !got[live].Equal(in) || !got[extended].Equal(in.Add(time.Hour)) {
		t.Fatalf("live revocations %v; want %s… until %v and %s… until %v", got, live[:4], in, extended[:4], in.Add(time.Hour))
	}
	collected, err := st.CollectGarbage(ctx, time.Hour)
	if err != nil || collected.Revocations != 1 {
		t.Fatalf("collected %+v (%v), want the one expired revocation", collected, err)
	}
	if revs, err := st.Revocations(ctx); err != nil || len(revs) != 2 {
		t.Fatalf("revocations after GC: %v (%v)", revs, err)
	}
}

// A revocation recorded through one handle (one replica) reaches a listener
// on another, and so does its extension.
func listenRevocationsAcrossHandles(t *testing.T, open Open[RevocationStore]) {
	listener, writer := open(t), open(t)
	var mu sync.Mutex
	heard := map[string]time.Time{}
	listening := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- listener.ListenRevocations(t.Context(), func() { close(listening) }, func(r store.Revocation) {
			mu.Lock()
			heard[r.Digest] = r.ExpiresAt
			mu.Unlock()
		})
	}()
	t.Cleanup(func() { <-done }) // the listen ends with the test's context
	select {
	case <-listening:
	case err := <-done:
		t.Fatalf("ListenRevocations ended before listening: %v", err)
	}
	heardUntil := func(d string, want time.Time) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return heard[d].Equal(want)
		}
	}
	at := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	if err := writer.RevokeSession(t.Context(), digest('e'), at); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the revocation to reach the listener", pollDeadline, heardUntil(digest('e'), at))
	if err := writer.RevokeSession(t.Context(), digest('e'), at.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the extension to reach the listener", pollDeadline, heardUntil(digest('e'), at.Add(time.Hour)))
	// A revocation recorded through the listener's own handle reaches it
	// too: every replica hears every revocation, its own included.
	if err := listener.RevokeSession(t.Context(), digest('f'), at); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the listener's own revocation", pollDeadline, heardUntil(digest('f'), at))
}
