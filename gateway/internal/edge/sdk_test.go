package edge

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// bearer adds an Authorization header to every request.
type bearer struct {
	key  string
	base http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.base.RoundTrip(r)
}

func httpClientWithKey(key string) *http.Client {
	return &http.Client{Transport: bearer{key: key, base: http.DefaultTransport}}
}

// connect opens a go-sdk v1.8.0 client session: version "" is the default
// Modern-first Connect, "2025-11-25" pins Legacy.
func connect(t *testing.T, ctx context.Context, url, key, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "gateway-test", Version: "1.0.0"}, opts)
	transport := &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: httpClientWithKey(key), MaxRetries: -1}
	var sessOpts *mcp.ClientSessionOptions
	if version != "" {
		sessOpts = &mcp.ClientSessionOptions{ProtocolVersion: version}
	}
	cs, err := client.Connect(ctx, transport, sessOpts)
	if err != nil {
		t.Fatalf("connect (%q): %v", version, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

func toolText(t *testing.T, res *mcp.CallToolResult) string {
	t.Helper()
	if len(res.Content) != 1 {
		t.Fatalf("want one content block, got %d", len(res.Content))
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	if !ok {
		t.Fatalf("want text content, got %T", res.Content[0])
	}
	return text.Text
}

var eras = []struct {
	name       string
	version    string // pinned client version; "" = Modern
	negotiated string
	notFound   int64 // code for a missing resource
}{
	{"modern", "", mcpspec.Modern, wire.CodeInvalidParams},
	{"legacy", mcpspec.Legacy, mcpspec.Legacy, wire.CodeResourceNotFound},
}

// TestSDKClientsBothEras drives the gateway with real go-sdk clients of
// both eras: listing every kind across pages, calling, reading, rendering
// prompts and completing, against an aggregator served over gRPC.
func TestSDKClientsBothEras(t *testing.T) {
	b := startBackends(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			cs := connect(t, ctx, srv.URL+"/mcp", "alice-key", era.version, nil)
			if got := cs.InitializeResult().ProtocolVersion; got != era.negotiated {
				t.Fatalf("negotiated %q, want %q", got, era.negotiated)
			}
			if info := cs.InitializeResult().ServerInfo; info == nil || info.Name != "switchboard-test" {
				t.Fatalf("serverInfo = %+v", info)
			}

			// Tools arrive in the aggregator's order across three pages of
			// two; alice does not see admin_reset.
			var names []string
			for tool, err := range cs.Tools(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				names = append(names, tool.Name)
			}
			want := []string{"alpha_ask", "alpha_echo", "alpha_region", "beta_add", "beta_slow"}
			if !slices.Equal(names, want) {
				t.Fatalf("tools = %v, want %v", names, want)
			}
			page, err := cs.ListTools(ctx, &mcp.ListToolsParams{})
			if err != nil || len(page.Tools) != 2 || page.NextCursor != "tools:2" {
				t.Fatalf("first page = %+v, %v", page, err)
			}

			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "beta_add", Arguments: map[string]any{"a": 2, "b": 3}})
			if err != nil || res.IsError || toolText(t, res) != "5" {
				t.Fatalf("beta_add = %+v, %v", res, err)
			}
			// x-mcp-header arguments: the Modern client mirrors them into
			// Mcp-Param-* headers, which the gateway checks.
			res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha_region", Arguments: map[string]any{"region": "Zürich", "count": 3}})
			if err != nil || !strings.Contains(toolText(t, res), `"region":"Zürich"`) {
				t.Fatalf("alpha_region = %+v, %v", res, err)
			}
			if !strings.HasPrefix(toolText(t, res), "alice:") {
				t.Fatalf("call did not run as alice: %q", toolText(t, res))
			}
			// Denied looks exactly like missing.
			_, errDenied := cs.CallTool(ctx, &mcp.CallToolParams{Name: "admin_reset"})
			_, errMissing := cs.CallTool(ctx, &mcp.CallToolParams{Name: "nope"})
			assertRPCCode(t, errDenied, wire.CodeInvalidParams)
			assertRPCCode(t, errMissing, wire.CodeInvalidParams)

			var uris []string
			for r, err := range cs.Resources(ctx, nil) {
				if err != nil {
					t.Fatal(err)
				}
				uris = append(uris, r.URI)
			}
			if !slices.Equal(uris, []string{"file:///a.txt", "file:///b.txt"}) {
				t.Fatalf("resources = %v", uris)
			}
			read, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///b.txt"})
			if err != nil || len(read.Contents) != 1 || read.Contents[0].Text != "content of b" {
				t.Fatalf("read = %+v, %v", read, err)
			}
			_, err = cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: "file:///missing"})
			assertRPCCode(t, err, era.notFound)

			tmpls, err := cs.ListResourceTemplates(ctx, nil)
			if err != nil || len(tmpls.ResourceTemplates) != 1 || tmpls.ResourceTemplates[0].URITemplate != "file:///{name}" {
				t.Fatalf("templates = %+v, %v", tmpls, err)
			}
			prompts, err := cs.ListPrompts(ctx, nil)
			if err != nil || len(prompts.Prompts) != 1 || prompts.Prompts[0].Name != "alpha_greet" {
				t.Fatalf("prompts = %+v, %v", prompts, err)
			}
			got, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: "alpha_greet", Arguments: map[string]string{"who": "Ann"}})
			if err != nil || len(got.Messages) != 1 || got.Messages[0].Content.(*mcp.TextContent).Text != "hello Ann" {
				t.Fatalf("prompt = %+v, %v", got, err)
			}
			comp, err := cs.Complete(ctx, &mcp.CompleteParams{Ref: &mcp.CompleteReference{Type: "ref/prompt", Name: "alpha_greet"},
				Argument: mcp.CompleteParamsArgument{Name: "who", Value: "w"}})
			if err != nil || !slices.Equal(comp.Completion.Values, []string{"world"}) {
				t.Fatalf("complete = %+v, %v", comp, err)
			}
		})
	}
}

func assertRPCCode(t *testing.T, err error, code int64) {
	t.Helper()
	var werr *jsonrpc.Error
	if !errors.As(err, &werr) {
		t.Fatalf("want a JSON-RPC error with code %d, got %v", code, err)
	}
	if werr.Code != code {
		t.Fatalf("error code = %d (%s), want %d", werr.Code, werr.Message, code)
	}
}

// TestSDKListChanged checks that a catalog change reaches go-sdk clients of
// both eras: Modern through subscriptions/listen, Legacy through the GET
// stream, both fed by WatchCatalog.
func TestSDKListChanged(t *testing.T) {
	b := startBackends(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			changed := make(chan struct{}, 4)
			cs := connect(t, ctx, srv.URL+"/mcp", "alice-key", era.version, &mcp.ClientOptions{
				ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
			})
			testkit.Eventually(t, "the notification stream to watch the catalog", 10*time.Second, func() bool { return b.agg.Watchers() == 1 })
			b.agg.Notify(aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS)
			select {
			case <-changed:
			case <-ctx.Done():
				t.Fatal("no tools/list_changed delivered")
			}
			if err := cs.Close(); err != nil && era.version != "" {
				t.Fatalf("close: %v", err)
			}
			testkit.Eventually(t, "closing the stream to end the catalog watch", 10*time.Second, func() bool { return b.agg.Watchers() == 0 })
		})
	}
}

// TestSDKMultiRoundTrip: a backend asks for client input. A Modern client
// answers the input_required result through its elicitation handler and
// retries with the sealed request state; a Legacy client gets a real
// elicitation/create request on its response stream and the gateway
// retries for it. Either way the backend sees its own state and the answer.
func TestSDKMultiRoundTrip(t *testing.T) {
	b := startBackends(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			var asked atomic.Int64
			cs := connect(t, ctx, srv.URL+"/mcp", "alice-key", era.version, &mcp.ClientOptions{
				ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					asked.Add(1)
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
				},
			})
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "alpha_ask"})
			if err != nil || asked.Load() != 1 || !strings.HasPrefix(toolText(t, res), `answered {"ok":{"action":"accept"`) {
				t.Fatalf("alpha_ask: %+v %v (asked %d)", res, err, asked.Load())
			}
		})
	}
}
