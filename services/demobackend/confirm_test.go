package demobackend

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestConfirmAndCacheHints: a confirm tool and a confirm resource ask for
// an elicitation first and answer once it is accepted (go-sdk's client
// runs the rounds), every round is counted, and the configured cache
// hints reach the client as they are, a negative ttlMs included.
func TestConfirmAndCacheHints(t *testing.T) {
	b, err := New(Spec{
		Tools:     []ToolSpec{{Name: "pay", Behaviour: BehaviourConfirm}},
		Resources: []ResourceSpec{{URI: "demo://secret", Name: "secret", Text: "s", Confirm: true}, {URI: "demo://open", Name: "open", Text: "o"}},
		Cache:     &CacheSpec{TTLMs: -5, Scope: "private"},
	}, Options{Name: "alpha"})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(b.Handler())
	t.Cleanup(srv.Close)
	asked := 0
	cs := connect(t, srv.URL, "", &mcp.ClientOptions{ElicitationHandler: func(context.Context, *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
		asked++
		return &mcp.ElicitResult{Action: "accept", Content: map[string]any{"ok": true}}, nil
	}})
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "pay", Arguments: map[string]any{"amount": 3}})
	if err != nil {
		t.Fatal(err)
	}
	if m := structured(t, res); m["confirmed"] != true || m["arguments"].(map[string]any)["amount"] != 3.0 {
		t.Fatalf("pay answered %v", m)
	}
	read, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "demo://secret"})
	if err != nil || len(read.Contents) != 1 || read.Contents[0].Text != "s" {
		t.Fatalf("read demo://secret: %+v %v", read, err)
	}
	if asked != 2 {
		t.Fatalf("the client was asked %d times, want once per request", asked)
	}
	open, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "demo://open"})
	if err != nil || open.TTLMs != -5 || open.CacheScope != "private" {
		t.Fatalf("cache hints of demo://open: %+v %v", open, err)
	}
	// A declined confirmation is asked again (and the client's handler
	// then accepts).
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "pay", RequestState: "demo-confirm:pay:x",
		InputResponses: mcp.InputResponseMap{"confirm": &mcp.ElicitResult{Action: "decline"}}}); err != nil || asked != 3 {
		t.Fatalf("a declined confirmation: %v, asked %d times, want 3", err, asked)
	}

	resp, err := http.Get(srv.URL + "/admin/calls")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var calls map[string]int
	if err := json.NewDecoder(resp.Body).Decode(&calls); err != nil {
		t.Fatal(err)
	}
	if calls["tools/call pay"] < 3 || calls["resources/read demo://secret"] != 2 || calls["resources/read demo://open"] != 1 {
		t.Fatalf("calls = %v", calls)
	}
}
