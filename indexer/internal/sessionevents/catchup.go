package sessionevents

import "context"

// askCatchUpAll asks for every live answer above the last heard: those
// announced while the listen was down were not heard.
func (h *Hub) askCatchUpAll() {
	h.mu.Lock()
	if h.catchUpAfter < 0 || h.lastAnswer < h.catchUpAfter {
		h.catchUpAfter = h.lastAnswer
	}
	h.mu.Unlock()
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
	if after >= 0 {
		all, err := h.states.InputResponseIDs(ctx, "", after, maxQueued)
		if err != nil {
			return err
		}
		ids = all
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
