package hostile

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// stateGrowthBound is how much the gateway's resident memory may grow while
// clients send it hundreds of MiB of data it could be made to keep.
const stateGrowthBound = 64 << 20

// floodPrincipals are the API keys of the flood: enough principals to fill
// the replica's whole state bound, not only one principal's share.
const floodPrincipals = 10

func floodKey(i int) string { return fmt.Sprintf("flood-key-%02d", i) }

// TestClientStateIsBounded sends the gateway (its defaults for every bound)
// hundreds of MiB of client-chosen data it might hold on to: subscribe URIs
// of megabytes, thousands of URIs at the length limit over many sessions
// of many principals, unknown tool names of megabytes in Mcp-Name and in
// Legacy calls, thousands of sessions with a log level and deleted ones.
// Every answer is one the spec defines (a result, -32602 or -32603 in a
// JSON-RPC error, 429 or 503 for a DELETE), never a 5xx or a broken
// connection; the bounds are reached; the gateway's resident memory (from
// /proc, taken after each kind of data) grows by no more than
// stateGrowthBound; and it serves as before afterwards. The peak is
// logged too: it adds the garbage of the requests in flight (each body,
// its decoded strings, its gRPC copy), which the garbage collector lets
// grow in proportion to what is held.
func TestClientStateIsBounded(t *testing.T) {
	c, cl := startHarness(t, false, func(cfg *config.Config) {
		// Resident memory measures what the gateway keeps only when its
		// collector runs as Go paces it: under the heap floor it lets up
		// to 64 MiB of garbage gather first, which is not state.
		goPacing := 0
		cfg.Ops.HeapFloorMiB = &goPacing
		for i := range floodPrincipals {
			cfg.Gateway.Auth.APIKeys = append(cfg.Gateway.Auth.APIKeys,
				config.APIKey{Key: floodKey(i), Subject: fmt.Sprintf("flood-%02d", i), Groups: []string{"users"}})
		}
	})
	pid := c.Gateway.Pid()
	// Warm up what every request uses before the baseline is taken.
	for i := range 20 {
		session := cl.initialize(t, floodKey(i%floodPrincipals))
		cl.do(t, request{header: legacyHeaders(floodKey(i%floodPrincipals), session), body: legacyBody("tools/list", "")})
	}
	baseline := procStatus(t, pid, "VmRSS")
	t.Logf("gateway resident before the flood: %d MiB", baseline>>20)

	f := &flood{t: t, c: cl, pid: pid, codes: map[string]int{}}
	var sent atomic.Int64
	legacyPost := func(key, session, method, params string) (response, error) {
		body := legacyBody(method, params)
		sent.Add(int64(len(body)))
		return f.send(request{header: legacyHeaders(key, session), body: body})
	}

	// 1. Subscribe URIs of megabytes: every one refused as too long.
	huge := strings.Repeat("u", 3<<20)
	sessions := make([]string, floodPrincipals)
	for i := range sessions {
		sessions[i] = cl.initialize(t, floodKey(i))
	}
	f.run("URIs of 3 MiB", 60, 1, func(i int) (response, error) {
		uri, _ := json.Marshal(fmt.Sprintf("huge://%d/%s", i, huge))
		return legacyPost(floodKey(i%floodPrincipals), sessions[i%floodPrincipals], "resources/subscribe", `{"uri":`+string(uri)+`}`)
	}, "-32602")

	// 2. URIs at the length limit, 256 per session, 8 sessions per
	// principal: far more than the principals' and the replica's bounds.
	const sessionsEach, urisEach = 8, config.MaxSessionSubscriptions
	long := strings.Repeat("l", config.DefaultSessionMaxURIBytes)
	grid := make([]string, floodPrincipals*sessionsEach)
	for i := range grid {
		grid[i] = cl.initialize(t, floodKey(i/sessionsEach))
	}
	f.run("URIs at the length limit", len(grid)*urisEach, 4, func(i int) (response, error) {
		s := i / urisEach
		uri := fmt.Sprintf("long://%06d/%s", i, long)[:config.DefaultSessionMaxURIBytes]
		return legacyPost(floodKey(s/sessionsEach), grid[s], "resources/subscribe", `{"uri":"`+uri+`"}`)
	}, "ok", "-32603")
	if f.count("-32603") == 0 {
		t.Error("the flood of URIs never reached a principal's or the replica's bound")
	}

	// 3. Unknown tool names: of 512 KiB in Mcp-Name (Modern), of 3 MiB in
	// Legacy calls.
	name := strings.Repeat("n", 512<<10)
	f.run("unknown tool names in Mcp-Name", 100, 2, func(i int) (response, error) {
		tool := fmt.Sprintf("missing_%d_%s", i, name)
		sent.Add(int64(2 * len(tool)))
		return f.send(post("/mcp", modernHeaders(floodKey(i%floodPrincipals), "tools/call", "Mcp-Name", tool),
			modernBody("tools/call", `"name":"`+tool+`","arguments":{}`)))
	}, "-32602")
	f.run("unknown tool names in Legacy calls", 30, 1, func(i int) (response, error) {
		return legacyPost(floodKey(i%floodPrincipals), sessions[i%floodPrincipals], "tools/call", fmt.Sprintf(`{"name":"missing_%d_%s"}`, i, huge))
	}, "-32602")

	// 4. Many sessions, each with a log level, and many deleted.
	f.run("sessions with a log level", 3000, 4, func(i int) (response, error) {
		key := floodKey(i % floodPrincipals)
		session, err := f.initialize(key)
		if err != nil {
			return response{}, err
		}
		return legacyPost(key, session, "logging/setLevel", `{"level":"debug"}`)
	}, "ok", "-32603")
	f.run("deleted sessions", 2000, 4, func(i int) (response, error) {
		key := floodKey(i % floodPrincipals)
		session, err := f.initialize(key)
		if err != nil {
			return response{}, err
		}
		return f.send(request{method: http.MethodDelete, header: legacyHeaders(key, session)})
	}, "ok", "429", "503")

	peak := procStatus(t, pid, "VmHWM")
	t.Logf("sent %d MiB; gateway resident at most %d MiB after a kind of data (grew %d MiB, bound %d MiB), peak %d MiB; answers %v",
		sent.Load()>>20, f.resident>>20, (f.resident-baseline)>>20, stateGrowthBound>>20, peak>>20, f.codes)
	if sent.Load() < 300<<20 {
		t.Errorf("the flood sent only %d MiB", sent.Load()>>20)
	}
	if f.resident-baseline > stateGrowthBound {
		t.Errorf("the gateway grew by %d MiB under the flood, bound %d MiB", (f.resident-baseline)>>20, stateGrowthBound>>20)
	}
	if held := metric(t, c, "switchboard_gateway_session_state_bytes"); held > config.DefaultSessionStateBytes {
		t.Errorf("session state holds %.0f bytes, bound %d", held, config.DefaultSessionStateBytes)
	}

	// Still serving: a new session lists and calls.
	session := cl.initialize(t, aliceKey)
	r := cl.do(t, request{header: legacyHeaders(aliceKey, session), body: legacyBody("tools/call", `{"name":"weather_forecast","arguments":{"city":"Oslo"}}`)})
	if result, rerr, ok := r.rpc(); r.status != http.StatusOK || !ok || rerr != nil || result["content"] == nil {
		t.Errorf("a call after the flood: %d %.300s", r.status, r.body)
	}
}

// flood sends many requests from a few workers and checks every answer.
type flood struct {
	t   *testing.T
	c   *client
	pid int // the gateway's
	// resident is the most the gateway held after a run.
	resident int64
	mu       sync.Mutex
	// codes counts answers by kind: "ok", a JSON-RPC code, or an HTTP
	// status.
	codes map[string]int
}

// run sends n requests made by req from workers goroutines; every answer
// must be of one of the kinds allowed: "ok" (a result, or 202/204), a
// JSON-RPC error code ("-32602"), or an HTTP status with a body and
// Retry-After ("429").
func (f *flood) run(what string, n, workers int, req func(i int) (response, error), allowed ...string) {
	f.t.Helper()
	start := time.Now()
	var next atomic.Int64
	var failures []string
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				r, err := req(i)
				kind, bad := classify(r, err, allowed)
				f.mu.Lock()
				f.codes[kind]++
				if bad != "" && len(failures) < 5 {
					failures = append(failures, bad)
				}
				f.mu.Unlock()
			}
		}()
	}
	wg.Wait()
	resident := procStatus(f.t, f.pid, "VmRSS")
	f.resident = max(f.resident, resident)
	f.t.Logf("%s: %d requests in %v; gateway resident %d MiB, peak %d MiB", what, n, time.Since(start).Round(time.Millisecond),
		resident>>20, procStatus(f.t, f.pid, "VmHWM")>>20)
	for _, bad := range failures {
		f.t.Errorf("%s: %s", what, bad)
	}
}

func (f *flood) count(kind string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.codes[kind]
}

// classify names an answer and says what is wrong with it, if anything.
func classify(r response, err error, allowed []string) (kind, bad string) {
	result, rerr, isRPC := r.rpc()
	switch {
	case err != nil:
		return "transport error", err.Error()
	case r.status >= 500 && r.status != http.StatusServiceUnavailable:
		return strconv.Itoa(r.status), fmt.Sprintf("HTTP %d: %.200s", r.status, r.body)
	case r.status == http.StatusNoContent || r.status == http.StatusAccepted || (isRPC && rerr == nil && result != nil):
		kind = "ok"
	case isRPC && rerr != nil:
		kind = strconv.Itoa(rerr.Code)
	case (r.status == http.StatusTooManyRequests || r.status == http.StatusServiceUnavailable) && len(r.body) > 0 && r.header.Get("Retry-After") != "":
		kind = strconv.Itoa(r.status)
	default:
		return strconv.Itoa(r.status), fmt.Sprintf("not an answer the spec defines: %d %.200s", r.status, r.body)
	}
	if !slices.Contains(allowed, kind) {
		return kind, fmt.Sprintf("answer %s (HTTP %d, %.200s), want one of %v", kind, r.status, r.body, allowed)
	}
	return kind, ""
}

// send is client.do for worker goroutines: it returns transport errors
// instead of failing the test.
func (f *flood) send(r request) (response, error) {
	method := r.method
	if method == "" {
		method = http.MethodPost
	}
	path := r.path
	if path == "" {
		path = "/mcp"
	}
	req, err := http.NewRequest(method, f.c.stack.base+path, bytes.NewReader(r.body))
	if err != nil {
		return response{}, err
	}
	for _, h := range r.header {
		req.Header[http.CanonicalHeaderKey(h.name)] = append(req.Header[http.CanonicalHeaderKey(h.name)], h.value)
	}
	resp, err := f.c.http.Do(req)
	if err != nil {
		return response{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return response{status: resp.StatusCode, header: resp.Header, body: body}, err
}

// initialize opens a Legacy session for a worker.
func (f *flood) initialize(key string) (string, error) {
	r, err := f.send(request{header: legacyHeaders(key, "", "Mcp-Protocol-Version", drop),
		body: legacyBody("initialize", `{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"flood","version":"1"}}`)})
	if err != nil {
		return "", err
	}
	id := r.header.Get("Mcp-Session-Id")
	if r.status != http.StatusOK || id == "" {
		return "", fmt.Errorf("initialize: %d %.200s", r.status, r.body)
	}
	return id, nil
}

// procStatus reads a size field of /proc/<pid>/status (VmRSS, VmHWM), in
// bytes.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", field, line)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// metric reads one unlabelled gauge from the gateway's /metrics.
func metric(t *testing.T, c *harness.Cluster, name string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + c.Config.Gateway.Listen + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			v, err := strconv.ParseFloat(rest, 64)
			if err != nil {
				t.Fatalf("%s: %q", name, sc.Text())
			}
			return v
		}
	}
	t.Fatalf("no %s in /metrics", name)
	return 0
}

// TestUnreadBodyIsBounded: a request refused before its body is read (a
// 401) whose body never comes gets its answer, and then loses the
// connection once http.bodyTimeout has passed. net/http reads what a
// handler left of a body before the next request, and without a bound
// the connection and its goroutine were held for good, without any
// credential.
func TestUnreadBodyIsBounded(t *testing.T) {
	const bodyTimeout = time.Second
	c, _ := startHarness(t, false, func(cfg *config.Config) {
		cfg.Gateway.HTTP.BodyTimeout = config.Duration(bodyTimeout)
	})
	conn, err := net.Dial("tcp", c.Config.Gateway.Listen)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	head := "POST /mcp HTTP/1.1\r\nHost: " + c.Config.Gateway.Listen + "\r\nAuthorization: Bearer not-a-key\r\n" +
		"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	answer, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("the connection of a refused request whose body never came is still held: %v (read %q)", err, answer)
	}
	if !strings.HasPrefix(string(answer), "HTTP/1.1 401") {
		t.Fatalf("answer %q, want 401", answer)
	}
}

// TestSlowBodyIsCutOff: a client that sends its request body a byte at a
// time gets 408 once http.bodyTimeout has passed, and loses the
// connection, instead of holding a gateway goroutine for as long as it
// likes; the gateway serves others meanwhile and afterwards.
func TestSlowBodyIsCutOff(t *testing.T) {
	const bodyTimeout = time.Second
	c, cl := startHarness(t, false, func(cfg *config.Config) {
		cfg.Gateway.HTTP.BodyTimeout = config.Duration(bodyTimeout)
	})
	conn, err := net.Dial("tcp", c.Config.Gateway.Listen)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	body := modernBody("tools/list", `"pad":"`+strings.Repeat("x", 100000)+`"`)
	head := "POST /mcp HTTP/1.1\r\nHost: " + c.Config.Gateway.Listen + "\r\nAuthorization: Bearer " + aliceKey +
		"\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nMcp-Protocol-Version: 2026-07-28\r\nMcp-Method: tools/list\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	// A byte every 50ms: the whole body would take over an hour.
	stop := make(chan struct{})
	stopTrickle := sync.OnceFunc(func() { close(stop) })
	defer stopTrickle()
	trickled := make(chan int, 1)
	go func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		n := 0
		defer func() { trickled <- n }()
		for ; n < len(body); n++ {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			if _, err := conn.Write(body[n : n+1]); err != nil {
				return
			}
		}
	}()

	// Others are served while the slow body trickles.
	if r := cl.modern(t, "/mcp", bobKey, "tools/list", ""); r.status != http.StatusOK {
		t.Errorf("tools/list beside the slow body: %d %.200s", r.status, r.body)
	}

	_ = conn.SetReadDeadline(time.Now().Add(bodyTimeout + 15*time.Second))
	br := bufio.NewReader(conn)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("no answer to the slow body within %v: %v", bodyTimeout+15*time.Second, err)
	}
	answer, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	elapsed := time.Since(start)
	t.Logf("answered %v after the headers: %s %s", elapsed.Round(time.Millisecond), resp.Status, answer)
	if resp.StatusCode != http.StatusRequestTimeout {
		t.Errorf("status %s, want 408", resp.Status)
	}
	var rpc struct {
		Error *rpcError `json:"error"`
	}
	if json.Unmarshal(answer, &rpc) != nil || rpc.Error == nil || rpc.Error.Code != -32600 {
		t.Errorf("body %q, want a JSON-RPC -32600 error", answer)
	}
	if elapsed > bodyTimeout+5*time.Second {
		t.Errorf("answered after %v, body timeout %v", elapsed.Round(time.Millisecond), bodyTimeout)
	}
	// The connection is closed: the rest of the body is not read as
	// another request.
	if _, err := br.ReadByte(); err == nil {
		t.Error("the connection stays open after the timeout")
	}
	stopTrickle()
	t.Logf("the client had sent %d of %d body bytes", <-trickled, len(body))

	if r := cl.modern(t, "/mcp", aliceKey, "tools/list", ""); r.status != http.StatusOK {
		t.Errorf("tools/list after the slow body: %d %.200s", r.status, r.body)
	}
}
