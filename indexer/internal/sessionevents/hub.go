// Package sessionevents keeps every live Legacy session state in memory and
// streams it to the gateways (WatchSessionEvents): first all of it, then
// each change as any replica records it, to each gateway replica the
// answers to its input requests that other replicas received, and to every
// gateway replica the cancellations any replica relayed (the request may
// run on any of them).
//
// The store announces both (PostgreSQL LISTEN/NOTIFY, heard by every
// indexer replica) with the row's key only; the hub reads the row, off the
// listen's goroutine. It reads every state again whenever the listen
// (re)starts, since announcements may have been missed while it was down,
// and periodically as a safety net. LISTEN/NOTIFY rather than a polling
// loop: a change reaches every gateway in milliseconds and an idle cluster
// costs no queries; the periodic read only repairs what a broken
// connection missed.
//
// Answers are not in the states, so the hub catches up on them apart: when
// the listen (re)starts it reads every live answer above the last id it had
// heard, and when a gateway replica subscribes, every live answer for it
// (it may have missed them while it reconnected). A replica may so hear an
// answer twice; it ignores what it no longer waits for.
//
// A cancellation comes whole in its announcement and is never stored: it
// matters only while its request runs, so one missed while the listen is
// down is lost (the request runs to its end).
package sessionevents

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/indexer/internal/listen"
	"github.com/switchboard-mcp/switchboard/indexer/internal/store"
)

// ErrNotSynced means the hub has not read the states yet.
var ErrNotSynced = errors.New("session states not read from the store yet")

// subscriberBuffer and subscriberBytes bound the events queued for one
// subscriber, by count and by bytes (an answer may be 4 MiB); one that
// falls this far behind is dropped, as a slow consumer (it reconnects for
// a fresh snapshot, and its answers are read for it again).
const (
	subscriberBuffer = 4096
	subscriberBytes  = 64 << 20
)

// maxQueued bounds the announcements waiting to be read; past it they are
// dropped and a full read is asked for instead (for answers, a read of
// every live answer above the last heard).
const maxQueued = 10_000

// Event is one thing a subscriber hears: a state (Removed: it is gone), an
// answer for it, or a cancellation for whichever replica runs the request.
type Event struct {
	State        store.SessionState
	Removed      bool
	Response     *store.InputResponse
	Cancellation *store.Cancellation
	// queued is the bytes queued for the subscriber it was sent to.
	queued *atomic.Int64
}

// Taken tells the hub the subscriber took ev off its channel: its bytes
// no longer count against the subscriber's budget.
func (ev Event) Taken() {
	if ev.queued != nil {
		ev.queued.Add(-ev.Bytes())
	}
}

// Bytes is about what ev costs queued, and sent.
func (ev Event) Bytes() int64 {
	switch {
	case ev.Response != nil:
		return int64(len(ev.Response.Response) + len(ev.Response.RequestID) + store.SessionStateOverhead)
	case ev.Cancellation != nil:
		return int64(len(ev.Cancellation.SessionDigest) + len(ev.Cancellation.RequestID) + store.SessionStateOverhead)
	case ev.Removed:
		return store.SessionStateOverhead
	default:
		return ev.State.Cost()
	}
}

// Hub is the in-memory set of live session states and its subscribers.
type Hub struct {
	states store.SessionStates
	resync time.Duration
	log    *slog.Logger
	now    func() time.Time
	// wake tells the reader that announcements or a full read wait.
	wake chan struct{}

	mu     sync.Mutex
	live   map[string]store.SessionState
	bytes  int64
	synced bool
	subs   map[*subscriber]struct{}
	// queued announcements: changed session digests and answer ids.
	changed  map[string]struct{}
	answers  map[int64]struct{}
	fullRead bool
	// lastAnswer is the highest answer id heard. catchUp names the
	// replicas that subscribed since the last read, whose live answers
	// are read for them; catchUpAfter, if not negative, asks for every
	// live answer above it (the listen restarted).
	lastAnswer   int64
	catchUp      map[string]struct{}
	catchUpAfter int64
}

type subscriber struct {
	replica string
	ch      chan Event
	// queued is the bytes of the events in ch.
	queued atomic.Int64
	// answered are the answers sent on ch, the most recent
	// rememberedAnswers of them (under the hub's lock): an answer can be
	// both announced and read by a catch-up, and the stream carries it
	// once.
	answered      map[answerKey]struct{}
	answeredOrder []answerKey
}

// answerKey names one relayed answer: a session has one per request.
type answerKey struct{ session, request string }

// rememberedAnswers bounds the answers a subscriber remembers sending. A
// repeat comes from a catch-up read racing the announcement of the same
// answer, a read or two apart, so a few hundred are plenty.
const rememberedAnswers = 1024

// rememberAnswer remembers that k was sent to s, forgetting the oldest
// beyond rememberedAnswers.
func (s *subscriber) rememberAnswer(k answerKey) {
	if s.answered == nil {
		s.answered = map[answerKey]struct{}{}
	}
	if len(s.answeredOrder) == rememberedAnswers {
		delete(s.answered, s.answeredOrder[0])
		s.answeredOrder = s.answeredOrder[1:]
	}
	s.answered[k] = struct{}{}
	s.answeredOrder = append(s.answeredOrder, k)
}

// New returns a hub reading from states; resync is the period of the
// safety-net full read.
func New(states store.SessionStates, resync time.Duration, log *slog.Logger) *Hub {
	return &Hub{states: states, resync: resync, log: log, now: time.Now, wake: make(chan struct{}, 1),
		live: map[string]store.SessionState{}, subs: map[*subscriber]struct{}{},
		changed: map[string]struct{}{}, answers: map[int64]struct{}{}, catchUp: map[string]struct{}{}, catchUpAfter: -1}
}

// Run follows the store until ctx ends.
func (h *Hub) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() { h.readLoop(ctx) })
	defer wg.Wait()
	listen.Follow(ctx, h.log, "session event", func(ctx context.Context, listening func()) error {
		return h.states.ListenSessionEvents(ctx, listening, h.stateChanged, h.answered, h.cancelled)
	}, func() {
		h.askCatchUpAll()
		h.askFullRead()
	})
}

func (h *Hub) signal() {
	select {
	case h.wake <- struct{}{}:
	default:
	}
}

func (h *Hub) askFullRead() {
	h.mu.Lock()
	h.fullRead = true
	h.mu.Unlock()
	h.signal()
}

func (h *Hub) stateChanged(digest string) {
	h.mu.Lock()
	if len(h.changed) < maxQueued {
		h.changed[digest] = struct{}{}
	} else {
		h.fullRead = true
	}
	h.mu.Unlock()
	h.signal()
}

func (h *Hub) answered(id int64) {
	h.mu.Lock()
	if len(h.answers) < maxQueued {
		h.answers[id] = struct{}{}
	} else {
		// Dropped: read again, from below the last heard (askCatchUpAll).
		h.catchUpFromWindowLocked()
	}
	h.lastAnswer = max(h.lastAnswer, id)
	h.mu.Unlock()
	h.signal()
}

// cancelled passes a relayed cancellation to every subscriber at once (it
// needs no read). One whose queue is full misses it rather than being
// dropped: a cancellation is best effort, and a flood of them must not
// make every gateway reconnect and take a new snapshot.
func (h *Hub) cancelled(c store.Cancellation) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ev := Event{Cancellation: &c}
	for s := range h.subs {
		select {
		case s.ch <- ev:
		default:
		}
	}
}

// readLoop reads what the announcements name, and everything when asked
// and every resync period, retrying a second later while reads fail.
func (h *Hub) readLoop(ctx context.Context) {
	tick := time.NewTicker(h.resync)
	defer tick.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			h.askFullRead()
			continue
		case <-h.wake:
		}
		h.mu.Lock()
		full, changed, answers := h.fullRead, h.changed, h.answers
		h.fullRead, h.changed, h.answers = false, map[string]struct{}{}, map[int64]struct{}{}
		owners, after := h.catchUp, h.catchUpAfter
		h.catchUp, h.catchUpAfter = map[string]struct{}{}, -1
		if len(h.subs) == 0 {
			after = -1 // nobody to deliver to; a subscriber catches up itself
		}
		h.mu.Unlock()
		err := h.read(ctx, full, changed, answers)
		if err == nil {
			err = h.catchUpAnswers(ctx, owners, after)
		}
		switch {
		case err == nil:
			failing = false
		case ctx.Err() != nil:
			return
		default:
			if !failing {
				h.log.WarnContext(ctx, "reading session states failed; retrying", "error", err)
			}
			failing = true
			h.askLater(full, changed, answers)
			h.catchUpLater(owners, after)
		}
	}
}

// askLater puts back what a failed read did not get, for a second later.
func (h *Hub) askLater(full bool, changed map[string]struct{}, answers map[int64]struct{}) {
	time.AfterFunc(time.Second, func() {
		h.mu.Lock()
		h.fullRead = h.fullRead || full || len(changed) > 0
		for id := range answers {
			if len(h.answers) < maxQueued {
				h.answers[id] = struct{}{}
			}
		}
		h.mu.Unlock()
		h.signal()
	})
}

func (h *Hub) read(ctx context.Context, full bool, changed map[string]struct{}, answers map[int64]struct{}) error {
	if full {
		if err := h.Resync(ctx); err != nil {
			return err
		}
	} else {
		for digest := range changed {
			if err := h.reread(ctx, digest); err != nil {
				return err
			}
		}
	}
	// In id order, as a catch-up reads them: a subscriber's most recent
	// answers, which it remembers, are then the highest ids, the window a
	// catch-up reads again (askCatchUpAll).
	for _, id := range slices.Sorted(maps.Keys(answers)) {
		r, found, err := h.states.InputResponse(ctx, id)
		if err != nil {
			return err
		}
		if found {
			// The record stays until it expires, so that the request is
			// answered once whatever replica a second answer reaches.
			h.deliver(r)
		}
	}
	return nil
}

// reread reads one session's state and passes on what changed.
func (h *Hub) reread(ctx context.Context, digest string) error {
	st, found, err := h.states.SessionStateOf(ctx, digest)
	if err != nil {
		return err
	}
	if found {
		h.Apply(st)
	} else {
		h.Remove(digest)
	}
	return nil
}

// Resync reads every live state, passes on the ones newer than held, and
// checks the held ones the read did not list (gone, or written after it).
func (h *Hub) Resync(ctx context.Context) error {
	states, err := h.states.SessionStates(ctx)
	if err != nil {
		return err
	}
	listed := make(map[string]struct{}, len(states))
	for _, st := range states {
		listed[st.Digest] = struct{}{}
		h.Apply(st)
	}
	h.mu.Lock()
	var unlisted []string
	now := h.now()
	for d, st := range h.live {
		if _, ok := listed[d]; !ok && now.Before(st.ExpiresAt) {
			unlisted = append(unlisted, d)
		}
	}
	h.mu.Unlock()
	for _, d := range unlisted {
		if err := h.reread(ctx, d); err != nil {
			return err
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.synced = true
	for d, st := range h.live {
		if !now.Before(st.ExpiresAt) {
			h.drop(d, st)
		}
	}
	return nil
}

// Apply holds st if it is newer than the copy held, and passes it on.
func (h *Hub) Apply(st store.SessionState) {
	h.mu.Lock()
	defer h.mu.Unlock()
	old, ok := h.live[st.Digest]
	if ok && st.Version <= old.Version || !h.now().Before(st.ExpiresAt) {
		return
	}
	h.bytes += st.Charge()
	if ok {
		h.bytes -= old.Charge()
	}
	h.live[st.Digest] = st
	h.broadcast(Event{State: st})
}

// Remove forgets a session's state (it was revoked, or expired) and passes
// that on.
func (h *Hub) Remove(digest string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if st, ok := h.live[digest]; ok {
		h.drop(digest, st)
	}
}

// drop forgets a held state. Call with h.mu held.
func (h *Hub) drop(digest string, st store.SessionState) {
	delete(h.live, digest)
	h.bytes -= st.Charge()
	h.broadcast(Event{State: store.SessionState{Digest: digest}, Removed: true})
}

// broadcast passes ev to every subscriber. Call with h.mu held.
func (h *Hub) broadcast(ev Event) {
	for s := range h.subs {
		h.send(s, ev)
	}
}

// send queues ev for s, dropping s if it fell too far behind. Call with
// h.mu held.
func (h *Hub) send(s *subscriber, ev Event) bool {
	ev.queued = &s.queued
	// Counted before it is sent, so that the subscriber's Taken never
	// comes first.
	if n := ev.Bytes(); s.queued.Add(n) <= subscriberBytes {
		select {
		case s.ch <- ev:
			return true
		default:
		}
	}
	delete(h.subs, s)
	close(s.ch)
	return false
}

// deliver passes an answer to its owner's stream, once, if the owner is
// subscribed here; it reports whether it was.
func (h *Hub) deliver(r store.InputResponse) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	k := answerKey{r.SessionDigest, r.RequestID}
	for s := range h.subs {
		if s.replica != r.Owner {
			continue
		}
		if _, sent := s.answered[k]; sent {
			return true
		}
		if h.send(s, Event{Response: &r}) {
			s.rememberAnswer(k)
			return true
		}
	}
	return false
}

// Bytes is what the live states count together against the bounds
// (store.SessionState.Charge).
func (h *Hub) Bytes() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.bytes
}

// Live is the number of live states held.
func (h *Hub) Live() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.live)
}

// Subscribe returns every live state and a channel of what happens from
// then on, with nothing missed in between; answers for replica come on it
// too. The channel closes if the subscriber falls too far behind; cancel
// ends the subscription. Before the first full read it fails with
// ErrNotSynced.
func (h *Hub) Subscribe(replica string) (snapshot []store.SessionState, events <-chan Event, cancel func(), err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.synced {
		return nil, nil, nil, ErrNotSynced
	}
	now := h.now()
	for _, st := range h.live {
		if now.Before(st.ExpiresAt) {
			snapshot = append(snapshot, st)
		}
	}
	s := &subscriber{replica: replica, ch: make(chan Event, subscriberBuffer)}
	h.subs[s] = struct{}{}
	if replica != "" && len(h.catchUp) < maxQueued {
		h.catchUp[replica] = struct{}{}
		h.signal()
	}
	return snapshot, s.ch, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if _, ok := h.subs[s]; ok {
			delete(h.subs, s)
			close(s.ch)
		}
	}, nil
}
