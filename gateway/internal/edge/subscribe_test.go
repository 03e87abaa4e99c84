package edge

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// startSubscribeBackend serves a go-sdk Legacy backend that supports
// resources/subscribe, with the resources sub://a and sub://b and a tool.
// active reports how many subscriptions to a URI the backend holds.
func startSubscribeBackend(t *testing.T) (server *mcp.Server, url string, active func(uri string) int) {
	var mu sync.Mutex
	held := map[string]int{}
	count := func(uri string, delta int) {
		mu.Lock()
		held[uri] += delta
		mu.Unlock()
	}
	active = func(uri string) int {
		mu.Lock()
		defer mu.Unlock()
		return held[uri]
	}
	server = mcp.NewServer(&mcp.Implementation{Name: "subs", Version: "1"}, &mcp.ServerOptions{
		SubscribeHandler: func(_ context.Context, req *mcp.SubscribeRequest) error {
			count(req.Params.URI, 1)
			return nil
		},
		UnsubscribeHandler: func(_ context.Context, req *mcp.UnsubscribeRequest) error {
			count(req.Params.URI, -1)
			return nil
		},
	})
	// The aggregator process is ready once it serves a tool.
	server.AddTool(&mcp.Tool{Name: "noop", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{}, nil
	})
	for _, uri := range []string{"sub://a", "sub://b"} {
		server.AddResource(&mcp.Resource{URI: uri, Name: uri}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, Text: "x"}}}, nil
		})
	}
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, nil))
	t.Cleanup(srv.Close)
	return server, srv.URL, active
}

type updates struct {
	mu   sync.Mutex
	uris []string
}

func (u *updates) options() *mcp.ClientOptions {
	return &mcp.ClientOptions{ResourceUpdatedHandler: func(_ context.Context, req *mcp.ResourceUpdatedNotificationRequest) {
		u.mu.Lock()
		u.uris = append(u.uris, req.Params.URI)
		u.mu.Unlock()
	}}
}

func (u *updates) list() []string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return slices.Clone(u.uris)
}

// startSubscribeGateway serves a gateway over an aggregator process over
// startSubscribeBackend's backend, in a Legacy session.
func startSubscribeGateway(t *testing.T) (server *mcp.Server, srv *httptest.Server, active func(uri string) int) {
	server, url, active := startSubscribeBackend(t)
	_, srv = startGatewayOverAggregator(t, `
    - name: subs
      url: `+url+`
      protocol: "2025-11-25"
      timeout: 10s
`)
	return server, srv, active
}

// Real go-sdk clients of both eras, through the gateway and a real
// aggregator process, subscribe to one of a backend's resources and hear of
// its updates (Modern on a listen stream, Legacy on the session's GET
// stream), and not of the other resource's; unsubscribing ends the
// backend's subscription.
func TestResourceSubscriptionsEndToEnd(t *testing.T) {
	server, srv, active := startSubscribeGateway(t)
	t.Run("wire", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		// Until the aggregator has listed the backend no URI is known;
		// then the ack names exactly the one that is delivered.
		var lines *bufio.Scanner
		testkit.Eventually(t, "sub://a acknowledged", 10*time.Second, func() bool {
			streamCtx, closeStream := context.WithCancel(ctx)
			t.Cleanup(closeStream)
			_, l := openStream(t, streamCtx, srv.URL+"/mcp", modernHeaders("subscriptions/listen"),
				`{"jsonrpc":"2.0","id":7,"method":"subscriptions/listen","params":{`+modernMeta+`,"notifications":{"resourceSubscriptions":["sub://a","sub://missing"]}}}`)
			ack := nextData(t, l)
			if ack == `{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":7},"notifications":{"resourceSubscriptions":["sub://a"]}}}` {
				lines = l
				return true
			}
			return false
		})
		if err := server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "sub://a"}); err != nil {
			t.Fatal(err)
		}
		d := nextData(t, lines)
		for strings.HasPrefix(d, ":") {
			d = nextData(t, lines)
		}
		if want := `{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":7},"uri":"sub://a"}}`; d != want {
			t.Fatalf("update = %s, want %s", d, want)
		}
	})
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			u := &updates{}
			cs := connectListed(t, ctx, srv.URL, era.version, u)
			if caps := cs.InitializeResult().Capabilities; caps.Resources == nil || !caps.Resources.Subscribe {
				t.Fatalf("resources capability %+v, want subscribe", caps.Resources)
			}
			if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "sub://a"}); err != nil {
				t.Fatal(err)
			}
			// The subscription may still be opening: announce until the
			// client hears of it. sub://b goes first each time, so had it
			// been delivered it would be in the list.
			testkit.Eventually(t, "update of sub://a delivered", 10*time.Second, func() bool {
				_ = server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "sub://b"})
				_ = server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "sub://a"})
				return len(u.list()) > 0
			})
			for _, uri := range u.list() {
				if uri != "sub://a" {
					t.Fatalf("client heard of %q, subscribed only to sub://a", uri)
				}
			}
			// Unsubscribing ends the aggregator's subscription at the
			// backend (once earlier subtests' streams have closed too).
			if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "sub://a"}); err != nil {
				t.Fatal(err)
			}
			testkit.Eventually(t, "backend subscription to sub://a ended", 10*time.Second, func() bool { return active("sub://a") == 0 })
		})
	}
}

// TestSubscriptionOutlivesItsResourceLeaving: a resource a client
// subscribed to leaves the catalog and comes back; its updates reach the
// client again, in both eras, with nothing asked of the client. The
// aggregator's watch dropped it for good, while the client (a Legacy
// session's subscription, a listen's acknowledged one) held it.
func TestSubscriptionOutlivesItsResourceLeaving(t *testing.T) {
	server, srv, active := startSubscribeGateway(t)
	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			u := &updates{}
			cs := connectListed(t, ctx, srv.URL, era.version, u)
			if err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: "sub://a"}); err != nil {
				t.Fatal(err)
			}
			delivered := func(what string) {
				t.Helper()
				before := len(u.list())
				testkit.Eventually(t, what, 10*time.Second, func() bool {
					_ = server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "sub://a"})
					return len(u.list()) > before
				})
			}
			delivered("an update of sub://a delivered")
			server.RemoveResources("sub://a")
			testkit.Eventually(t, "sub://a unsubscribed at the backend once gone", 10*time.Second, func() bool { return active("sub://a") == 0 })
			server.AddResource(&mcp.Resource{URI: "sub://a", Name: "sub://a"}, func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
				return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "sub://a", Text: "x"}}}, nil
			})
			delivered("an update of sub://a delivered once it is back")
			if err := cs.Unsubscribe(ctx, &mcp.UnsubscribeParams{URI: "sub://a"}); err != nil {
				t.Fatal(err)
			}
			testkit.Eventually(t, "unsubscribed", 10*time.Second, func() bool { return active("sub://a") == 0 })
		})
	}
}

// connectListed connects alice to the gateway at base in the era of
// version, with u taking the updates, once her resources (sub://a and
// sub://b) are listed: the aggregator lists its backend in the
// background.
func connectListed(t *testing.T, ctx context.Context, base, version string, u *updates) *mcp.ClientSession {
	t.Helper()
	cs := connect(t, ctx, base+"/mcp", "alice-key", version, u.options())
	testkit.Eventually(t, "resources listed", 10*time.Second, func() bool {
		res, err := cs.ListResources(ctx, nil)
		return err == nil && len(res.Resources) == 2
	})
	return cs
}
