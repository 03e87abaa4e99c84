package sessionevents

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// TestAnswerCommittedOutOfOrderWhileNotListening: an answer whose id is
// below the last one heard, committed while the hub's listen was down
// (ids are taken when a relay is written, commits land in any order),
// reaches its replica once the hub listens again. The hub once caught up
// only above the last id heard, and the answer was lost for good: the
// client's reply had been taken, and the request waited until its
// timeout.
func TestAnswerCommittedOutOfOrderWhileNotListening(t *testing.T) {
	l := startListeningHub(t)
	ctx := t.Context()
	writer := env.Open(t, l.url)
	at := time.Now().Add(time.Hour)

	// A relay in flight: its row (the lower id) written, not committed.
	slow, err := l.admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := slow.Exec(ctx, `INSERT INTO relayed_input_responses (owner_replica, session_digest, request_id, response, expires_at)
		VALUES ('replica-a', $1, '"sb-slow"', '{"result":{}}', $2)`, digest(1), at); err != nil {
		t.Fatal(err)
	}
	// Another relay commits first and is heard.
	fast := store.InputResponse{Owner: "replica-a", SessionDigest: digest(2), RequestID: `"sb-fast"`, Response: `{"result":{}}`, ExpiresAt: at}
	if _, err := writer.RelayInputResponse(ctx, fast, relayLimits); err != nil {
		t.Fatal(err)
	}
	if ev := next(t, l.events); ev.Response == nil || ev.Response.RequestID != `"sb-fast"` {
		t.Fatalf("heard %+v", ev)
	}
	// The hub's listen breaks; the slow relay commits meanwhile.
	l.breakListen(t)
	if err := slow.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	// The hub listens again, and catches up.
	if ev := next(t, l.events); ev.Response == nil || ev.Response.RequestID != `"sb-slow"` {
		t.Fatalf("after the hub listened again: %+v, want the answer committed while it did not", ev)
	}
}

// TestCatchUpSendsNoAnswerTwice: when the hub listens again it reads
// again the answers it may have missed, from a window below the last one
// heard, and sends none a subscriber already got: a catch-up of every
// live answer once sent again those a subscriber no longer remembered
// (it remembers rememberedAnswers).
func TestCatchUpSendsNoAnswerTwice(t *testing.T) {
	l := startListeningHub(t)
	relay := func(from, n int) {
		if _, err := l.admin.Exec(t.Context(), `INSERT INTO relayed_input_responses (owner_replica, session_digest, request_id, response, expires_at)
			SELECT 'replica-a', lpad(to_hex(i), 64, '0'), '"sb-1"', '{"result":{}}', now() + interval '1 hour' FROM generate_series($1::int, $2::int) AS i`, from, from+n-1); err != nil {
			t.Fatal(err)
		}
	}
	const n = rememberedAnswers + 100
	relay(1, n)
	seen := map[string]int{}
	for range n {
		if ev := next(t, l.events); ev.Response != nil {
			seen[ev.Response.SessionDigest]++
		}
	}
	l.breakListen(t)()
	// A new answer after the catch-up marks the end of what it sent.
	relay(n+1, 1)
	marker := digest(n + 1)
	for {
		ev := next(t, l.events)
		if ev.Response == nil {
			continue
		}
		if ev.Response.SessionDigest == marker {
			break
		}
		if seen[ev.Response.SessionDigest]++; seen[ev.Response.SessionDigest] > 1 {
			t.Fatalf("an answer the subscriber had was sent to it again: %s", ev.Response.SessionDigest)
		}
	}
}

// listeningHub is a hub on a fresh database, listening, with replica-a
// subscribed to its events; admin is a connection of the test's own,
// and listeners names the hub's LISTEN connections (read by another
// connection, outside any transaction admin holds open), so a test can
// break one (pg_terminate_backend) and see the hub listen again.
type listeningHub struct {
	url       string
	events    <-chan Event
	admin     *pgx.Conn
	watcher   *pgx.Conn
	listeners func() []int32
}

func startListeningHub(t *testing.T) *listeningHub {
	t.Helper()
	url := env.NewDatabase(t)
	ctx := t.Context()
	h := New(env.Open(t, url), time.Hour, slog.New(slog.DiscardHandler))
	hctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { h.Run(hctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	conn := func() *pgx.Conn {
		c, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close(context.WithoutCancel(ctx)) })
		return c
	}
	l := &listeningHub{url: url, events: subscribe(t, h, "replica-a"), admin: conn(), watcher: conn()}
	l.listeners = func() []int32 {
		rows, _ := l.watcher.Query(ctx, `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query = 'LISTEN switchboard_session_events'`)
		pids, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		if err != nil {
			t.Fatal(err)
		}
		return pids
	}
	testkit.Eventually(t, "the hub listens", 10*time.Second, func() bool { return len(l.listeners()) == 1 })
	return l
}

// breakListen ends the hub's LISTEN connection and waits until it is
// gone; then follows the hub's listening again.
func (l *listeningHub) breakListen(t *testing.T) (listensAgain func()) {
	t.Helper()
	pid := l.listeners()[0]
	if _, err := l.watcher.Exec(t.Context(), `SELECT pg_terminate_backend($1)`, pid); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the listen ended", 10*time.Second, func() bool {
		for _, p := range l.listeners() {
			if p == pid {
				return false
			}
		}
		return true
	})
	return func() {
		testkit.Eventually(t, "the hub listens again", 10*time.Second, func() bool { return len(l.listeners()) == 1 })
	}
}
