package sessionevents

import "context"

// askCatchUpAll asks for the live answers announced while the listen was
// down, which were not heard. Not only those above the last heard: ids
// are taken when a relay is written and committed in any order, so one
// below it may have committed while the listen was down. Relays commit
// out of order only among those written together, so the catch-up starts
// catchUpWindow ids below the last heard; each subscriber remembers four
// times as many answers it got (deliver), so none of them is sent it
// twice, in whatever order they were delivered.
func (h *Hub) askCatchUpAll() {
	h.mu.Lock()
	h.catchUpFromWindowLocked()
	h.mu.Unlock()
}

// catchUpWindow is how far below the last answer heard a catch-up
// starts: more relays than are ever written at once.
const catchUpWindow = rememberedAnswers / 4

// catchUpFromWindowLocked asks for every live answer above the window
// below the last heard (askCatchUpAll). Call with h.mu held.
func (h *Hub) catchUpFromWindowLocked() {
	from := max(0, h.lastAnswer-catchUpWindow)
	if h.catchUpAfter < 0 || from < h.catchUpAfter {
		h.catchUpAfter = from
	}
}

// catchUpLater puts back what a failed read did not catch up on.
func (h *Hub) catchUpLater(owners map[string]struct{}, after int64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for o := range owners {
		if len(h.catchUp) < maxQueued {
			h.catchUp[o] = struct{}{}
		}
	}
	if after >= 0 && (h.catchUpAfter < 0 || after < h.catchUpAfter) {
		h.catchUpAfter = after
	}
}

// catchUpAnswers delivers the live answers of each of owners, and every
// live answer above after if it is not negative.
func (h *Hub) catchUpAnswers(ctx context.Context, owners map[string]struct{}, after int64) error {
	var ids []int64
	for after >= 0 {
		// Every page: the answers above after are not all one page.
		page, err := h.states.InputResponseIDs(ctx, "", after, maxQueued)
		if err != nil {
			return err
		}
		ids = append(ids, page...)
		if len(page) < maxQueued {
			break
		}
		after = page[len(page)-1]
	}
	for owner := range owners {
		theirs, err := h.states.InputResponseIDs(ctx, owner, 0, maxQueued)
		if err != nil {
			return err
		}
		ids = append(ids, theirs...)
	}
	for _, id := range ids {
		r, found, err := h.states.InputResponse(ctx, id)
		if err != nil {
			return err
		}
		if found {
			h.deliver(r)
		}
		h.mu.Lock()
		h.lastAnswer = max(h.lastAnswer, id)
		h.mu.Unlock()
	}
	return nil
}
