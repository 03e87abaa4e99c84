// Package pinning guards the catalog against a backend that changes a
// tool's definition after it was reviewed (a "rug pull"): the aggregator
// records the digest of each backend tool's definition with the indexer,
// which keeps them in PostgreSQL so that every replica agrees, and learns
// each tool's approved digest: the first ever recorded, or the one an
// operator approved since (docs/operations.md, "Pinned tool definitions").
//
// In pin mode a tool whose definition differs from its approved one is
// quarantined: Filter removes it from its backend's lists before the
// catalog is built, so it is not listed, not found by find_tool and not
// callable, exactly like a tool the backend does not have. In warn mode it
// stays, logged and counted. Off does nothing.
package pinning

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/traffic"
	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/tooldigest"
)

const (
	// maxPerRequest is the indexer's bound of one RecordToolDefinitions.
	maxPerRequest = 10_000
	// The indexer's bounds of the names it records; a tool beyond them is
	// never verified.
	maxBackendBytes = 256
	maxToolBytes    = 512
	// The indexer's bounds of the definitions sent for review.
	maxDefinitionBytes        = 64 << 10
	maxDefinitionRequestBytes = 8 << 20
	// DefaultTimeout bounds the recording of one build's tools.
	DefaultTimeout = 5 * time.Second
)

// errShortAnswer: the indexer answered fewer verdicts than it was asked.
var errShortAnswer = errors.New("the indexer did not answer one verdict per tool")

type key struct{ backend, tool string }

// derived is a backend's lists with its quarantined tools removed, kept
// so that the same input and verdicts give the same pointer (the catalog
// builder caches by pointer).
type derived struct {
	in      *backend.Lists
	removed string
	// held is how many tools it removed.
	held int
	out  *backend.Lists
}

// digested holds the digests of one backend's listed tools, index for
// index, for the lists they were computed from.
type digested struct {
	lists *backend.Lists
	sums  []string // "" for a tool that could not be digested
}

// Guard filters backend lists by their tools' approved digests.
type Guard struct {
	mode    string
	client  indexerv1.IndexerServiceClient
	timeout time.Duration
	log     *slog.Logger
	metrics *Metrics
	// trail records each quarantine (SetAudit); nil: none.
	trail *audit.Writer
	// timeline hears each change of a backend's number of held tools
	// (SetTimeline); nil: nothing.
	timeline *traffic.Recorder
	// retry asks Run for a rebuild after a failed record.
	retry chan struct{}
	// reviewNew records the new tools of a backend with tools recorded
	// as pending (aggregator.pinning.newTools review).
	reviewNew bool

	mu      sync.Mutex
	digests map[string]digested
	// approved holds the last known approved digest of each tool; a tool
	// whose current digest it holds stays listed across indexer outages.
	approved map[key]string
	// recorded are the lists of the last successful record; stale asks
	// for a record even if they did not change (an approval was heard).
	recorded map[string]*backend.Lists
	stale    bool
	// failures counts the records failed in a row.
	failures int
	derived  map[string]derived
	// flagged holds the changed definitions already logged, by tool.
	flagged map[key]string
	// sent holds the pending digests whose definitions the indexer has.
	sent map[key]string
}

// New returns a guard in mode (config.PinningOff, PinningWarn,
// PinningPin) recording through client, which may be nil when the mode
// is off. metrics may be nil.
func New(mode string, client indexerv1.IndexerServiceClient, log *slog.Logger, metrics *Metrics) *Guard {
	return &Guard{mode: mode, client: client, timeout: DefaultTimeout, log: log, metrics: metrics, retry: make(chan struct{}, 1),
		digests: map[string]digested{}, approved: map[key]string{}, recorded: map[string]*backend.Lists{},
		derived: map[string]derived{}, flagged: map[key]string{}, sent: map[key]string{}}
}

// SetAudit records every quarantine (mode pin) and every flagged change
// (mode warn) in w, once per changed definition, as the log line is.
// Call before the guard is used.
func (g *Guard) SetAudit(w *audit.Writer) { g.trail = w }

// SetTimeline tells r, for the traffic page's timeline, each time the
// number of a backend's tools held back changes. Call before the guard is
// used.
func (g *Guard) SetTimeline(r *traffic.Recorder) { g.timeline = r }

// ReviewNewTools makes a tool name a backend lists for the first time,
// once the backend has tools recorded, pending until an operator approves
// it, instead of approved by being first: a backend that renames a tool
// does not skip review. Call before the guard is used.
func (g *Guard) ReviewNewTools(on bool) { g.reviewNew = on }

// Mode is the guard's mode.
func (g *Guard) Mode() string { return g.mode }

// Filter returns lists with the quarantined tools removed, from both
// Lists.Tools and Lists.Definitions.Tools. A backend whose lists lose
// nothing keeps its pointer; one that loses tools gets a copy, the same
// one for the same input and verdicts. In pin mode a tool is kept only if
// its digest is the approved one as last heard from the indexer: a tool
// never verified (the indexer unreachable since it appeared) is held back
// until it is. A nil guard, or mode off, returns lists as they are.
func (g *Guard) Filter(ctx context.Context, lists map[string]*backend.Lists) map[string]*backend.Lists {
	if g == nil || g.mode == config.PinningOff {
		return lists
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	// The backends of the last lists that these lack: a reload removed
	// them (digestAll forgets them).
	var gone []string
	for b := range g.digests {
		if _, listed := lists[b]; !listed {
			gone = append(gone, b)
		}
	}
	g.digestAll(lists)
	if g.stale || !maps.Equal(g.recorded, lists) {
		g.record(ctx, lists)
	}
	out := make(map[string]*backend.Lists, len(lists))
	derivedNow := make(map[string]derived, len(lists))
	flaggedNow := map[key]string{}
	for _, b := range slices.Sorted(maps.Keys(lists)) {
		l := lists[b]
		var removed []int
		for i, t := range l.Tools {
			sum := g.digests[b].sums[i]
			k := key{b, t.Name}
			approved, known := g.approved[k]
			if known && approved == sum && sum != "" {
				continue
			}
			if known && sum != "" {
				flaggedNow[k] = sum
				if g.flagged[k] != sum {
					g.logChange(b, t.Name, approved, sum)
				}
			}
			if g.mode == config.PinningPin {
				removed = append(removed, i)
			}
		}
		g.heldBack(b, len(removed))
		if len(removed) == 0 {
			out[b] = l
			continue
		}
		sig := signature(removed)
		d, ok := g.derived[b]
		if !ok || d.in != l || d.removed != sig {
			d = derived{in: l, removed: sig, held: len(removed), out: without(l, removed)}
		}
		derivedNow[b] = d
		out[b] = d.out
	}
	for _, b := range gone {
		g.heldBack(b, 0)
		// Its series go with it, as the engine's do: a gauge left at its
		// last value (or 0) would show a backend that is not there.
		g.metrics.forget(b)
	}
	g.derived, g.flagged = derivedNow, flaggedNow
	return out
}

// heldBack records that n tools of backend b are held back: in the gauge
// and, when the number changed since the last Filter (g.derived, not yet
// replaced), on the timeline.
func (g *Guard) heldBack(b string, n int) {
	g.metrics.quarantined(b, n)
	if g.derived[b].held == n {
		return
	}
	g.timeline.Health(traffic.HealthEvent{Backend: b, State: "quarantine", Detail: fmt.Sprintf("%d tools held for review", n)})
}

// logChange logs (once per changed definition) and counts a tool whose
// definition is not the approved one.
func (g *Guard) logChange(b, tool, approved, seen string) {
	// No approved digest: a new tool of a backend whose tools were
	// recorded before, pending review (ReviewNewTools).
	what, detail := "tool definition changed since it was approved", "definition changed since approved: approved sha256 "+approved+", seen sha256 "+seen
	if approved == "" {
		what, detail = "new tool of a backend whose tools are pinned", "new tool since the backend's tools were recorded: seen sha256 "+seen
	}
	e := audit.Event{Kind: audit.KindQuarantine, Outcome: audit.OutcomeChanged, Backend: b, Tool: tool, Detail: detail}
	if g.mode == config.PinningPin {
		e.Outcome = audit.OutcomeQuarantined
	}
	g.trail.Record(e)
	if g.mode == config.PinningPin {
		g.log.Warn(what+": quarantined until an operator approves it (docs/operations.md, Pinned tool definitions)",
			"backend", b, "tool", tool, "approved_digest", approved, "seen_digest", seen)
		g.metrics.quarantine(b)
		return
	}
	g.log.Warn(what+" (aggregator.pinning.mode warn: still listed)",
		"backend", b, "tool", tool, "approved_digest", approved, "seen_digest", seen)
	g.metrics.warning(b)
}

// digestAll computes the digests of the lists not digested yet and
// forgets those of lists gone.
func (g *Guard) digestAll(lists map[string]*backend.Lists) {
	for b, d := range g.digests {
		if lists[b] != d.lists {
			delete(g.digests, b)
		}
	}
	for b, l := range lists {
		if _, ok := g.digests[b]; ok {
			continue
		}
		sums := make([]string, len(l.Tools))
		for i, t := range l.Tools {
			var def []byte
			if len(l.Definitions.Tools) == len(l.Tools) {
				def = l.Definitions.Tools[i]
			}
			sum, err := tooldigest.Digest(def, t)
			if err != nil {
				// Never verified: held back in pin mode.
				g.log.Warn("tool definition cannot be digested", "backend", b, "tool", t.Name, "err", err)
				continue
			}
			sums[i] = sum
		}
		g.digests[b] = digested{lists: l, sums: sums}
	}
}

// record sends every digestible tool's digest to the indexer, in requests
// of at most maxPerRequest, and keeps the approved digests it answers. A
// failure leaves the last known ones and asks Run to try again.
func (g *Guard) record(ctx context.Context, lists map[string]*backend.Lists) {
	var tools []*indexerv1.ToolDefinitionDigest
	seen := map[key]bool{}
	for b, l := range lists {
		for i, t := range l.Tools {
			k := key{b, t.Name}
			sum := g.digests[b].sums[i]
			// A backend that lists one name twice is recorded with the
			// first; the second is checked against the same approval.
			if sum == "" || seen[k] || !recordable(b, t.Name) {
				continue
			}
			seen[k] = true
			tools = append(tools, &indexerv1.ToolDefinitionDigest{Backend: b, Tool: t.Name, Digest: sum})
		}
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	approved := make(map[key]string, len(tools))
	for chunk := range slices.Chunk(tools, maxPerRequest) {
		resp, err := g.client.RecordToolDefinitions(ctx, &indexerv1.RecordToolDefinitionsRequest{Tools: chunk, NewToolsPending: g.reviewNew})
		if err == nil && len(resp.GetVerdicts()) != len(chunk) {
			err = errShortAnswer
		}
		if err != nil {
			if g.failures == 0 {
				g.log.Warn("recording tool definitions with the indexer failed: tools not verified since are held back in pin mode; retrying",
					"mode", g.mode, "err", err)
			}
			g.failures++
			g.stale = true
			select {
			case g.retry <- struct{}{}:
			default:
			}
			return
		}
		for _, v := range resp.GetVerdicts() {
			approved[key{v.GetBackend(), v.GetTool()}] = v.GetApprovedDigest()
		}
	}
	if g.failures > 0 {
		g.log.Info("recording tool definitions with the indexer works again", "tools", len(tools))
	}
	g.approved, g.recorded, g.stale, g.failures = approved, maps.Clone(lists), false, 0
	g.sendDefinitions(ctx, lists)
}

// sendDefinitions sends the definitions of the pending tools that were not
// sent yet, for operators to review (ListToolDefinitions). Only pending
// ones: a catalog's approved definitions would only take space. A failure
// is logged; the verdicts stand, and the next record sends them again.
func (g *Guard) sendDefinitions(ctx context.Context, lists map[string]*backend.Lists) {
	var pending []*indexerv1.ToolDefinitionDigest
	sent := map[key]string{}
	for b, l := range lists {
		for i, t := range l.Tools {
			k, sum := key{b, t.Name}, g.digests[b].sums[i]
			approved, known := g.approved[k]
			if !known || sum == "" || approved == sum || sent[k] != "" {
				continue
			}
			sent[k] = sum
			if g.sent[k] == sum {
				continue
			}
			def, err := definitionJSON(l, i)
			if err != nil || len(def) > maxDefinitionBytes {
				g.log.Warn("pending tool definition not sent for review: too large or not encodable", "backend", b, "tool", t.Name, "bytes", len(def), "err", err)
				continue
			}
			pending = append(pending, &indexerv1.ToolDefinitionDigest{Backend: b, Tool: t.Name, Digest: sum, DefinitionJson: def})
		}
	}
	for len(pending) > 0 {
		n, size := 0, 0
		for n < len(pending) && n < maxPerRequest && size+len(pending[n].DefinitionJson) <= maxDefinitionRequestBytes {
			size += len(pending[n].DefinitionJson)
			n++
		}
		if _, err := g.client.RecordToolDefinitions(ctx, &indexerv1.RecordToolDefinitionsRequest{Tools: pending[:n]}); err != nil {
			g.log.Warn("sending pending tool definitions for review failed; sent again at the next record", "err", err)
			for _, p := range pending {
				delete(sent, key{p.GetBackend(), p.GetTool()})
			}
			break
		}
		pending = pending[n:]
	}
	g.sent = sent
}

// definitionJSON is the tool's JSON object as the backend listed it.
func definitionJSON(l *backend.Lists, i int) (string, error) {
	if len(l.Definitions.Tools) == len(l.Tools) {
		return string(l.Definitions.Tools[i]), nil
	}
	raw, err := json.Marshal(l.Tools[i])
	return string(raw), err
}

func recordable(b, tool string) bool {
	return b != "" && len(b) <= maxBackendBytes && tool != "" && len(tool) <= maxToolBytes &&
		!strings.ContainsRune(b, 0) && !strings.ContainsRune(tool, 0)
}

// without copies l without the tools at the indexes removed (ascending).
func without(l *backend.Lists, removed []int) *backend.Lists {
	c := *l
	c.Tools = make([]*mcp.Tool, 0, len(l.Tools)-len(removed))
	hasDefs := len(l.Definitions.Tools) == len(l.Tools)
	if hasDefs {
		c.Definitions.Tools = make([][]byte, 0, len(l.Tools)-len(removed))
	}
	next := 0
	for i, t := range l.Tools {
		if next < len(removed) && removed[next] == i {
			next++
			continue
		}
		c.Tools = append(c.Tools, t)
		if hasDefs {
			c.Definitions.Tools = append(c.Definitions.Tools, l.Definitions.Tools[i])
		}
	}
	return &c
}

func signature(removed []int) string {
	var b strings.Builder
	for _, i := range removed {
		b.WriteString(strconv.Itoa(i))
		b.WriteByte(',')
	}
	return b.String()
}
