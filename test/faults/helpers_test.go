package faults

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// Every backend of these tests serves an echo tool, for load, and a sleep
// tool, for calls that are still in flight when something dies.
const backendSpec = `
tools:
  - {name: echo, description: Echo the arguments back., behaviour: echo}
  - {name: sleep, description: Wait for a duration., behaviour: sleep}
`

// backendTimeout is the per-backend request timeout. A call to a dead
// backend must fail far sooner than this: it is not waited out.
const backendTimeout = 20 * time.Second

// failFast is how quickly a call to a dead backend must come back.
const failFast = 5 * time.Second

// pollDeadline bounds every wait for recovery; the machine is shared and
// slow, and a probe interval or a reconnect back-off is part of it.
const pollDeadline = 60 * time.Second

var eras = []struct{ name, pin string }{{"modern", harness.Modern}, {"legacy", harness.Legacy}}

// startCluster starts a cluster whose backends are probed often, so a dead
// one is noticed within a second or two, and whose gateways share a
// session key.
func startCluster(t *testing.T, withIndexer bool, backends ...string) *harness.Cluster {
	t.Helper()
	var bs []harness.Backend
	for _, name := range backends {
		bs = append(bs, harness.Backend{Name: name, Spec: backendSpec})
	}
	return startClusterWith(t, withIndexer, bs...)
}

func startClusterWith(t *testing.T, withIndexer bool, bs ...harness.Backend) *harness.Cluster {
	t.Helper()
	return harness.Start(t, harness.Options{Backends: bs, NoIndexer: !withIndexer, Configure: func(cfg *config.Config) {
		cfg.Logging.Level = "info"
		cfg.Aggregator.Health = config.HealthCheck{
			Interval:           config.Duration(300 * time.Millisecond),
			Timeout:            config.Duration(time.Second),
			DegradedThreshold:  config.Duration(time.Second),
			UnhealthyThreshold: 2,
		}
		for i := range cfg.Aggregator.Backends {
			cfg.Aggregator.Backends[i].Timeout = config.Duration(backendTimeout)
		}
		cfg.Gateway.Sessions.Key = sessionKey(t)
		// go-sdk clients cache lists for the advertised ttlMs; these tests
		// watch listings change, so every list goes to the gateway.
		cfg.Gateway.Cache.TTL = config.Duration(time.Millisecond)
	}})
}

func sessionKey(t *testing.T) string {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(key)
}

// procs returns every process of c, plus extra ones.
func procs(c *harness.Cluster, extra ...*harness.Proc) []*harness.Proc {
	ps := []*harness.Proc{c.Aggregator, c.Gateway}
	if c.Indexer != nil {
		ps = append(ps, c.Indexer)
	}
	for _, b := range c.Backends {
		ps = append(ps, b)
	}
	return append(ps, extra...)
}

// checkNoCrash fails the test when a process other than killed is not
// running, or when any process (killed included) logged a panic.
func checkNoCrash(t *testing.T, all []*harness.Proc, killed *harness.Proc) {
	t.Helper()
	for _, p := range all {
		if p != killed && !p.Running() {
			t.Errorf("%s is not running after the fault", p.Name)
		}
		if log := p.Log(8 << 20); strings.Contains(log, "panic") {
			t.Errorf("%s logged a panic:\n%s", p.Name, log[max(0, strings.Index(log, "panic")-200):min(len(log), strings.Index(log, "panic")+2000)])
		}
	}
}

// recordingTransport sends requests to the address in target (when set)
// instead of the URL's own host, so one go-sdk session can move between
// gateway replicas, and it records every 5xx answer.
type recordingTransport struct {
	target   atomic.Pointer[string]
	mu       sync.Mutex
	serverEr []string
}

func (rt *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if target := rt.target.Load(); target != nil {
		req = req.Clone(req.Context())
		req.URL.Host = *target
		req.Host = *target
	}
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err == nil && resp.StatusCode >= 500 {
		rt.mu.Lock()
		rt.serverEr = append(rt.serverEr, fmt.Sprintf("%s %s: %s", req.Method, req.URL, resp.Status))
		rt.mu.Unlock()
	}
	return resp, err
}

// serverErrors returns the 5xx answers seen so far.
func (rt *recordingTransport) serverErrors() []string {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return append([]string(nil), rt.serverEr...)
}

// connect opens a go-sdk session through rt. The standalone GET stream is
// off: these tests look at requests and their answers, and a GET stream
// broken by a deliberately killed process would end the session.
func connect(t *testing.T, url, pin string, rt *recordingTransport) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "switchboard-faults", Version: "0"}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), pollDeadline)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:             url,
		HTTPClient:           &http.Client{Transport: rt},
		MaxRetries:           -1,
		DisableStandaloneSSE: true,
	}, &mcp.ClientSessionOptions{ProtocolVersion: pin})
	if err != nil {
		t.Fatalf("connect to %s (version %q): %v", url, pin, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// outcome is what one tools/call came back with.
type outcome struct {
	ok      bool   // a result without isError
	message string // the MCP error or the isError text
	elapsed time.Duration
	at      time.Time // when the call returned
}

// call makes one tools/call bounded by timeout and classifies the answer.
func call(ctx context.Context, cs *mcp.ClientSession, tool string, args map[string]any, timeout time.Duration) outcome {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	o := outcome{elapsed: time.Since(start), at: time.Now()}
	switch {
	case err != nil:
		o.message = err.Error()
	case res.IsError:
		o.message = "isError: " + resultText(res)
	default:
		o.ok = true
	}
	return o
}

func resultText(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, " ")
}

// echoedBy returns the backend that answered an echo call.
func echoedBy(res *mcp.CallToolResult) string {
	raw, _ := json.Marshal(res.StructuredContent)
	var answer struct {
		Backend string `json:"backend"`
	}
	_ = json.Unmarshal(raw, &answer)
	return answer.Backend
}

// toolNames lists every tool of cs over every page, or returns the error.
func toolNames(ctx context.Context, cs *mcp.ClientSession) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	var names []string
	for tool, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		names = append(names, tool.Name)
	}
	return names, nil
}

// hasPrefix reports whether some name starts with prefix.
func hasPrefix(names []string, prefix string) bool {
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			return true
		}
	}
	return false
}
