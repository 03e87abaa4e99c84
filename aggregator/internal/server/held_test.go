package server_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// withLegacyConfirm adds a tool that asks for a confirmation with a real
// server-to-client elicitation/create, as Legacy servers do, and reports
// on cancelled when its call was cancelled while waiting.
func withLegacyConfirm(cancelled chan<- struct{}) func(*testBackend) {
	return func(b *testBackend) {
		b.server.AddTool(&mcp.Tool{Name: "confirm", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			res, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Delete everything?", RequestedSchema: map[string]any{
				"type": "object", "properties": map[string]any{"sure": map[string]any{"type": "boolean"}},
			}})
			if err != nil {
				if ctx.Err() != nil {
					cancelled <- struct{}{}
				}
				return nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "answer " + res.Action + " " + jsonText(res.Content)}}}, nil
		})
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// heldQuestion reads an input_required answer that asks one question:
// its key and the request state to retry with; ok is false for any other
// answer.
func heldQuestion(resp *aggregatorv1.CallToolResponse) (key, state string, ok bool) {
	var res struct {
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	if resp.GetResultType() != "input_required" || json.Unmarshal([]byte(resp.GetResultJson()), &res) != nil || len(res.InputRequests) != 1 {
		return "", "", false
	}
	for key = range res.InputRequests {
	}
	return key, res.RequestState, true
}

// confirmCaps are the capabilities of a caller that can answer
// legacy_confirm's question.
var confirmCaps = &aggregatorv1.RequestContext{ClientCapabilitiesJson: `{"elicitation":{}}`}

// holdConfirm makes alice's first call of legacy_confirm, which the
// backend holds to ask its question: the question's key and the request
// state to retry with.
func holdConfirm(t *testing.T, h *harness) (key, state string) {
	t.Helper()
	resp, err := h.gateway.CallTool(context.Background(), &aggregatorv1.CallToolRequest{Principal: principal("alice"), Name: "legacy_confirm", Context: confirmCaps})
	key, state, ok := heldQuestion(resp)
	if err != nil || !ok {
		t.Fatalf("first call: %v %v", resp, err)
	}
	return key, state
}

// A Modern caller reaches a Legacy backend that asks for input mid-call:
// the call comes back input_required, the retry (by the same principal,
// through the same server) answers the held backend request and
// completes the same call; a retry that never comes cancels
// the backend call after inputWait, and its state is then refused.
func TestLegacyBackendInputHeldAcrossRetry(t *testing.T) {
	cancelled := make(chan struct{}, 4)
	legacy := newTestBackend(t, "legacy", backendOptions{stateful: true, extra: withLegacyConfirm(cancelled)})
	h := startAggregatorFile(t, `
aggregator:
  catalogTTL: 1h
  backends:
    - name: legacy
      url: `+legacy.url()+`
      protocol: "2025-11-25"
      timeout: 5s
      inputWait: 300ms
servers:
  - {name: other, backends: [legacy]}
`)
	ctx := context.Background()
	caps := &aggregatorv1.RequestContext{ClientCapabilitiesJson: `{"elicitation":{}}`}
	ask := func() (string, string) {
		t.Helper()
		resp, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: principal("alice"), Name: "legacy_confirm", Context: caps})
		if err != nil {
			t.Fatal(err)
		}
		var res struct {
			InputRequests map[string]struct {
				Method string `json:"method"`
				Params struct {
					Message string `json:"message"`
				} `json:"params"`
			} `json:"inputRequests"`
			RequestState string `json:"requestState"`
		}
		if err := json.Unmarshal([]byte(resp.GetResultJson()), &res); err != nil || resp.GetResultType() != "input_required" || len(res.InputRequests) != 1 || res.RequestState == "" {
			t.Fatalf("first call: %s %s (%v)", resp.GetResultType(), resp.GetResultJson(), err)
		}
		// How long the call is held: a caller waiting for its client's
		// answer (the gateway's Legacy clients) waits no longer.
		if !resp.GetHeld() || resp.GetHeldForMs() != 300 {
			t.Fatalf("first call held %v for %d ms, want held for the backend's inputWait (300 ms)", resp.GetHeld(), resp.GetHeldForMs())
		}
		for key, r := range res.InputRequests {
			if r.Method != "elicitation/create" || r.Params.Message != "Delete everything?" {
				t.Fatalf("input request %s: %+v", key, r)
			}
			return key, res.RequestState
		}
		panic("unreachable")
	}
	retry := func(p *commonv1.Principal, key, state string) (*aggregatorv1.CallToolResponse, error) {
		return h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: p, Name: "legacy_confirm", Context: caps, RequestState: state,
			InputResponsesJson: `{"` + key + `":{"action":"accept","content":{"sure":true}}}`})
	}

	key, state := ask()
	// Another caller cannot answer it, nor the caller through another
	// server that shows the same tool under the same name (its policy,
	// limits and trail are another's).
	_, err := retry(principal("mallory"), key, state)
	wantStatus(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	_, err = h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: principal("alice"), Server: "other", Name: "legacy_confirm", Context: caps,
		RequestState: state, InputResponsesJson: `{"` + key + `":{"action":"accept","content":{"sure":true}}}`})
	wantStatus(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	resp, err := retry(principal("alice"), key, state)
	if err != nil || resp.GetResultType() != "complete" || resultText(t, resp.GetResultJson()) != `answer accept {"sure":true}` {
		t.Fatalf("retry: %v %v", resp, err)
	}
	// The state is spent.
	_, err = retry(principal("alice"), key, state)
	wantStatus(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)

	// Never retried: the backend call is cancelled after inputWait, and a
	// late retry is refused.
	key, state = ask()
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the held backend call was not cancelled after inputWait")
	}
	_, err = retry(principal("alice"), key, state)
	wantStatus(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	if !strings.Contains(err.Error(), "no longer held") {
		t.Fatalf("late retry: %v", err)
	}

	// A caller that cannot answer elicitation gets the backend's own
	// failure, not a held call.
	resp, err = h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: principal("alice"), Name: "legacy_confirm"})
	if err == nil && resp.GetResultType() == "input_required" {
		t.Fatalf("input_required for a caller without elicitation: %s", resp.GetResultJson())
	}
}

// A held call whose client will not answer (it cancelled, went away, or
// lacks what was asked) is released at once, its backend call cancelled,
// rather than held until inputWait; only by its owner, and release_held
// is never a call of its own.
func TestHeldCallReleased(t *testing.T) {
	cancelled := make(chan struct{}, 4)
	legacy := newTestBackend(t, "legacy", backendOptions{stateful: true, extra: withLegacyConfirm(cancelled)})
	// A limit of one call: the release takes no token (refused, it would
	// only keep the call held).
	h := startAggregatorFile(t, `
aggregator:
  backends:
    - {name: legacy, url: `+legacy.url()+`, protocol: "2025-11-25", timeout: 5s, inputWait: 1h}
rateLimits:
  limits:
    - {name: one-each, per: principal, rate: 1/h, burst: 1}
`)
	ctx := context.Background()
	_, state := holdConfirm(t, h)
	release := func(p *commonv1.Principal, state string) error {
		_, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: p, Name: "legacy_confirm", Context: confirmCaps, RequestState: state, ReleaseHeld: true})
		return err
	}
	wantStatus(t, release(principal("mallory"), state), codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	wantStatus(t, release(principal("bob"), ""), codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	if err := release(principal("alice"), state); status.Code(err) != codes.Canceled {
		t.Fatalf("release: %v, want CANCELLED", err)
	}
	select {
	case <-cancelled:
	case <-time.After(10 * time.Second):
		t.Fatal("the released call's backend call was not cancelled")
	}
	wantStatus(t, release(principal("alice"), state), codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
}

// A streamed call that may be held (a Legacy backend, a caller that can
// answer elicitation) is held like a plain one, and its retry, streamed
// too, completes it.
func TestStreamedCallToLegacyBackendIsHeld(t *testing.T) {
	legacy := newTestBackend(t, "legacy", backendOptions{stateful: true, extra: withLegacyConfirm(make(chan struct{}, 4))})
	h := startAggregator(t, parseConfig(t, `
aggregator:
  catalogTTL: 1h
  backends:
    - name: legacy
      url: `+legacy.url()+`
      protocol: "2025-11-25"
      timeout: 5s
`))
	rc := &aggregatorv1.RequestContext{ClientCapabilitiesJson: `{"elicitation":{}}`, ProgressTokenJson: `1`}
	_, first := streamCall(t, h.gateway, &aggregatorv1.CallToolRequest{Principal: principal("alice"), Name: "legacy_confirm", Context: rc})
	var res struct {
		RequestState string `json:"requestState"`
	}
	if err := json.Unmarshal([]byte(first.GetResultJson()), &res); err != nil || first.GetResultType() != "input_required" {
		t.Fatalf("first: %s %s", first.GetResultType(), first.GetResultJson())
	}
	_, second := streamCall(t, h.gateway, &aggregatorv1.CallToolRequest{Principal: principal("alice"), Name: "legacy_confirm", Context: rc,
		RequestState: res.RequestState, InputResponsesJson: `{"input-1":{"action":"decline"}}`})
	if second.GetResultType() != "complete" || resultText(t, second.GetResultJson()) != "answer decline null" {
		t.Fatalf("retry: %s %s", second.GetResultType(), second.GetResultJson())
	}
}

// A call held for the client's input outlives a reload that changes its
// backend (here a rotated header): the retry reaches the retired client
// that holds it, which answers the backend's question and completes it.
func TestHeldCallOutlivesAReloadOfItsBackend(t *testing.T) {
	cancelled := make(chan struct{}, 4)
	legacy := newTestBackend(t, "legacy", backendOptions{stateful: true, extra: withLegacyConfirm(cancelled)})
	file := func(token string) *config.Config {
		full, err := config.Parse([]byte(`
aggregator:
  catalogTTL: 1h
  backends:
    - name: legacy
      url: `+legacy.url()+`
      protocol: "2025-11-25"
      timeout: 5s
      inputWait: 10s
      headers: {X-Api-Token: `+token+`}
`), func(string) (string, bool) { return "", false })
		if err != nil {
			t.Fatal(err)
		}
		return full
	}
	h := startAggregator(t, file("credential-1").Aggregator)
	key, state := holdConfirm(t, h)
	reconfigure(t, h, file("credential-2"))
	resp, err := h.gateway.CallTool(context.Background(), &aggregatorv1.CallToolRequest{Principal: principal("alice"), Name: "legacy_confirm", Context: confirmCaps,
		RequestState: state, InputResponsesJson: `{"` + key + `":{"action":"accept","content":{"sure":true}}}`})
	if err != nil || resp.GetResultType() != "complete" || resultText(t, resp.GetResultJson()) != `answer accept {"sure":true}` {
		t.Fatalf("the retry after the reload: %v %v", resp, err)
	}
}

// A call held for the client's input whose backend a reload removes does
// not outlive it: the tool is gone from the catalog with its backend, so
// the client's retry is refused as not found, like any call to it.
func TestHeldCallEndsWithItsRemovedBackend(t *testing.T) {
	cancelled := make(chan struct{}, 4)
	legacy := newTestBackend(t, "legacy", backendOptions{stateful: true, extra: withLegacyConfirm(cancelled)})
	h := startBeforeLegacy(t, legacy, `, timeout: 5s, inputWait: 10s`)
	key, state := holdConfirm(t, h)
	removed, err := config.Parse([]byte("aggregator:\n  catalogTTL: 1h\n"), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	reconfigure(t, h, removed)
	_, err = h.gateway.CallTool(context.Background(), &aggregatorv1.CallToolRequest{Principal: principal("alice"), Name: "legacy_confirm", Context: confirmCaps,
		RequestState: state, InputResponsesJson: `{"` + key + `":{"action":"accept","content":{"sure":true}}}`})
	wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
}

// A streamed call whose caller stops reading its stream still ends at
// the tool's timeout, and the backend is told: the notifications it
// floods wait for the caller in a bounded queue, never blocking the
// backend's session.
func TestStreamedCallEndsThoughItsCallerStopsReading(t *testing.T) {
	cancelled := make(chan struct{})
	flood := newTestBackend(t, "flood", backendOptions{stateful: true, extra: func(b *testBackend) {
		b.server.AddTool(&mcp.Tool{Name: "spam", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			pad := strings.Repeat("x", 32<<10)
			for i := 0; ctx.Err() == nil; i++ {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: req.Params.GetProgressToken(), Progress: float64(i), Message: pad})
			}
			close(cancelled)
			return nil, ctx.Err()
		})
	}})
	h := startAggregator(t, parseConfig(t, `
aggregator:
  catalogTTL: 1h
  backends:
    - name: flood
      url: `+flood.url()+`
      protocol: "2025-11-25"
      timeout: 1s
`))
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	stream, err := h.gateway.CallToolStream(ctx, &aggregatorv1.CallToolStreamRequest{Call: &aggregatorv1.CallToolRequest{
		Principal: principal("alice"), Name: "flood_spam", ArgumentsJson: "{}",
		Context: &aggregatorv1.RequestContext{ProgressTokenJson: `"tok"`}}})
	if err != nil {
		t.Fatal(err)
	}
	_ = stream // never read
	select {
	case <-cancelled:
	case <-time.After(20 * time.Second):
		t.Fatal("the backend's call outlived its 1 s timeout while its caller did not read")
	}
}

// TestResumeHeldCallIsForPeersOnly: ResumeHeldCall carries a retry an
// aggregator replica forwarded, after it took the retry's rate-limit token
// and recorded its event; from any other caller (an internal client, whose
// credential may allow the service's every RPC, or the gateway) it is
// refused, so no retry passes unlimited and unrecorded. The retry itself,
// sent with CallTool, completes the call.
func TestResumeHeldCallIsForPeersOnly(t *testing.T) {
	cancelled := make(chan struct{}, 4)
	legacy := newTestBackend(t, "legacy", backendOptions{stateful: true, extra: withLegacyConfirm(cancelled)})
	// A replica with peers: its held calls name it, as a forwarded
	// retry's must.
	self := freeAddress(t)
	h := startAggregatorFile(t, `
aggregator:
  catalogTTL: 1h
  listen: "`+self+`"
  peers: {addresses: ["`+self+`"], token: `+aggregatorToken+`}
  backends:
    - name: legacy
      url: `+legacy.url()+`
      protocol: "2025-11-25"
`)
	ctx := context.Background()
	caps := &aggregatorv1.RequestContext{ClientCapabilitiesJson: `{"elicitation":{}}`}
	first, err := h.internal.CallTool(ctx, &aggregatorv1.CallToolRequest{Name: "legacy_confirm", Context: caps})
	key, state, ok := heldQuestion(first)
	if err != nil || !ok {
		t.Fatalf("first call: %v %v", first, err)
	}
	retry := &aggregatorv1.CallToolRequest{Name: "legacy_confirm", Context: caps, RequestState: state,
		InputResponsesJson: `{"` + key + `":{"action":"accept","content":{"sure":true}}}`}
	for name, c := range map[string]aggregatorv1.AggregatorServiceClient{"internal": h.internal, "gateway": h.gateway} {
		_, err := c.ResumeHeldCall(ctx, &aggregatorv1.ResumeHeldCallRequest{Call: retry})
		wantStatus(t, err, codes.PermissionDenied, commonv1.ErrorReason_ERROR_REASON_METHOD_NOT_ALLOWED)
		stream, err := c.ResumeHeldCallStream(ctx, &aggregatorv1.ResumeHeldCallStreamRequest{Call: retry})
		if err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) != codes.PermissionDenied {
			t.Errorf("%s's ResumeHeldCallStream: %v, want PermissionDenied", name, err)
		}
	}
	resp, err := h.internal.CallTool(ctx, retry)
	if err != nil || resultText(t, resp.GetResultJson()) != `answer accept {"sure":true}` {
		t.Fatalf("the retry with CallTool: %v %v", resp, err)
	}
}

// withLegacyWhere adds a tool that asks its client for its roots
// (roots/list) mid-call, as Legacy servers do, and answers with the URIs
// it was given, or with the failure it got.
func withLegacyWhere(b *testBackend) {
	b.server.AddTool(&mcp.Tool{Name: "where", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.ListRoots(ctx, nil)
		if err != nil {
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "roots/list failed: " + err.Error()}}}, nil
		}
		var uris []string
		for _, r := range res.Roots {
			uris = append(uris, r.URI)
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "roots: [" + strings.Join(uris, " ") + "]"}}}, nil
	})
}

// A Legacy backend's roots/list in the middle of a held call is the
// client's to answer, as its elicitation is: a client that declared roots
// is asked (input_required) and the backend gets the roots it answered; a
// client that declared none has the backend's request refused, as has a
// call on a session of its own (a Legacy call that wants log messages),
// which asks the client nothing. No backend is told of roots the
// aggregator made up (go-sdk's own answer, its empty root list).
func TestHeldCallAsksTheClientForRoots(t *testing.T) {
	legacy := newTestBackend(t, "legacy", backendOptions{stateful: true, extra: withLegacyWhere})
	h := startBeforeLegacy(t, legacy, `, timeout: 5s`)
	ctx := context.Background()
	withRoots := &aggregatorv1.RequestContext{ClientCapabilitiesJson: `{"elicitation":{},"roots":{}}`}
	first, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: principal("alice"), Name: "legacy_where", Context: withRoots})
	key, state, ok := heldQuestion(first)
	if err != nil || !ok || !strings.Contains(first.GetResultJson(), `"method":"roots/list"`) {
		t.Fatalf("a client that declared roots: %v %v, want roots/list asked of it", first, err)
	}
	resp, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: principal("alice"), Name: "legacy_where", Context: withRoots,
		RequestState: state, InputResponsesJson: `{"` + key + `":{"roots":[{"uri":"file:///client-root","name":"client"}]}}`})
	if err != nil || resultText(t, resp.GetResultJson()) != "roots: [file:///client-root]" {
		t.Fatalf("the retry with the client's roots: %v %v", resp, err)
	}

	resp, err = h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: principal("alice"), Name: "legacy_where", Context: confirmCaps})
	if err != nil || !resp.GetIsError() || !strings.HasPrefix(resultText(t, resp.GetResultJson()), "roots/list failed") {
		t.Fatalf("a client that declared no roots: %v %v, want the backend's roots/list refused", resp, err)
	}
	_, resp = streamCall(t, h.gateway, &aggregatorv1.CallToolRequest{Principal: principal("alice"), Name: "legacy_where",
		Context: &aggregatorv1.RequestContext{ClientCapabilitiesJson: `{"roots":{}}`, LogLevel: "info"}})
	if !resp.GetIsError() || !strings.HasPrefix(resultText(t, resp.GetResultJson()), "roots/list failed") {
		t.Fatalf("a call on a session of its own: %v, want the backend's roots/list refused", resp)
	}
}

// withLegacyPick adds a tool that asks its client to sample with a tool
// the model may use (sampling/createMessage with tools, as a client
// declaring sampling.tools accepts) and answers with the blocks of the
// message it got.
func withLegacyPick(b *testBackend) {
	b.server.AddTool(&mcp.Tool{Name: "pick", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		res, err := req.Session.CreateMessageWithTools(ctx, &mcp.CreateMessageWithToolsParams{
			MaxTokens:  100,
			Messages:   []*mcp.SamplingMessageV2{{Role: "user", Content: []mcp.Content{&mcp.TextContent{Text: "which city?"}}}},
			Tools:      []*mcp.Tool{{Name: "lookup", InputSchema: map[string]any{"type": "object"}}},
			ToolChoice: &mcp.ToolChoice{Mode: "auto"},
		})
		if err != nil {
			return nil, err
		}
		var blocks []string
		for _, c := range res.Content {
			switch c := c.(type) {
			case *mcp.TextContent:
				blocks = append(blocks, "text "+c.Text)
			case *mcp.ToolUseContent:
				blocks = append(blocks, "tool_use "+c.Name)
			}
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: strings.Join(blocks, ", ")}}}, nil
	})
}

// A Legacy backend's sampling request with tools reaches the client of a
// held call as the backend sent it, tools and toolChoice included, and
// the backend gets the client's answer whole, however many blocks it
// holds (a text and a tool use here): go-sdk's plain sampling handler
// dropped the tools and could not read an answer of several blocks.
func TestHeldCallSamplingKeepsItsTools(t *testing.T) {
	legacy := newTestBackend(t, "legacy", backendOptions{stateful: true, extra: withLegacyPick})
	h := startBeforeLegacy(t, legacy, `, timeout: 5s`)
	ctx := context.Background()
	caps := &aggregatorv1.RequestContext{ClientCapabilitiesJson: `{"sampling":{"tools":{}}}`}
	first, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: principal("alice"), Name: "legacy_pick", Context: caps})
	key, state, ok := heldQuestion(first)
	if err != nil || !ok {
		t.Fatalf("first call: %v %v", first, err)
	}
	var asked struct {
		InputRequests map[string]struct {
			Method string `json:"method"`
			Params struct {
				Tools []struct {
					Name string `json:"name"`
				} `json:"tools"`
				ToolChoice *struct {
					Mode string `json:"mode"`
				} `json:"toolChoice"`
			} `json:"params"`
		} `json:"inputRequests"`
	}
	if err := json.Unmarshal([]byte(first.GetResultJson()), &asked); err != nil {
		t.Fatal(err)
	}
	q := asked.InputRequests[key]
	if q.Method != "sampling/createMessage" || len(q.Params.Tools) != 1 || q.Params.Tools[0].Name != "lookup" || q.Params.ToolChoice == nil || q.Params.ToolChoice.Mode != "auto" {
		t.Fatalf("the question asked of the client: %s, want the backend's tools and toolChoice", first.GetResultJson())
	}
	resp, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: principal("alice"), Name: "legacy_pick", Context: caps, RequestState: state,
		InputResponsesJson: `{"` + key + `":{"role":"assistant","model":"m","stopReason":"toolUse","content":[{"type":"text","text":"let me look"},{"type":"tool_use","id":"u1","name":"lookup","input":{}}]}}`})
	if err != nil || resultText(t, resp.GetResultJson()) != "text let me look, tool_use lookup" {
		t.Fatalf("the retry with an answer of two blocks: %v %v", resp, err)
	}
}
