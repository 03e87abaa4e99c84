package edge

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/gateway/internal/session"
	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// openStream POSTs body and returns the response with a line reader.
func openStream(t *testing.T, ctx context.Context, url string, header map[string]string, body string) (*http.Response, *bufio.Scanner) {
	t.Helper()
	return openRequest(t, ctx, http.MethodPost, url, header, body)
}

// openRequest sends a request of method and returns its response, read
// line by line; the body is closed when the test ends.
func openRequest(t *testing.T, ctx context.Context, method, url string, header map[string]string, body string) (*http.Response, *bufio.Scanner) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, bufio.NewScanner(resp.Body)
}

// nextData returns the next SSE data line, skipping event names and blank
// lines; keep-alive comments are returned as they are.
func nextData(t *testing.T, lines *bufio.Scanner) string {
	t.Helper()
	for lines.Scan() {
		l := lines.Text()
		if d, ok := strings.CutPrefix(l, "data: "); ok {
			return d
		}
		if strings.HasPrefix(l, ":") {
			return l
		}
	}
	t.Fatalf("stream ended: %v", lines.Err())
	return ""
}

// TestListenWire checks subscriptions/listen on the wire: the ack comes
// first with the request id (keeping its JSON type), only what is delivered
// is acknowledged, notifications are tagged, keep-alives flow, and closing
// the stream ends the catalog watch.
func TestListenWire(t *testing.T) {
	b := startBackends(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	streamCtx, closeStream := context.WithCancel(ctx)
	resp, lines := openStream(t, streamCtx, srv.URL+"/mcp", modernHeaders("subscriptions/listen"),
		`{"jsonrpc":"2.0","id":"listen-1","method":"subscriptions/listen","params":{`+modernMeta+`,"notifications":{"toolsListChanged":true,"promptsListChanged":true,"resourceSubscriptions":["file:///a.txt"]}}}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" || resp.Header.Get("X-Accel-Buffering") != "no" {
		t.Fatalf("listen response: %d %v", resp.StatusCode, resp.Header)
	}
	ack := nextData(t, lines)
	if ack != `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"listen-1"},"notifications":{"toolsListChanged":true,"promptsListChanged":true}}}` {
		t.Fatalf("ack = %s", ack)
	}
	// Resources were not requested, so a resources change is not sent; the
	// tools and prompts change is, once each.
	b.agg.Notify(aggregatorv1.CatalogKind_CATALOG_KIND_RESOURCES)
	b.agg.Notify(aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS, aggregatorv1.CatalogKind_CATALOG_KIND_PROMPTS)
	var got []string
	for len(got) < 2 {
		d := nextData(t, lines)
		if strings.HasPrefix(d, ":") {
			continue
		}
		got = append(got, d)
	}
	want := []string{
		`{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"listen-1"}}}`,
		`{"jsonrpc":"2.0","method":"notifications/prompts/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"listen-1"}}}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("notifications:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if d := nextData(t, lines); d != ": keep-alive" {
		t.Fatalf("want a keep-alive comment, got %s", d)
	}
	closeStream()
	testkit.Eventually(t, "the catalog watch to end with the stream", 10*time.Second, func() bool { return b.agg.Watchers() == 0 })

	// Nothing deliverable: ack an empty subset, then the graceful result.
	_, lines = openStream(t, ctx, srv.URL+"/mcp", modernHeaders("subscriptions/listen"),
		`{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{`+modernMeta+`,"notifications":{"resourceSubscriptions":["file:///a.txt"]}}}`)
	if ack := nextData(t, lines); !strings.Contains(ack, `"params":{"_meta":{"io.modelcontextprotocol/subscriptionId":7},"notifications":{}}`) {
		t.Fatalf("empty ack = %s", ack)
	}
	if end := nextData(t, lines); !strings.Contains(end, `"id":7,"result":{"_meta":{`) || !strings.Contains(end, `"io.modelcontextprotocol/serverInfo":{"name":"switchboard-test"`) || !strings.Contains(end, `"io.modelcontextprotocol/subscriptionId":7`) || !strings.Contains(end, `"resultType":"complete"`) {
		t.Fatalf("graceful end = %s", end)
	}
}

// slowCallDropped posts a call of beta_slow with header, waits for it to
// reach the aggregator, then drops the connection (no
// notifications/cancelled) and returns when that was, once the client
// has let go of the request.
func slowCallDropped(t *testing.T, b *backends, url, body string, header map[string]string) time.Time {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
		for k, v := range header {
			req.Header.Set(k, v)
		}
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	select {
	case <-b.slowStarted:
	case <-time.After(10 * time.Second):
		t.Fatal("the call never reached the aggregator")
	}
	cancel()
	dropped := time.Now()
	<-done
	return dropped
}

// slowCallEnd is how the beta_slow call under way ended.
func slowCallEnd(t *testing.T, b *backends) error {
	t.Helper()
	select {
	case err := <-b.slowEnded:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the aggregator call never ended")
		return nil
	}
}

// TestClientCloseCancelsBackendCall: when the client gives up on a
// tools/call, the aggregator call under it is cancelled.
func TestClientCloseCancelsBackendCall(t *testing.T) {
	b := startBackends(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	slowCallDropped(t, b, srv.URL+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+modernMeta+`,"name":"beta_slow"}}`,
		modernHeaders("tools/call", "Mcp-Name", "beta_slow"))
	if err := slowCallEnd(t, b); !errors.Is(err, context.Canceled) {
		t.Fatalf("the aggregator call ended with %v, want cancelled", err)
	}
}

// TestModernCancellationIsNotAnError: closing the response stream is how
// a Modern client cancels a request (the only cancellation over HTTP).
// The request is counted cancelled, as a Legacy notifications/cancelled
// is, and not as an error, which the availability objective (and its
// page) counts as the service's failure.
func TestModernCancellationIsNotAnError(t *testing.T) {
	b := startBackends(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	slowCallDropped(t, b, srv.URL+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+modernMeta+`,"name":"beta_slow"}}`,
		modernHeaders("tools/call", "Mcp-Name", "beta_slow"))
	slowCallEnd(t, b)
	var metrics string
	testkit.Eventually(t, "the cancelled call to be counted", 10*time.Second, func() bool {
		metrics = string(send(t, http.MethodGet, srv.URL+"/metrics", nil, "").body)
		return strings.Contains(metrics, `switchboard_gateway_mcp_requests_total{era="modern",method="tools/call"`)
	})
	if !strings.Contains(metrics, `switchboard_gateway_mcp_requests_total{era="modern",method="tools/call",outcome="cancelled"} 1`) ||
		strings.Contains(metrics, `outcome="error"`) {
		t.Fatalf("the cancelled call's outcome:\n%s", metrics)
	}
}

// TestLegacyDisconnectIsNotACancellation: in 2025-11-25 a client cancels
// with notifications/cancelled, and a dropped connection is not one (a
// proxy's idle timeout must not stop a tool halfway). The call runs on
// to its bound, the request timeout. A dropped Legacy connection once
// cancelled the call at once.
func TestLegacyDisconnectIsNotACancellation(t *testing.T) {
	b := startBackends(t)
	cfg := testGatewayConfig(b)
	cfg.Timeouts.Request = config.Duration(time.Second)
	_, srv := startGateway(t, b, cfg)
	sid := initializeOn(t, srv.URL+"/mcp", "alice-key")
	dropped := slowCallDropped(t, b, srv.URL+"/mcp", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"beta_slow"}}`,
		legacyHeaders("alice-key", sid))
	// Ended by the request timeout: its deadline, or the gateway's
	// cancellation when the deadline passed, whichever the aggregator
	// heard first; either way not before half of it (a machine slower
	// than expected only makes it later).
	slowCallEnd(t, b)
	if ran, bound := time.Since(dropped), time.Duration(cfg.Timeouts.Request); ran < bound/2 {
		t.Fatalf("the aggregator call ended %v after the connection dropped, want it to run until the request timeout (%v)", ran, bound)
	}
}

// TestStreamsWithoutAggregator: when the catalog cannot be watched, a listen
// gets a JSON-RPC error with its id and the Legacy GET a 503, never a stream
// that silently delivers nothing.
func TestStreamsWithoutAggregator(t *testing.T) {
	b := startBackends(t)
	_, up := startGateway(t, b, testGatewayConfig(b))
	id := initializeOn(t, up.URL+"/mcp", "alice-key")
	cfg := testGatewayConfig(b)
	cfg.Aggregator.Address = "127.0.0.1:1"
	_, down := startGateway(t, b, cfg)

	resp := send(t, http.MethodPost, down.URL+"/mcp", modernHeaders("subscriptions/listen"),
		`{"jsonrpc":"2.0","id":"l","method":"subscriptions/listen","params":{`+modernMeta+`,"notifications":{"toolsListChanged":true}}}`)
	gotID, _, rerr := resp.rpc(t)
	if resp.status != 200 || string(gotID) != `"l"` || rerr == nil || rerr.Code != wire.CodeInternalError {
		t.Fatalf("listen without aggregator: %d %s", resp.status, resp.body)
	}
	h := legacyHeaders("alice-key", id)
	h["Accept"] = "text/event-stream"
	if resp := send(t, http.MethodGet, down.URL+"/mcp", h, ""); resp.status != http.StatusServiceUnavailable {
		t.Fatalf("GET without aggregator: %d %s", resp.status, resp.body)
	}
}

// nextEvent returns the next SSE data line, skipping keep-alive comments.
func nextEvent(t *testing.T, lines *bufio.Scanner) string {
	t.Helper()
	for {
		if d := nextData(t, lines); !strings.HasPrefix(d, ":") {
			return d
		}
	}
}

// TestStreamsOutliveTheWatch: when the aggregator ends the catalog watch
// under a listen and a GET stream (as a restart does), both stay open, get
// list_changed once the watch is reopened at another catalog version
// (changes meanwhile were not seen) and none at the same version, and carry
// the changes after it. A listen whose acknowledged
// resource subscription cannot be restored ends with its final result.
func TestStreamsOutliveTheWatch(t *testing.T) {
	b := startBackends(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, listen := openStream(t, ctx, srv.URL+"/mcp", modernHeaders("subscriptions/listen"),
		`{"jsonrpc":"2.0","id":3,"method":"subscriptions/listen","params":{`+modernMeta+`,"notifications":{"toolsListChanged":true}}}`)
	if ack := nextEvent(t, listen); !strings.Contains(ack, "acknowledged") {
		t.Fatalf("ack = %s", ack)
	}
	h := legacyHeaders("alice-key", initializeOn(t, srv.URL+"/mcp", "alice-key"))
	h["Accept"] = "text/event-stream"
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/mcp", nil)
	for k, v := range h {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET: %v %v", resp, err)
	}
	defer resp.Body.Close()
	get := bufio.NewScanner(resp.Body)
	if d := nextData(t, get); d != "" {
		t.Fatalf("GET preamble %q, want the priming event's empty data", d)
	}
	testkit.Eventually(t, "both watches open", 10*time.Second, func() bool { return b.agg.Watchers() == 2 })

	b.agg.SetVersion(b.agg.Version() + 1)
	b.agg.EndWatches()
	tools := `"method":"notifications/tools/list_changed"`
	if d := nextEvent(t, listen); !strings.Contains(d, tools) || !strings.Contains(d, `"io.modelcontextprotocol/subscriptionId":3`) {
		t.Fatalf("listen after the watch was reopened: %s", d)
	}
	seen := map[string]bool{}
	for len(seen) < 3 {
		seen[nextEvent(t, get)] = true
	}
	for _, kind := range []string{"tools", "resources", "prompts"} {
		if !seen[`{"jsonrpc":"2.0","method":"notifications/`+kind+`/list_changed","params":{}}`] {
			t.Fatalf("GET after the watch was reopened: %v, want list_changed of %s", seen, kind)
		}
	}
	testkit.Eventually(t, "both watches reopened", 10*time.Second, func() bool { return b.agg.Watchers() == 2 })
	b.agg.Notify(aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS)
	if d := nextEvent(t, listen); !strings.Contains(d, tools) {
		t.Fatalf("listen after a change on the reopened watch: %s", d)
	}
	if d := nextEvent(t, get); !strings.Contains(d, tools) {
		t.Fatalf("GET after a change on the reopened watch: %s", d)
	}
	// Reopened at the version it had: nothing changed, nothing is said;
	// the next event is the next change.
	b.agg.EndWatches()
	testkit.Eventually(t, "both watches reopened again", 10*time.Second, func() bool { return b.agg.Watchers() == 2 })
	b.agg.Notify(aggregatorv1.CatalogKind_CATALOG_KIND_PROMPTS)
	if d := nextEvent(t, get); !strings.Contains(d, `"method":"notifications/prompts/list_changed"`) {
		t.Fatalf("GET after a watch reopened at the same version and a prompts change: %s, want the prompts change only", d)
	}

	b.agg.SetSubscribable("file:///a.txt")
	_, sub := openStream(t, ctx, srv.URL+"/mcp", modernHeaders("subscriptions/listen"),
		`{"jsonrpc":"2.0","id":4,"method":"subscriptions/listen","params":{`+modernMeta+`,"notifications":{"resourceSubscriptions":["file:///a.txt"]}}}`)
	if ack := nextEvent(t, sub); !strings.Contains(ack, `"resourceSubscriptions":["file:///a.txt"]`) {
		t.Fatalf("ack = %s", ack)
	}
	b.agg.SetSubscribable()
	b.agg.EndWatches()
	if end := nextEvent(t, sub); !strings.Contains(end, `"id":4,"result":{`) || !strings.Contains(end, `"io.modelcontextprotocol/subscriptionId":4`) {
		t.Fatalf("a listen whose subscription cannot be restored: %s, want its final result", end)
	}
}

// TestListenEndsWithItsServer: a listen on a virtual server that a reload
// removed ends with its final result, as a listen whose subscriptions
// cannot be restored does, whichever service hears of the removal first:
// the gateway (its servers no longer have the endpoint) or the aggregator
// (it ends the watch, and reopening it is NOT_FOUND). It once ended
// without one: an abrupt drop, after which a client may listen again.
func TestListenEndsWithItsServer(t *testing.T) {
	b := startBackends(t)
	var removed atomic.Bool
	b.agg.Check = func(_ context.Context, method string, _ any) error {
		if method == "WatchCatalog" && removed.Load() {
			return status.Error(codes.NotFound, "no such server")
		}
		return nil
	}
	cfg := testGatewayConfig(b)
	gw, srv := startGatewayWith(t, b, cfg, func(d *Deps) { d.Servers = []config.Server{{Name: "team", Backends: []string{"alpha"}}} })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	listen := func(id string) *bufio.Scanner {
		_, lines := openStream(t, ctx, srv.URL+"/mcp/team", modernHeaders("subscriptions/listen"),
			`{"jsonrpc":"2.0","id":`+id+`,"method":"subscriptions/listen","params":{`+modernMeta+`,"notifications":{"toolsListChanged":true}}}`)
		if ack := nextEvent(t, lines); !strings.Contains(ack, "acknowledged") {
			t.Fatalf("ack = %s", ack)
		}
		return lines
	}
	wantResult := func(lines *bufio.Scanner, id, how string) {
		t.Helper()
		last := ""
		for lines.Scan() {
			if d, ok := strings.CutPrefix(lines.Text(), "data: "); ok {
				last = d
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("%s: the listen is still open", how)
		}
		if !strings.Contains(last, `"id":`+id+`,"result":{`) || !strings.Contains(last, `"io.modelcontextprotocol/subscriptionId":`+id) {
			t.Fatalf("%s: the listen ended with %s, want its final result", how, last)
		}
	}

	byAggregator := listen("1")
	testkit.Eventually(t, "the watch open", 10*time.Second, func() bool { return b.agg.Watchers() == 1 })
	removed.Store(true)
	b.agg.EndWatches()
	wantResult(byAggregator, "1", "the aggregator first")

	removed.Store(false)
	byGateway := listen("2")
	if err := gw.Reload(&config.Config{Gateway: cfg}); err != nil {
		t.Fatal(err)
	}
	wantResult(byGateway, "2", "the gateway first")
}

// TestListenURIsBounded: a listen's resourceSubscriptions URIs are held
// for the stream's life, so each is bounded like a Legacy session's.
func TestListenURIsBounded(t *testing.T) {
	b := startBackends(t)
	cfg := testGatewayConfig(b)
	cfg.Sessions.MaxURIBytes = 64
	_, srv := startGateway(t, b, cfg)
	long := "file:///" + strings.Repeat("a", 64)
	resp := send(t, http.MethodPost, srv.URL+"/mcp", modernHeaders("subscriptions/listen"),
		`{"jsonrpc":"2.0","id":8,"method":"subscriptions/listen","params":{`+modernMeta+`,"notifications":{"resourceSubscriptions":["`+long+`"]}}}`)
	if resp.status != http.StatusBadRequest || !strings.Contains(string(resp.body), `"code":-32602`) || !strings.Contains(string(resp.body), "longer than 64 bytes") {
		t.Fatalf("listen with a long URI: %d %s", resp.status, resp.body)
	}
	if n := b.agg.Watchers(); n != 0 {
		t.Fatalf("%d aggregator watches opened for a refused listen", n)
	}
}

// TestListenSubscriptionsBounded: a listen subscribes to at most
// sessions.maxSubscriptions URIs, as a Legacy session does.
func TestListenSubscriptionsBounded(t *testing.T) {
	b := startBackends(t)
	cfg := testGatewayConfig(b)
	cfg.Sessions.MaxSubscriptions = 2
	_, srv := startGateway(t, b, cfg)
	resp := send(t, http.MethodPost, srv.URL+"/mcp", modernHeaders("subscriptions/listen"),
		`{"jsonrpc":"2.0","id":9,"method":"subscriptions/listen","params":{`+modernMeta+`,"notifications":{"resourceSubscriptions":["a://1","a://2","a://3"]}}}`)
	if resp.status != http.StatusBadRequest || !strings.Contains(string(resp.body), "more than 2 resourceSubscriptions") {
		t.Fatalf("listen with 3 URIs, bound 2: %d %s", resp.status, resp.body)
	}
	// A URI named twice is one subscription: two URIs, one of them named
	// three times, are within the bound.
	b.agg.SetSubscribable("file:///a.txt", "file:///b.txt")
	listen, sub := openStream(t, t.Context(), srv.URL+"/mcp", modernHeaders("subscriptions/listen"),
		`{"jsonrpc":"2.0","id":10,"method":"subscriptions/listen","params":{`+modernMeta+`,"notifications":{"resourceSubscriptions":["file:///a.txt","file:///a.txt","file:///b.txt","file:///a.txt"]}}}`)
	if ack := nextEvent(t, sub); listen.StatusCode != http.StatusOK || !strings.Contains(ack, `"resourceSubscriptions":["file:///a.txt","file:///b.txt"]`) {
		t.Fatalf("listen with two URIs, one named three times, bound 2: %d %s", listen.StatusCode, ack)
	}
}

// TestListenKeepsOnlyWhatItReads: what a listen stream keeps of its
// request is bounded without refusing what the bounds allow. Its _meta
// is at most 16 KiB (a padded one is -32602); its notifications may be as
// long as maxSubscriptions URIs of maxURIBytes make them (here 200 URIs,
// 17 KB), since the stream keeps the filter it parsed, not the member.
func TestListenKeepsOnlyWhatItReads(t *testing.T) {
	b := startBackends(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	padded := strings.TrimSuffix(modernMeta, "}") + `,"pad":"` + strings.Repeat("x", wire.MaxStreamMetaBytes) + `"}`
	resp := send(t, http.MethodPost, srv.URL+"/mcp", modernHeaders("subscriptions/listen"),
		`{"jsonrpc":"2.0","id":10,"method":"subscriptions/listen","params":{`+padded+`,"notifications":{"toolsListChanged":true}}}`)
	if resp.status != http.StatusBadRequest || !strings.Contains(string(resp.body), "_meta of a streaming request is longer") {
		t.Fatalf("listen with a padded _meta: %d %s", resp.status, resp.body)
	}
	uris := make([]string, 200)
	for i := range uris {
		uris[i] = fmt.Sprintf(`"file:///%080d"`, i)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream, lines := openStream(t, ctx, srv.URL+"/mcp", modernHeaders("subscriptions/listen"),
		`{"jsonrpc":"2.0","id":11,"method":"subscriptions/listen","params":{`+modernMeta+`,"notifications":{"resourceSubscriptions":[`+strings.Join(uris, ",")+`]}}}`)
	if stream.StatusCode != http.StatusOK {
		t.Fatalf("listen with 200 URIs: %d", stream.StatusCode)
	}
	if !lines.Scan() {
		t.Fatal("the listen with 200 URIs sent nothing")
	}
}

// TestLegacyStreamReconnects: a GET stream starts with a priming event
// whose id is new on every stream (go-sdk counts a reconnect that saw a
// new id as progress). A reconnect (Last-Event-ID) is told that every
// list may have changed while it had no stream; one past the principal's
// stream bound gets an empty stream asking it to come back in 30 s,
// rather than a refusal, which would end the client's session.
func TestLegacyStreamReconnects(t *testing.T) {
	b := startBackends(t)
	cfg := testGatewayConfig(b)
	cfg.Streams.MaxPerPrincipal = 1
	_, srv := startGateway(t, b, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	session := initializeOn(t, srv.URL+"/mcp", "alice-key")
	get := func(lastEventID string) (*http.Response, *bufio.Scanner) {
		h := legacyHeaders("alice-key", session)
		h["Accept"] = "text/event-stream"
		if lastEventID != "" {
			h["Last-Event-ID"] = lastEventID
		}
		return openRequest(t, ctx, http.MethodGet, srv.URL+"/mcp", h, "")
	}
	primeID := func(lines *bufio.Scanner) (id, retry string) {
		t.Helper()
		for lines.Scan() {
			l := lines.Text()
			switch {
			case strings.HasPrefix(l, "id: "):
				id = strings.TrimPrefix(l, "id: ")
			case strings.HasPrefix(l, "retry: "):
				retry = strings.TrimPrefix(l, "retry: ")
			case l == "":
				return id, retry
			}
		}
		t.Fatalf("no priming event: %v", lines.Err())
		return "", ""
	}
	first, lines := get("")
	id, _ := primeID(lines)
	if first.StatusCode != http.StatusOK || id == "" {
		t.Fatalf("first GET: %d, id %q", first.StatusCode, id)
	}
	// Past the bound (this stream is the principal's one): a first GET is
	// refused, as go-sdk takes for "no stream"; a reconnect is not.
	if refused, _ := get(""); refused.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("a second first GET past the bound: %d, want 429", refused.StatusCode)
	}
	later, laterLines := get(id)
	next, retry := primeID(laterLines)
	if later.StatusCode != http.StatusOK || next == "" || next == id || retry != "30000" || laterLines.Scan() {
		t.Fatalf("a reconnect past the bound: %d, id %q (was %q), retry %q; want an empty stream asking for 30 s", later.StatusCode, next, id, retry)
	}
	first.Body.Close()
	testkit.Eventually(t, "the first stream's watch closed", 10*time.Second, func() bool { return b.agg.Watchers() == 0 })
	// A reconnect within the bound: a new id, then every list's change.
	_, again := get(id)
	if next, _ := primeID(again); next == "" || next == id {
		t.Fatalf("the reconnect's id %q (was %q)", next, id)
	}
	seen := map[string]bool{}
	for len(seen) < 3 {
		seen[nextEvent(t, again)] = true
	}
	for _, kind := range []string{"tools", "resources", "prompts"} {
		if !seen[`{"jsonrpc":"2.0","method":"notifications/`+kind+`/list_changed","params":{}}`] {
			t.Fatalf("the reconnected stream says %v, want list_changed of %s", seen, kind)
		}
	}
}

// TestOneGetStreamPerSession: a session's messages go on its newest GET
// stream only (2025-11-25 sends each message on one stream: both once
// carried every notification); the older stream stays open, quiet, so
// that a client holding two is not cut from them in turns.
func TestOneGetStreamPerSession(t *testing.T) {
	b := startBackends(t)
	_, gw := startGateway(t, b, testGatewayConfig(b))
	url := gw.URL + "/mcp"
	id := initializeOn(t, url, "alice-key")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, first := openRequest(t, ctx, "GET", url, legacyHeaders("alice-key", id), "")
	testkit.Eventually(t, "the first stream's watch", 10*time.Second, func() bool { return b.agg.Watchers() == 1 })
	_, second := openRequest(t, ctx, "GET", url, legacyHeaders("alice-key", id), "")
	// The first stream's watch closes as the second's opens.
	testkit.Eventually(t, "one watch left", 10*time.Second, func() bool { return b.agg.Watchers() == 1 })
	b.agg.Notify(aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS)
	for second.Scan() {
		if strings.Contains(second.Text(), "notifications/tools/list_changed") {
			break
		}
	}
	for keepAlives := 0; keepAlives < 3; {
		if !first.Scan() {
			t.Fatalf("the older stream ended: %v", first.Err())
		}
		switch l := first.Text(); {
		case strings.Contains(l, "list_changed"):
			t.Fatal("the older stream of the session carried the notification too")
		case strings.HasPrefix(l, ":"):
			keepAlives++
		}
	}
	// Both end with the session, the silenced one too (it once kept its
	// connection, and a stream of the principal's, until the session
	// would have expired).
	if resp := send(t, http.MethodDelete, url, legacyHeaders("alice-key", id), ""); resp.status != http.StatusNoContent {
		t.Fatalf("DELETE: %d", resp.status)
	}
	for name, lines := range map[string]*bufio.Scanner{"newer": second, "silenced": first} {
		for lines.Scan() {
		}
		if ctx.Err() != nil {
			t.Fatalf("the %s stream of the deleted session is still open", name)
		}
	}
}

// TestLegacySubscriptionMadeOnceItCanBe: a Legacy session's subscription
// its watch could not make (the URI not yet listed, denied, its backend
// down: the client was answered {}) is tried again when the resources
// change, admitted as new (limited and audited again: a limit that
// refused it is not passed later); it was once never tried again, and
// its updates never came.
func TestLegacySubscriptionMadeOnceItCanBe(t *testing.T) {
	b := newBackends()
	var mu sync.Mutex
	var watches []*aggregatorv1.WatchCatalogRequest
	b.agg.Check = func(_ context.Context, method string, req any) error {
		if w, ok := req.(*aggregatorv1.WatchCatalogRequest); ok && method == "WatchCatalog" {
			mu.Lock()
			watches = append(watches, w)
			mu.Unlock()
		}
		return nil
	}
	b.serve(t)
	_, gw := startGateway(t, b, testGatewayConfig(b))
	url := gw.URL + "/mcp"
	id := initializeOn(t, url, "alice-key")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	openRequest(t, ctx, "GET", url, legacyHeaders("alice-key", id), "")
	opened := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(watches)
	}
	testkit.Eventually(t, "the stream's watch", 10*time.Second, func() bool { return b.agg.Watchers() == 1 })
	n := opened()
	if resp := send(t, http.MethodPost, url, legacyHeaders("alice-key", id), `{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{"uri":"file:///later"}}`); resp.status != http.StatusOK {
		t.Fatalf("subscribe: %d %s", resp.status, resp.body)
	}
	testkit.Eventually(t, "the watch reopened with the subscription", 10*time.Second, func() bool { return opened() == n+1 })
	b.agg.SetSubscribable("file:///later")
	b.agg.Notify(aggregatorv1.CatalogKind_CATALOG_KIND_RESOURCES)
	testkit.Eventually(t, "the subscription tried again", 10*time.Second, func() bool { return opened() == n+2 })
	mu.Lock()
	last := watches[len(watches)-1]
	mu.Unlock()
	// Not a renewal: the subscription was never made, so it is admitted
	// as new (limited and audited), not past a limit that refused it.
	if !slices.Equal(last.GetResourceUris(), []string{"file:///later"}) || len(last.GetRenewedResourceUris()) != 0 {
		t.Fatalf("the watch opened again: uris %v, renewed %v; want file:///later, not renewed", last.GetResourceUris(), last.GetRenewedResourceUris())
	}
}

// TestDroppedLegacyRequestsAreBounded: a session has at most
// session.MaxDetachedCalls requests running on after their connection
// dropped; past them a dropped request ends as a cancelled one does, so
// that a client dropping requests as fast as it sends them cannot leave
// ever more running (each once ran on to the request timeout). So has a
// principal, across its sessions (which cost nothing to open),
// at most session.MaxDetachedPerPrincipal.
func TestDroppedLegacyRequestsAreBounded(t *testing.T) {
	for name, tc := range map[string]struct {
		bound      int
		perSession int // requests per session
	}{
		"per session":   {session.MaxDetachedCalls, session.MaxDetachedCalls + 1},
		"per principal": {session.MaxDetachedPerPrincipal, 1},
	} {
		t.Run(name, func(t *testing.T) {
			b := startBackends(t)
			cfg := testGatewayConfig(b)
			cfg.Timeouts.Request = config.Duration(3 * time.Second)
			_, srv := startGateway(t, b, cfg)
			var sid string
			var dropped time.Time
			for i := range tc.bound + 1 {
				if i%tc.perSession == 0 {
					sid = initializeOn(t, srv.URL+"/mcp", "alice-key")
				}
				dropped = slowCallDropped(t, b, srv.URL+"/mcp", fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"beta_slow"}}`, i+1),
					legacyHeaders("alice-key", sid))
			}
			// The last one dropped is past the bound: cancelled at once
			// (well before the request timeout), while the others run on.
			err := slowCallEnd(t, b)
			if ran, bound := time.Since(dropped), time.Duration(cfg.Timeouts.Request); !errors.Is(err, context.Canceled) || ran >= bound/2 {
				t.Fatalf("a request ended %v after the last drop with %v, want the one past the bound cancelled at once", ran, err)
			}
			select {
			case err := <-b.slowEnded:
				t.Fatalf("a request within the bound ended (%v)", err)
			default:
			}
			// The others end at the request timeout.
			for range tc.bound {
				slowCallEnd(t, b)
			}
		})
	}
}
