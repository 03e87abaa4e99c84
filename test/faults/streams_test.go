package faults

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/demobackend"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// notifiedSession is a go-sdk session of one era whose client counts the
// notifications/tools/list_changed it receives: a Modern client on the
// listen stream it opens when the server advertises tools.listChanged, a
// Legacy one on its session's GET stream.
type notifiedSession struct {
	era      string
	cs       *mcp.ClientSession
	notified chan struct{}
}

func connectNotified(t *testing.T, url string) []*notifiedSession {
	t.Helper()
	var out []*notifiedSession
	for _, era := range eras {
		ns := &notifiedSession{era: era.name, notified: make(chan struct{}, 64)}
		ns.cs = harness.ConnectWith(t, url, era.pin, &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
				select {
				case ns.notified <- struct{}{}:
				default:
				}
			},
		})
		out = append(out, ns)
	}
	return out
}

// drain forgets the notifications received so far.
func (ns *notifiedSession) drain() {
	for {
		select {
		case <-ns.notified:
		default:
			return
		}
	}
}

// awaitListing waits for list_changed notifications until the session's
// listing satisfies ok: one change may be announced more than once, and
// a notification may come before the listing shows the change.
func (ns *notifiedSession) awaitListing(t *testing.T, what string, ok func([]string) bool) {
	t.Helper()
	deadline := time.After(pollDeadline)
	for {
		select {
		case <-ns.notified:
		case <-deadline:
			names, err := toolNames(t.Context(), ns.cs)
			t.Fatalf("%s: no notifications/tools/list_changed leading to a listing %s within %v (listing now %v, %v; server capabilities %+v)",
				ns.era, what, pollDeadline, names, err, ns.cs.InitializeResult().Capabilities.Tools)
		}
		if names, err := toolNames(t.Context(), ns.cs); err == nil && ok(names) {
			return
		}
	}
}

// openStreams reads the gateway's switchboard_gateway_open_streams gauge,
// by kind (listen, legacy_get).
func openStreams(t *testing.T, c *harness.Cluster) map[string]int {
	t.Helper()
	resp, err := http.Get("http://" + c.Config.Gateway.Listen + "/metrics")
	if err != nil {
		t.Fatalf("gateway metrics: %v", err)
	}
	defer resp.Body.Close()
	out := map[string]int{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), `switchboard_gateway_open_streams{kind="`)
		if !ok {
			continue
		}
		kind, value, _ := strings.Cut(rest, `"} `)
		n, _ := strconv.ParseFloat(value, 64)
		out[kind] = int(n)
	}
	return out
}

// awaitStreams waits until the gateway holds a listen and a GET stream.
func awaitStreams(t *testing.T, c *harness.Cluster, sessions []*notifiedSession) {
	t.Helper()
	testkit.Eventually(t, "the Modern listen and the Legacy GET stream are open at the gateway", pollDeadline, func() error {
		if got := openStreams(t, c); got["listen"] < 1 || got["legacy_get"] < 1 {
			var caps []string
			for _, ns := range sessions {
				caps = append(caps, fmt.Sprintf("%s tools capability %+v", ns.era, ns.cs.InitializeResult().Capabilities.Tools))
			}
			return fmt.Errorf("open streams %v; %s", got, strings.Join(caps, ", "))
		}
		return nil
	})
}

// TestConnectedWhileBackendDown connects clients of both eras while the
// only backend is down, so their views are empty: the capabilities they
// got still announce tools with listChanged (they follow the
// configuration, not the momentary view), so the Modern client listens
// and both learn of the tools once the backend is back.
func TestConnectedWhileBackendDown(t *testing.T) {
	c := startCluster(t, false, "alpha")
	alpha := c.Backends["alpha"]
	alpha.Stop()
	probe := connect(t, c.MCPURL, harness.Modern, &recordingTransport{})
	testkit.Eventually(t, "alpha's tools are gone from the catalog", pollDeadline, func() error {
		names, err := toolNames(t.Context(), probe)
		if err != nil || hasPrefix(names, "alpha_") {
			return fmt.Errorf("tools %v, %v", names, err)
		}
		return nil
	})

	sessions := connectNotified(t, c.MCPURL)
	for _, ns := range sessions {
		if tools := ns.cs.InitializeResult().Capabilities.Tools; tools == nil || !tools.ListChanged {
			t.Errorf("%s: connected with an empty view, the tools capability is %+v; want listChanged", ns.era, tools)
		}
	}
	awaitStreams(t, c, sessions)

	alpha.Restart()
	for _, ns := range sessions {
		ns.awaitListing(t, "with alpha_echo", func(names []string) bool { return slices.Contains(names, "alpha_echo") })
		if o := call(t.Context(), ns.cs, "alpha_echo", nil, cleanFailure); !o.ok {
			t.Errorf("%s: alpha_echo after the backend came up: %s", ns.era, o.message)
		}
	}
	checkNoCrash(t, procs(c), nil)
}

// TestStreamsSurviveAggregatorRestart restarts the aggregator under a
// Modern listen and a Legacy GET stream, then changes the backend's tools
// twice: both clients are notified of each change on the streams they
// already had, so the gateway reopened its catalog watches by itself.
func TestStreamsSurviveAggregatorRestart(t *testing.T) {
	c := startCluster(t, false, "alpha")
	sessions := connectNotified(t, c.MCPURL)
	awaitStreams(t, c, sessions)

	c.Aggregator.Stop()
	c.Aggregator.Restart()
	testkit.Eventually(t, "calls succeed through the restarted aggregator", pollDeadline, func() error {
		for _, ns := range sessions {
			if o := call(t.Context(), ns.cs, "alpha_echo", nil, cleanFailure); !o.ok {
				return fmt.Errorf("%s: %s", ns.era, o.message)
			}
		}
		return nil
	})
	for _, ns := range sessions {
		ns.drain()
	}

	c.AddTool(t, "alpha", demobackend.ToolSpec{Name: "late", Description: "Added after the restart.", Behaviour: demobackend.BehaviourEcho})
	for _, ns := range sessions {
		ns.awaitListing(t, "with alpha_late", func(names []string) bool { return slices.Contains(names, "alpha_late") })
	}
	// A second change after the first was delivered: the watch the
	// gateway reopened carries it, not a one-off notice of the reopening.
	for _, ns := range sessions {
		ns.drain()
	}
	c.RemoveTool(t, "alpha", "late")
	for _, ns := range sessions {
		ns.awaitListing(t, "without alpha_late", func(names []string) bool { return !slices.Contains(names, "alpha_late") })
	}
	if got := openStreams(t, c); got["listen"] < 1 || got["legacy_get"] < 1 {
		t.Errorf("open streams after the restart %v; want the listen and the GET stream still open", got)
	}
	for _, ns := range sessions {
		if o := call(t.Context(), ns.cs, "alpha_echo", nil, cleanFailure); !o.ok {
			t.Errorf("%s: the session does not serve after the restart: %s", ns.era, o.message)
		}
	}
	checkNoCrash(t, procs(c), nil)
}
