package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/callerid"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// A principal past svcauth's bounds is refused before any handler runs,
// over real gRPC, on a unary call and on a stream: no view, cache entry or
// audit event is made for it.
func TestOversizedPrincipalIsRefused(t *testing.T) {
	h, _, _ := twoEras(t)
	ctx := context.Background()
	huge := principal(strings.Repeat("s", 4<<20))
	_, err := h.gateway.Discover(ctx, &aggregatorv1.DiscoverRequest{Principal: huge})
	wantStatus(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	_, err = h.gateway.ListTools(ctx, &aggregatorv1.ListToolsRequest{Principal: principal("alice", strings.Split(strings.Repeat("g,", 2000), ",")...)})
	wantStatus(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	stream, err := h.gateway.WatchCatalog(ctx, &aggregatorv1.WatchCatalogRequest{Principal: huge})
	if err == nil {
		_, err = stream.Recv()
	}
	wantStatus(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	if _, err := h.gateway.Discover(ctx, &aggregatorv1.DiscoverRequest{Principal: principal("alice", "eng")}); err != nil {
		t.Fatalf("an ordinary principal: %v", err)
	}
}

// resourceSubscribeEvents reads the resource_subscribe events of an audit
// file.
func resourceSubscribeEvents(t *testing.T, file string) []audit.Event {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []audit.Event
	lines := bufio.NewScanner(strings.NewReader(string(raw)))
	lines.Buffer(nil, 1<<20)
	for lines.Scan() {
		var e audit.Event
		if err := json.Unmarshal(lines.Bytes(), &e); err != nil {
			t.Fatalf("line %q: %v", lines.Text(), err)
		}
		if e.Kind == audit.KindResourceSubscribe {
			out = append(out, e)
		}
	}
	return out
}

// A watch names at most 256 resource URIs (the bound on what it may
// subscribe): more is INVALID_ARGUMENT, with nothing admitted. Within the
// bound each URI is admitted once however often it is repeated, so a
// missing or denied URI repeated costs one route lookup, one rate-limit
// token and one audit event, as a subscribed one does.
func TestWatchCatalogResourceURIsAreBoundedAndDeduplicated(t *testing.T) {
	_, h, file := startAdmission(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	watch := func(uris []string) (*aggregatorv1.WatchCatalogResponse, error) {
		stream, err := h.gateway.WatchCatalog(ctx, &aggregatorv1.WatchCatalogRequest{Principal: principal("alice"), ResourceUris: uris})
		if err != nil {
			return nil, err
		}
		return stream.Recv()
	}
	repeat := func(uri string, n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = uri
		}
		return out
	}
	_, err := watch(repeat("docs://nope", 5000))
	wantStatus(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	_, err = watch(append(repeat("docs://a", 1), repeat("docs://nope", 256)...))
	wantStatus(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	// No URI longer than any the gateway sends (a watch keeps its URIs
	// for as long as it is open).
	_, err = watch([]string{"docs://" + strings.Repeat("a", config.MaxSessionURIBytes)})
	wantStatus(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	// Nor a renewal's (the request is kept while the watch is open).
	long := &aggregatorv1.WatchCatalogRequest{Principal: principal("alice"), RenewedResourceUris: []string{"docs://" + strings.Repeat("a", config.MaxSessionURIBytes)}}
	stream, err := h.gateway.WatchCatalog(ctx, long)
	if err == nil {
		_, err = stream.Recv()
	}
	wantStatus(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	// The indexer's credential watches views; it may not read resources,
	// so it may not subscribe to them, or renew subscriptions, either.
	for _, req := range []*aggregatorv1.WatchCatalogRequest{
		{Principal: principal("alice"), ResourceUris: []string{"docs://a"}},
		{Principal: principal("alice"), RenewedResourceUris: []string{"docs://a"}},
	} {
		stream, err := h.indexer.WatchCatalog(ctx, req)
		if err == nil {
			_, err = stream.Recv()
		}
		wantStatus(t, err, codes.PermissionDenied, commonv1.ErrorReason_ERROR_REASON_METHOD_NOT_ALLOWED)
	}

	uris := append(repeat("docs://nope", 250), "docs://a", "docs://a", "", "docs://nope")
	first, err := watch(uris)
	if err != nil {
		t.Fatal(err)
	}
	if got := first.GetSubscribedResourceUris(); len(got) != 1 || got[0] != "docs://a" {
		t.Fatalf("subscribed %v, want only docs://a", got)
	}
	h.audit.Close() // flushes
	events := resourceSubscribeEvents(t, file)
	byURI := map[string]int{}
	for _, e := range events {
		byURI[e.Resource]++
	}
	if len(events) != 2 || byURI["docs://nope"] != 1 || byURI["docs://a"] != 1 {
		t.Fatalf("%d resource_subscribe events, by URI %v; want one for docs://nope and one for docs://a", len(events), byURI)
	}
}

// An open watch keeps the resource URIs it subscribed, and none of those
// it named but did not: an internal client may hold 16,384 watches open
// on a replica, and each may name 256 URIs of 16 KiB that no backend has,
// 4 MiB a watch for as long as the caller leaves it open.
func TestWatchCatalogKeepsOnlyTheURIsItSubscribed(t *testing.T) {
	_, h, _ := startAdmission(t, "")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	heap := func() uint64 {
		runtime.GC()
		runtime.GC() // and what the first left in pools
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	const watches = 8
	before := heap()
	for i := range watches {
		uris := make([]string, 256)
		for j := range uris {
			uris[j] = fmt.Sprintf("docs://nope/%d/%d/", i, j) + strings.Repeat("a", config.MaxSessionURIBytes-64)
		}
		uris[0] = "docs://a"
		stream, err := h.internal.WatchCatalog(ctx, &aggregatorv1.WatchCatalogRequest{ResourceUris: uris})
		if err != nil {
			t.Fatal(err)
		}
		first, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if got := first.GetSubscribedResourceUris(); len(got) != 1 || got[0] != "docs://a" {
			t.Fatalf("watch %d subscribed %v, want only docs://a", i, got)
		}
	}
	// 8 watches naming 32 MiB of URIs they did not subscribe: kept, the
	// heap grows by that much; dropped, by what the open streams and the
	// earlier tests' goroutines still winding down hold, which reached
	// 8 MiB once on a busy machine.
	if grown := int64(heap()) - int64(before); grown > 16<<20 {
		t.Fatalf("%d open watches hold %d MiB more heap, want the URIs they did not subscribe dropped", watches, grown>>20)
	}
}

// A caller that is not an operator holds at most
// aggregator.maxWatchesPerCaller catalog watches open on one replica;
// past it a watch is RESOURCE_EXHAUSTED, closing one makes room, and
// other callers (an operator's credential is not held to the bound) are
// not held to its count.
func TestWatchCatalogStreamsPerCaller(t *testing.T) {
	b := newTestBackend(t, "b", backendOptions{tools: []string{"x"}})
	h := startAggregator(t, parseConfig(t, `
aggregator:
  maxWatchesPerCaller: 3
  backends:
    - {name: b, url: `+b.url()+`}
`))
	open := func(c aggregatorv1.AggregatorServiceClient, req *aggregatorv1.WatchCatalogRequest) (context.CancelFunc, error) {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		stream, err := c.WatchCatalog(ctx, req)
		if err == nil {
			_, err = stream.Recv()
		}
		return cancel, err
	}
	var first context.CancelFunc
	for i := range 3 {
		// Watches of every kind count: a principal's, and all changes.
		req := &aggregatorv1.WatchCatalogRequest{Principal: principal("alice")}
		if i == 2 {
			req = &aggregatorv1.WatchCatalogRequest{AllChanges: true}
		}
		cancel, err := open(h.gateway, req)
		if err != nil {
			t.Fatalf("watch %d: %v", i+1, err)
		}
		if first == nil {
			first = cancel
		}
	}
	_, err := open(h.gateway, &aggregatorv1.WatchCatalogRequest{Principal: principal("bob")})
	wantStatus(t, err, codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED)
	if _, err := open(h.internal, &aggregatorv1.WatchCatalogRequest{}); err != nil {
		t.Fatalf("another caller: %v", err)
	}
	for i := range 4 {
		if _, err := open(h.operator, &aggregatorv1.WatchCatalogRequest{AllChanges: true}); err != nil {
			t.Fatalf("operator watch %d: %v", i+1, err)
		}
	}
	first()
	testkit.Eventually(t, "a closed watch makes room", 10*time.Second, func() bool {
		_, err := open(h.gateway, &aggregatorv1.WatchCatalogRequest{Principal: principal("bob")})
		return err == nil
	})
}

// A prompt get names at most 256 arguments: more is INVALID_ARGUMENT
// before the prompt is looked up, and reaches no backend; at the bound it
// renders.
func TestPromptArgumentsAreBounded(t *testing.T) {
	_, h, _ := startAdmission(t, "")
	ctx := context.Background()
	args := make(map[string]string, 257)
	for i := range 256 {
		args[fmt.Sprintf("a%d", i)] = "x"
	}
	if _, err := h.gateway.GetPrompt(ctx, &aggregatorv1.GetPromptRequest{Principal: principal("alice"), Name: "docs_greet", Arguments: args}); err != nil {
		t.Fatalf("256 arguments: %v", err)
	}
	args["one-more"] = "x"
	_, err := h.gateway.GetPrompt(ctx, &aggregatorv1.GetPromptRequest{Principal: principal("alice"), Name: "docs_greet", Arguments: args})
	wantStatus(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
}

// A call whose context names a progress token that is not a JSON string
// or number of at most config.MaxRequestIDBytes (MCP's ProgressToken), a
// log level MCP does not have, capabilities over config.MaxTaskCallBytes
// or a subject token over callerid.MaxToken is INVALID_ARGUMENT whether
// it streams or not: a unary call relays no notification, but its
// request is as malformed.
func TestMalformedCallContextIsRefusedOnEveryRoute(t *testing.T) {
	h, _, _ := twoEras(t)
	ctx := context.Background()
	for name, rc := range map[string]*aggregatorv1.RequestContext{
		"progress token":            {ProgressTokenJson: `{"not":`},
		"progress token object":     {ProgressTokenJson: `{"a":1}`},
		"progress token over 256 B": {ProgressTokenJson: `"` + strings.Repeat("t", config.MaxRequestIDBytes-1) + `"`},
		"log level":                 {LogLevel: "loud"},
		"capabilities over 256 KiB": {ClientCapabilitiesJson: `{"x":"` + strings.Repeat("c", config.MaxTaskCallBytes) + `"}`},
		"subject token over 16 KiB": {SubjectToken: strings.Repeat("s", callerid.MaxToken+1)},
	} {
		req := &aggregatorv1.CallToolRequest{Principal: principal("alice"), Name: "modern_echo", ArgumentsJson: `{}`, Context: rc}
		_, err := h.gateway.CallTool(ctx, req)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("unary, bad %s: %v", name, err)
		}
		_, _, err = streamCallErr(ctx, h.gateway, req)
		if status.Code(err) != codes.InvalidArgument {
			t.Errorf("streamed, bad %s: %v", name, err)
		}
	}
}
