package sessionevents

import "context"

// askCatchUpAll asks for every live answer: those announced while the
// listen was down were not heard, and not only above the last heard, as
// ids are taken when a relay is written but committed in any order (one
// below the last heard may have committed while the listen was down).
// Each subscriber gets an answer once however often it is read
// (deliver), and answers live an hour at most.
func (h *Hub) askCatchUpAll() {
	h.mu.Lock()
	h.catchUpAfter = 0
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
