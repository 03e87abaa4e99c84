// Package approvals streams tool definition approvals to subscribers (the
// aggregators' WatchToolDefinitions streams): each approval recorded
// through any indexer replica, heard from the store (PostgreSQL
// LISTEN/NOTIFY), and a resync whenever the listen (re)starts, since
// approvals may have been missed while it was down. Nothing is held: an
// approval only tells an aggregator to record its tools again, which
// reads the approved digests from the store.
package approvals

import (
	"context"
	"log/slog"
	"sync"

	"github.com/switchboard-mcp/switchboard/indexer/internal/listen"
	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// subscriberBuffer bounds the events queued for one subscriber; one that
// falls this far behind is dropped (it reconnects, which resyncs it).
const subscriberBuffer = 1024

// Event is one approval, or a resync (Approval zero): approvals may have
// been missed.
type Event struct {
	Approval store.ToolDefinitionDigest
	Resync   bool
}

// Hub fans approvals out to subscribers.
type Hub struct {
	defs store.ToolDefinitions
	log  *slog.Logger

	mu   sync.Mutex
	subs map[chan Event]struct{}
	// listening: the store's listen is up, so no approval from now on is
	// missed (guarded by mu).
	listening bool
}

// New returns a hub following defs.
func New(defs store.ToolDefinitions, log *slog.Logger) *Hub {
	return &Hub{defs: defs, log: log, subs: map[chan Event]struct{}{}}
}

// Run follows the store's approvals until ctx ends, reconnecting with
// backoff.
func (h *Hub) Run(ctx context.Context) {
	listen.Follow(ctx, h.log, "tool approval", func(ctx context.Context, listening func()) error {
		err := h.defs.ListenToolApprovals(ctx, listening, func(d store.ToolDefinitionDigest) { h.publish(Event{Approval: d}) })
		h.mu.Lock()
		h.listening = false
		h.mu.Unlock()
		return err
	}, func() {
		h.mu.Lock()
		h.listening = true
		h.mu.Unlock()
		h.publish(Event{Resync: true})
	})
}

// Publish passes an approval recorded through this replica on at once
// (the notification follows too; a second record is harmless).
func (h *Hub) Publish(d store.ToolDefinitionDigest) { h.publish(Event{Approval: d}) }

func (h *Hub) publish(e Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for ch := range h.subs {
		select {
		case ch <- e:
		default:
			// Too far behind: drop it; it reconnects and resyncs.
			delete(h.subs, ch)
			close(ch)
		}
	}
}

// Subscribe returns a channel of the events from now on, closed if the
// subscriber falls too far behind, whether the hub is listening now (if
// not, a resync comes on the channel once it is: until then approvals of
// other replicas may be missed), and a cancel that ends the subscription.
func (h *Hub) Subscribe() (<-chan Event, bool, func()) {
	ch := make(chan Event, subscriberBuffer)
	h.mu.Lock()
	h.subs[ch] = struct{}{}
	listening := h.listening
	h.mu.Unlock()
	return ch, listening, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[ch]; ok {
			delete(h.subs, ch)
			close(ch)
		}
	}
}
