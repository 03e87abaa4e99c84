package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// A state change racing the session's deletion never writes the state of a
// deleted session. The test holds the deletion after its statement ran and
// before it commits (a trigger waits for an advisory lock the test holds),
// starts the change then, and lets the deletion commit once the change
// waits: the change must find the session deleted, and no state remain.
func TestStateChangeRacingDeletion(t *testing.T) {
	url := env.NewDatabase(t)
	st := env.Open(t, url)
	ctx := t.Context()
	admin, err := pgx.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = admin.Close(context.WithoutCancel(ctx)) }()
	const gate = 7_340_033
	for _, q := range []string{
		fmt.Sprintf(`CREATE FUNCTION test_hold_revocation() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN PERFORM pg_advisory_lock(%d); PERFORM pg_advisory_unlock(%d); RETURN NULL; END $$`, gate, gate),
		`CREATE TRIGGER test_hold_revocation AFTER INSERT OR UPDATE ON revoked_sessions FOR EACH ROW EXECUTE FUNCTION test_hold_revocation()`,
	} {
		if _, err := admin.Exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	session, principal := strings.Repeat("1a", 32), strings.Repeat("2b", 32)
	at := time.Now().Add(time.Hour)
	limits := store.SessionStateLimits{Subscriptions: 8, URIBytes: 256, PerPrincipal: 8, PrincipalBytes: 1 << 20}
	change := store.SessionStateChange{Digest: session, Principal: principal, ExpiresAt: at, Subscribe: "a://1"}
	if _, err := st.UpdateSessionState(ctx, change, limits); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, `SELECT pg_advisory_lock($1)`, gate); err != nil {
		t.Fatal(err)
	}
	// waiters counts the backends waiting for a lock, the test's own
	// connection aside.
	waiters := func() int {
		var n int
		if err := admin.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid()`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitFor := func(what string, n int) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); waiters() < n; {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	revoked := make(chan error, 1)
	go func() { revoked <- st.RevokeSession(ctx, session, at) }()
	waitFor("the deletion to wait before committing", 1)
	changed := make(chan error, 1)
	change.Subscribe = "a://2"
	go func() { _, err := st.UpdateSessionState(ctx, change, limits); changed <- err }()
	waitFor("the change to wait for the deletion", 2)
	if _, err := admin.Exec(ctx, `SELECT pg_advisory_unlock($1)`, gate); err != nil {
		t.Fatal(err)
	}
	if err := <-revoked; err != nil {
		t.Fatal(err)
	}
	if err := <-changed; !errors.Is(err, store.ErrSessionGone) {
		t.Fatalf("the change racing the deletion: %v, want ErrSessionGone", err)
	}
	if got, found, err := st.SessionStateOf(ctx, session); err != nil || found {
		t.Fatalf("the deleted session has state %+v (%v)", got, err)
	}
}
