package edge

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
)

// backendState is the request state the Modern backend below mints; the
// client must never see it in clear, and the backend must get it back.
const backendState = "backend-state-1"

// startModernConfirmBackend serves a stateless (Modern) go-sdk backend whose
// confirm tool asks for a confirmation through an input_required result.
// retries counts calls that arrived with answers, so a test can prove that
// a refused retry never reached the backend.
func startModernConfirmBackend(t *testing.T) (url string, retries *atomic.Int64) {
	retries = new(atomic.Int64)
	server := mcp.NewServer(&mcp.Implementation{Name: "modern", Version: "1"}, nil)
	server.AddTool(&mcp.Tool{Name: "confirm", InputSchema: map[string]any{"type": "object"}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		answer, ok := req.Params.InputResponses["ok"].(*mcp.ElicitResult)
		if !ok {
			return &mcp.CallToolResult{
				InputRequests: mcp.InputRequestMap{"ok": &mcp.ElicitParams{Message: "Proceed?", RequestedSchema: map[string]any{"type": "object"}}},
				RequestState:  backendState,
			}, nil
		}
		retries.Add(1)
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "confirmed: " + answer.Action + " with " + req.Params.RequestState}}}, nil
	})
	srv := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(srv.Close)
	return srv.URL, retries
}

// Issue 6 items 1, 3 and 6, with real go-sdk clients, the real aggregator
// process and a Modern backend whose tool asks for a confirmation: a Modern
// client answers the input_required result and its retry completes with the
// backend's own state; a Legacy client is asked by a real elicitation/create
// on its response stream and sees one ordinary call. A tampered request
// state is refused with -32602 and never reaches the backend.
func TestModernBackendElicitationThroughGateway(t *testing.T) {
	backendURL, retries := startModernConfirmBackend(t)
	b, srv := startGatewayOverAggregator(t, `
    - name: modern
      url: `+backendURL+`
      protocol: "2026-07-28"
      timeout: 10s
`)
	ctx := context.Background()

	for _, era := range eras {
		t.Run(era.name, func(t *testing.T) {
			var asked atomic.Int64
			cs := connect(t, ctx, srv.URL+"/mcp", "alice-key", era.version, &mcp.ClientOptions{
				ElicitationHandler: func(_ context.Context, r *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
					if r.Params.Message != "Proceed?" {
						t.Errorf("elicitation message %q", r.Params.Message)
					}
					asked.Add(1)
					return &mcp.ElicitResult{Action: "accept", Content: map[string]any{}}, nil
				},
			})
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "modern_confirm", Arguments: map[string]any{}})
			if err != nil {
				t.Fatal(err)
			}
			if got := toolText(t, res); got != "confirmed: accept with "+backendState || asked.Load() != 1 {
				t.Fatalf("result %q after %d elicitations", got, asked.Load())
			}
		})
	}

	t.Run("tampered state", func(t *testing.T) {
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}`
		headers := modernHeaders("tools/call", "Mcp-Name", "modern_confirm")
		first := send(t, http.MethodPost, srv.URL+"/mcp", headers,
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+meta+`,"name":"modern_confirm","arguments":{}}}`)
		_, result, rerr := first.rpc(t)
		if rerr != nil || first.status != http.StatusOK {
			t.Fatalf("first round: %d %s", first.status, first.body)
		}
		var state string
		if err := json.Unmarshal(result["requestState"], &state); err != nil || state == "" {
			t.Fatalf("no request state in %s", first.body)
		}
		if strings.Contains(state, backendState) {
			t.Fatalf("the backend's state reached the client in clear: %q", state)
		}
		before := retries.Load()
		// Flip one character in the middle of the sealed state.
		mid := len(state) / 2
		flipped := byte('A')
		if state[mid] == 'A' {
			flipped = 'B'
		}
		tampered := state[:mid] + string(flipped) + state[mid+1:]
		retry := func(s string) wireResponse {
			return send(t, http.MethodPost, srv.URL+"/mcp", headers,
				`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{`+meta+`,"name":"modern_confirm","arguments":{},`+
					`"inputResponses":{"ok":{"action":"accept","content":{}}},"requestState":`+string(mustJSON(t, s))+`}}`)
		}
		resp := retry(tampered)
		if _, _, rerr := resp.rpc(t); resp.status != http.StatusBadRequest || rerr == nil || rerr.Code != wire.CodeInvalidParams {
			t.Fatalf("tampered retry: %d %s", resp.status, resp.body)
		}
		if retries.Load() != before {
			t.Fatal("a tampered state reached the backend")
		}
		// The untouched state still completes the call.
		resp = retry(state)
		if _, result, rerr := resp.rpc(t); resp.status != http.StatusOK || rerr != nil || !strings.Contains(string(result["content"]), "confirmed: accept with "+backendState) {
			t.Fatalf("genuine retry: %d %s", resp.status, resp.body)
		}
		// Once: a replay is refused and never reaches the backend.
		used := retries.Load()
		resp = retry(state)
		if _, _, rerr := resp.rpc(t); resp.status != http.StatusBadRequest || rerr == nil || rerr.Code != wire.CodeInvalidParams || retries.Load() != used {
			t.Fatalf("replayed retry: %d %s, backend retries %d -> %d", resp.status, resp.body, used, retries.Load())
		}
	})

	t.Run("state bound to the arguments, and to one use", func(t *testing.T) {
		meta := `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}}`
		headers := modernHeaders("tools/call", "Mcp-Name", "modern_confirm")
		call := func(args, extra string) wireResponse {
			return send(t, http.MethodPost, srv.URL+"/mcp", headers,
				`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{`+meta+`,"name":"modern_confirm","arguments":`+args+extra+`}}`)
		}
		_, result, rerr := call(`{"amount":3,"to":"bob"}`, "").rpc(t)
		var state string
		if rerr != nil || json.Unmarshal(result["requestState"], &state) != nil {
			t.Fatalf("first round: %v %v", rerr, result)
		}
		answer := `,"inputResponses":{"ok":{"action":"accept","content":{}}},"requestState":` + string(mustJSON(t, state))
		before := retries.Load()
		resp := call(`{"amount":300,"to":"bob"}`, answer)
		if _, _, rerr := resp.rpc(t); resp.status != http.StatusBadRequest || rerr == nil || rerr.Code != wire.CodeInvalidParams || retries.Load() != before {
			t.Fatalf("retry with other arguments: %d %s", resp.status, resp.body)
		}
		// With the record unreachable the retry is refused for now, and
		// the state is not used up.
		b.down.Store(true)
		resp = call(`{"amount":3,"to":"bob"}`, answer)
		b.down.Store(false)
		if _, _, rerr := resp.rpc(t); rerr == nil || rerr.Code != wire.CodeInternalError || retries.Load() != before {
			t.Fatalf("retry with the indexer down: %d %s", resp.status, resp.body)
		}
		// The same arguments, encoded otherwise, are the same request.
		resp = call(`{ "to": "bob", "amount": 3 }`, answer)
		if _, _, rerr := resp.rpc(t); resp.status != http.StatusOK || rerr != nil || retries.Load() != before+1 {
			t.Fatalf("retry with the arguments reordered: %d %s", resp.status, resp.body)
		}
	})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
