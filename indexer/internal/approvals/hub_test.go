package approvals

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
	"github.com/switchboard-mcp/switchboard/indexer/internal/storetest/pgtest"
)

var env *pgtest.Env

func TestMain(m *testing.M) { pgtest.Main(m, &env) }

// A subscriber hears a resync once the hub follows the store, then each
// approval made through another handle (another replica); one that falls
// too far behind is dropped, its channel closed.
func TestHubStreamsApprovals(t *testing.T) {
	url := env.NewDatabase(t)
	listener, writer := env.Open(t, url), env.Open(t, url)
	h := New(listener, slog.New(slog.DiscardHandler))
	events, listening, cancel := h.Subscribe()
	defer cancel()
	if listening {
		t.Fatal("a hub that has not started says it listens")
	}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	defer func() { stop(); <-done }()
	if e := <-events; !e.Resync {
		t.Fatalf("first event %+v, want a resync once the hub listens", e)
	}
	if _, listening, cancel := h.Subscribe(); !listening {
		t.Fatal("a subscriber after the first resync is told the hub does not listen")
	} else {
		cancel()
	}

	seen, changed := strings.Repeat("a", 64), strings.Repeat("b", 64)
	for _, d := range []string{seen, changed} {
		if _, err := writer.RecordToolDefinitions(t.Context(), []store.ToolDefinitionDigest{{Backend: "alpha", Tool: "echo", Digest: d}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := writer.ApproveToolDefinition(t.Context(), store.ToolDefinitionDigest{Backend: "alpha", Tool: "echo", Digest: changed}, "op"); err != nil {
		t.Fatal(err)
	}
	if e := <-events; e.Resync || e.Approval != (store.ToolDefinitionDigest{Backend: "alpha", Tool: "echo", Digest: changed}) {
		t.Fatalf("heard %+v, want the approval", e)
	}

	slow, _, cancelSlow := h.Subscribe()
	defer cancelSlow()
	for range subscriberBuffer + 1 {
		h.Publish(store.ToolDefinitionDigest{Backend: "alpha", Tool: "echo", Digest: changed})
	}
	n := 0
	for range slow {
		n++
	}
	if n != subscriberBuffer {
		t.Fatalf("a subscriber that fell behind got %d events before its channel closed, want %d", n, subscriberBuffer)
	}
}
