package edge

import (
	"net/http"
	"testing"
)

// TestHeaderSpecsAreCached: validating Mcp-Param-* headers lists tools once,
// not on every call, for known and for unknown tools alike.
func TestHeaderSpecsAreCached(t *testing.T) {
	b := startBackends(t)
	_, srv := startGateway(t, b, testGatewayConfig(b))
	call := func(name string, extra ...string) wireResponse {
		return send(t, http.MethodPost, srv.URL+"/mcp", modernHeaders("tools/call", append([]string{"Mcp-Name", name}, extra...)...),
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+modernMeta+`,"name":"`+name+`","arguments":{"region":"eu"}}}`)
	}
	for range 3 {
		if resp := call("alpha_region", "Mcp-Param-Region", "eu"); resp.status != 200 {
			t.Fatalf("alpha_region: %d %s", resp.status, resp.body)
		}
	}
	// One listing, up to the page holding the tool (the second of three),
	// filled the table.
	if n := b.agg.listings.Load(); n != 2 {
		t.Fatalf("%d ListTools calls, want 2", n)
	}
	for range 3 {
		if resp := call("nope"); resp.status != 400 {
			t.Fatalf("nope: %d %s", resp.status, resp.body)
		}
	}
	// An unknown tool costs one full listing, then nothing.
	if n := b.agg.listings.Load(); n != 5 {
		t.Fatalf("%d ListTools calls after unknown tools, want 5", n)
	}
}
