package engine

import (
	"fmt"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/traffic"
)

// The traffic page's timeline (opts.Traffic) hears of each backend's
// health changes (newClient), of reloads (Reconfigure) and, here, of
// quarantines.

// noteHeld records, for the traffic page's timeline, each backend whose
// number of tools held back by pinning (in before, not in after) changed
// since the last build. Called under rebuildMu.
func (e *Engine) noteHeld(before, after map[string]*backend.Lists) {
	if e.opts.Traffic == nil {
		return
	}
	if e.held == nil {
		e.held = map[string]int{}
	}
	for b, l := range before {
		n := len(l.Tools)
		if a := after[b]; a != nil {
			n -= len(a.Tools)
		}
		if n != e.held[b] {
			e.opts.Traffic.Health(traffic.HealthEvent{Backend: b, State: "quarantine", Detail: fmt.Sprintf("%d tools held for review", n)})
			e.held[b] = n
		}
	}
}
