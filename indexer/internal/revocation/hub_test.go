package revocation

import (
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
	"github.com/switchboard-mcp/switchboard/indexer/internal/storetest/pgtest"
)

var env *pgtest.Env

func TestMain(m *testing.M) { pgtest.Main(m, &env) }

func digest(i int) string { return fmt.Sprintf("%064x", i) }

func newHub(t *testing.T) (*Hub, store.Store) {
	st := env.OpenStore(t)
	return New(st, time.Hour, slog.New(slog.DiscardHandler)), st
}

// Until the hub has read the store once it gives no snapshot: a partial
// one would let a gateway serve a session revoked elsewhere.
func TestSubscribeNeedsAFullRead(t *testing.T) {
	h, st := newHub(t)
	if _, _, _, err := h.Subscribe(); !errors.Is(err, ErrNotSynced) {
		t.Fatalf("subscribe before the first read: %v", err)
	}
	at := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	if err := st.RevokeSession(t.Context(), digest(1), at); err != nil {
		t.Fatal(err)
	}
	if err := h.Resync(t.Context()); err != nil {
		t.Fatal(err)
	}
	snap, _, cancel, err := h.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	if len(snap) != 1 || snap[0].Digest != digest(1) || !snap[0].ExpiresAt.Equal(at) {
		t.Fatalf("snapshot %v", snap)
	}
}

// A full read passes on what the notifications missed, and only that.
func TestResyncPassesOnWhatWasMissed(t *testing.T) {
	h, st := newHub(t)
	if err := h.Resync(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, updates, cancel, err := h.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	at := time.Now().Add(time.Hour).Truncate(time.Microsecond)
	h.Add(store.Revocation{Digest: digest(1), ExpiresAt: at})
	for _, d := range []string{digest(1), digest(2)} {
		if err := st.RevokeSession(t.Context(), d, at); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.Resync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := <-updates; got.Digest != digest(1) {
		t.Fatalf("first update %v", got)
	}
	select {
	case got := <-updates:
		if got.Digest != digest(2) {
			t.Fatalf("second update %v, want the missed revocation", got)
		}
	default:
		t.Fatal("the missed revocation was not passed on")
	}
	select {
	case got := <-updates:
		t.Fatalf("a known revocation passed on again: %v", got)
	default:
	}
	if h.Live() != 2 {
		t.Fatalf("%d live", h.Live())
	}
}

// A subscriber that stops reading is dropped once its buffer is full,
// instead of holding up the others or growing without bound.
func TestSubscriberThatFallsBehindIsDropped(t *testing.T) {
	h, _ := newHub(t)
	if err := h.Resync(t.Context()); err != nil {
		t.Fatal(err)
	}
	_, slow, cancelSlow, err := h.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	defer cancelSlow()
	at := time.Now().Add(time.Hour)
	for i := range subscriberBuffer + 1 {
		h.Add(store.Revocation{Digest: digest(i), ExpiresAt: at})
	}
	n := 0
	for range slow {
		n++
	}
	if n != subscriberBuffer {
		t.Fatalf("%d updates before the drop, want %d", n, subscriberBuffer)
	}
	// Later subscribers get everything in their snapshot.
	snap, _, cancel, err := h.Subscribe()
	if err != nil {
		t.Fatal(err)
	}
	defer cancel()
	if len(snap) != subscriberBuffer+1 {
		t.Fatalf("snapshot of %d", len(snap))
	}
}

// Expired revocations are neither passed on nor kept.
func TestExpiredRevocationsAreForgotten(t *testing.T) {
	h, _ := newHub(t)
	now := time.Now()
	h.now = func() time.Time { return now }
	h.Add(store.Revocation{Digest: digest(1), ExpiresAt: now.Add(-time.Second)})
	h.Add(store.Revocation{Digest: digest(2), ExpiresAt: now.Add(time.Minute)})
	if h.Live() != 1 {
		t.Fatalf("%d live, want the unexpired one", h.Live())
	}
	now = now.Add(2 * time.Minute)
	if err := h.Resync(t.Context()); err != nil {
		t.Fatal(err)
	}
	if h.Live() != 0 {
		t.Fatalf("%d live after expiry", h.Live())
	}
}
