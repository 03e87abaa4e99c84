package faults

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
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

// cuttingTransport cuts the GET streams it opened when told to, as a
// proxy's idle timeout or a network blip would, and counts the GET
// answers by status.
type cuttingTransport struct {
	mu     sync.Mutex
	open   []io.Closer
	status []int
}

func (ct *cuttingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil && req.Method == http.MethodGet {
		ct.mu.Lock()
		ct.open = append(ct.open, resp.Body)
		ct.status = append(ct.status, resp.StatusCode)
		ct.mu.Unlock()
	}
	return resp, err
}

// cut closes every GET stream opened so far.
func (ct *cuttingTransport) cut() {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	for _, body := range ct.open {
		body.Close()
	}
	ct.open = nil
}

// gets returns the statuses of the GET answers so far.
func (ct *cuttingTransport) gets() []int {
	ct.mu.Lock()
	defer ct.mu.Unlock()
	return slices.Clone(ct.status)
}

// TestLegacyStreamReconnectsWhileAggregatorDown: a Legacy session's GET
// stream is cut while the aggregator is down, and the go-sdk client
// reconnects (with Last-Event-ID) at once. The gateway cannot open a
// catalog watch then, yet it opens the stream and watches once the
// aggregator is back: a refused reconnect would end the client's session
// (go-sdk v1.8.0 fails it), a refused first GET its notifications. The
// session then serves, and its stream carries the next change.
func TestLegacyStreamReconnectsWhileAggregatorDown(t *testing.T) {
	c := startCluster(t, false, "alpha")
	ct := &cuttingTransport{}
	notified := make(chan struct{}, 64)
	client := mcp.NewClient(&mcp.Implementation{Name: "switchboard-faults", Version: "0"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) {
			select {
			case notified <- struct{}{}:
			default:
			}
		},
	})
	cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: c.MCPURL, HTTPClient: &http.Client{Transport: ct}},
		&mcp.ClientSessionOptions{ProtocolVersion: harness.Legacy})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	testkit.Eventually(t, "the Legacy GET stream is open at the gateway", pollDeadline, func() error {
		if got := openStreams(t, c); got["legacy_get"] != 1 {
			return fmt.Errorf("open streams %v", got)
		}
		return nil
	})

	c.Aggregator.Kill()
	ct.cut()
	testkit.Eventually(t, "the client reconnects its GET stream", pollDeadline, func() error {
		if got := ct.gets(); len(got) < 2 {
			return fmt.Errorf("GET answers %v", got)
		}
		return nil
	})
	c.Aggregator.Restart()
	testkit.Eventually(t, "the session serves through the restarted aggregator", pollDeadline, func() error {
		if o := call(t.Context(), cs, "alpha_echo", nil, cleanFailure); !o.ok {
			return fmt.Errorf("%s (GET answers %v)", o.message, ct.gets())
		}
		return nil
	})
	ns := &notifiedSession{era: "legacy", cs: cs, notified: notified}
	ns.drain()
	c.AddTool(t, "alpha", demobackend.ToolSpec{Name: "late", Description: "Added after the restart.", Behaviour: demobackend.BehaviourEcho})
	ns.awaitListing(t, "with alpha_late", func(names []string) bool { return slices.Contains(names, "alpha_late") })
	if got := ct.gets(); slices.ContainsFunc(got, func(s int) bool { return s != http.StatusOK }) {
		t.Errorf("GET answers %v, want every one 200", got)
	}
}
