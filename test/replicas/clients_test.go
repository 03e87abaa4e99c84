package replicas

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/test/harness"
)

// eras are the two MCP revisions every feature is run in.
var eras = []struct{ name, pin string }{{"modern", harness.Modern}, {"legacy", harness.Legacy}}

// exchange is one HTTP request of a client and who answered it.
type exchange struct {
	verb    string // HTTP method
	method  string // JSON-RPC method of a POST; "response" for a client's answer to a server request
	gateway string // the replica that answered (the load balancer's header); "" when none did
	status  int
	err     error
}

// recorder is a client's HTTP transport: it sends every request through
// the load balancer on its own keep-alive connections and records which
// gateway answered, so a test can check that consecutive requests of one
// session moved between replicas.
type recorder struct {
	base http.RoundTripper
	mu   sync.Mutex
	log  []exchange
}

func newRecorder() *recorder {
	return &recorder{base: &http.Transport{MaxIdleConnsPerHost: 4, IdleConnTimeout: 30 * time.Second}}
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	x := exchange{verb: req.Method}
	if req.Body != nil && req.Method == http.MethodPost {
		body, err := io.ReadAll(io.LimitReader(req.Body, 1<<20))
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		x.method = rpcMethod(body)
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	}
	resp, err := r.base.RoundTrip(req)
	x.err = err
	if resp != nil {
		x.status, x.gateway = resp.StatusCode, resp.Header.Get(servedByHeader)
	}
	r.mu.Lock()
	r.log = append(r.log, x)
	r.mu.Unlock()
	return resp, err
}

// rpcMethod is the JSON-RPC method of a request body.
func rpcMethod(body []byte) string {
	var msg struct {
		Method string          `json:"method"`
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &msg) != nil {
		return "?"
	}
	if msg.Method == "" && (msg.Result != nil || msg.Error != nil) {
		return "response"
	}
	return msg.Method
}

// exchanges returns what was recorded so far.
func (r *recorder) exchanges() []exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// mark is a position in the record, for since.
func (r *recorder) mark() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.log)
}

// since returns the exchanges after mark.
func (r *recorder) since(mark int) []exchange { return r.exchanges()[mark:] }

// servedBy lists the gateways that answered the exchanges with method, in
// order.
func servedBy(xs []exchange, method string) []string {
	var out []string
	for _, x := range xs {
		if x.method == method || (method == "GET" && x.verb == http.MethodGet) {
			out = append(out, x.gateway)
		}
	}
	return out
}

// distinct counts the different non-empty gateways in gs.
func distinct(gs []string) int {
	seen := map[string]bool{}
	for _, g := range gs {
		if g != "" {
			seen[g] = true
		}
	}
	return len(seen)
}

// requireBothGateways fails the test unless the exchanges were answered by
// every gateway: the session's requests really moved between replicas.
func requireBothGateways(t *testing.T, what string, xs []exchange) {
	t.Helper()
	var gs []string
	for _, x := range xs {
		gs = append(gs, x.gateway)
	}
	if distinct(gs) != replicas {
		t.Errorf("%s: the requests were answered by %v, want every one of %d gateways", what, gs, replicas)
	}
}

// last returns the gateway that answered the latest exchange.
func (r *recorder) last() string {
	xs := r.exchanges()
	if len(xs) == 0 {
		return ""
	}
	return xs[len(xs)-1].gateway
}

// clientOptions are what a session is opened with.
type clientOptions struct {
	mcp *mcp.ClientOptions
	// noStream leaves the Legacy GET stream closed: for sessions whose
	// features do not use it (results, log messages and elicitations of a
	// call come on the call's own stream), so that the stream, opened in
	// the background after initialize, does not take a turn of the
	// round-robin between requests whose gateways a test checks; and for
	// load that must not end when the gateway holding a stream is killed.
	noStream bool
}

// connect opens a go-sdk session through the load balancer at url, at
// the era's version, recording its requests in rec.
func connect(t *testing.T, url, pin string, rec *recorder, opts clientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "switchboard-replicas", Version: "0"}, opts.mcp)
	ctx, cancel := context.WithTimeout(t.Context(), pollDeadline)
	defer cancel()
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:             url,
		HTTPClient:           &http.Client{Transport: rec},
		MaxRetries:           -1,
		DisableStandaloneSSE: opts.noStream,
	}, &mcp.ClientSessionOptions{ProtocolVersion: pin})
	if err != nil {
		t.Fatalf("connect to %s (version %q): %v", url, pin, err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// pollDeadline bounds every wait; the machine is shared and slow.
const pollDeadline = 60 * time.Second

// answer is a demo backend's structured answer to a tool call.
func answer(res *mcp.CallToolResult) (map[string]any, error) {
	if res.IsError {
		return nil, fmt.Errorf("tool error: %v", text(res))
	}
	m, ok := res.StructuredContent.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("structuredContent is %T, want an object", res.StructuredContent)
	}
	return m, nil
}

func text(res *mcp.CallToolResult) string {
	var parts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			parts = append(parts, tc.Text)
		}
	}
	return strings.Join(parts, " ")
}

// echo calls backend's echo tool and checks that backend answered.
func echo(ctx context.Context, cs *mcp.ClientSession, backend string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: backend + "_echo", Arguments: map[string]any{"n": 1}})
	if err != nil {
		return err
	}
	a, err := answer(res)
	if err != nil {
		return err
	}
	if a["backend"] != backend {
		return fmt.Errorf("%s_echo answered by %v", backend, a["backend"])
	}
	return nil
}

// toolNames lists every tool of cs, following every page, sorted.
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
	slices.Sort(names)
	return names, nil
}

// backendAdmin is a demo backend's /admin API.
func (c *cluster) backendAdmin(t *testing.T, backend, path string, body any) {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	url := strings.TrimSuffix(c.backendURLs[backend], "/mcp") + path
	resp, err := http.Post(url, "application/json", bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s: %s %s", url, resp.Status, msg)
	}
}

// admin gives the harness's /admin helpers (AddTool, RemoveTool, Calls)
// the cluster's backends.
func (c *cluster) admin() *harness.Cluster { return &harness.Cluster{BackendURLs: c.backendURLs} }
