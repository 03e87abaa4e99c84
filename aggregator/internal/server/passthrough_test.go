package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// vendorWriter rewrites a real go-sdk backend's wire: the text block with
// text vendorMarker gets a member go-sdk does not model, and its result a
// top-level field go-sdk does not model either. It records every message
// it rewrote, so a test can compare against exactly what was sent.
type vendorWriter struct {
	http.ResponseWriter
	mu   *sync.Mutex
	sent *[]string
}

const (
	vendorMarker = `{"type":"text","text":"vendor-result"}`
	vendorBlock  = `{"type":"text","text":"vendor-result","vendorBlockField":{"x":[1,"two",null]}}`
	vendorTop    = `"vendorField":{"nested":{"deep":true},"n":1.50}`
)

func (w vendorWriter) WriteHeader(code int) {
	w.Header().Del("Content-Length")
	w.ResponseWriter.WriteHeader(code)
}

func (w vendorWriter) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(vendorMarker)) {
		n := len(p)
		p = bytes.Replace(p, []byte(vendorMarker), []byte(vendorBlock), 1)
		// The result object starts with "content"; the vendor field goes
		// in front of it, so it is a top-level member of the result.
		p = bytes.Replace(p, []byte(`"result":{`), []byte(`"result":{`+vendorTop+`,`), 1)
		w.mu.Lock()
		*w.sent = append(*w.sent, string(p))
		w.mu.Unlock()
		_, err := w.ResponseWriter.Write(p)
		return n, err
	}
	return w.ResponseWriter.Write(p)
}

func (w vendorWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// sentResult extracts the result member of the JSON-RPC message in one
// rewritten write (an SSE event or a JSON body), as raw bytes.
func sentResult(t *testing.T, write string) string {
	t.Helper()
	msg := write
	if i := strings.Index(write, "data: "); i >= 0 {
		msg = write[i+len("data: "):]
		msg = msg[:strings.IndexByte(msg, '\n')]
	}
	var m struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal([]byte(msg), &m); err != nil {
		t.Fatalf("rewritten message %q: %v", write, err)
	}
	return string(m.Result)
}

// TestResultFieldsGoSDKDoesNotModelPassThrough: a backend result with a
// top-level field and a content-block member that go-sdk does not model
// reaches the caller byte for byte, from a Modern and from a Legacy
// backend.
func TestResultFieldsGoSDKDoesNotModelPassThrough(t *testing.T) {
	vendorTool := func(b *testBackend) {
		b.server.AddTool(&mcp.Tool{Name: "vendor", InputSchema: map[string]any{"type": "object"}}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "vendor-result"}}}, nil
		})
	}
	modern := newTestBackend(t, "modern", backendOptions{extra: vendorTool})
	legacy := newTestBackend(t, "legacy", backendOptions{stateful: true, extra: vendorTool})
	var mu sync.Mutex
	var sent []string
	for _, b := range []*testBackend{modern, legacy} {
		wrap := func(w http.ResponseWriter) http.ResponseWriter {
			return vendorWriter{ResponseWriter: w, mu: &mu, sent: &sent}
		}
		b.wrap.Store(&wrap)
	}
	h := startAggregator(t, parseConfig(t, `
aggregator:
  catalogTTL: 1h
  backends:
    - {name: modern, url: `+modern.url()+`, protocol: "2026-07-28"}
    - {name: legacy, url: `+legacy.url()+`, protocol: "2025-11-25"}
`))
	for _, name := range []string{"modern_vendor", "legacy_vendor"} {
		mu.Lock()
		sent = nil
		mu.Unlock()
		resp, err := h.gateway.CallTool(context.Background(), &aggregatorv1.CallToolRequest{Name: name, ArgumentsJson: `{}`})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		mu.Lock()
		if len(sent) != 1 {
			mu.Unlock()
			t.Fatalf("%s: the backend's answer was rewritten %d times", name, len(sent))
		}
		want := sentResult(t, sent[0])
		mu.Unlock()
		got := resp.GetResultJson()
		if got != want {
			t.Fatalf("%s: result_json\n%s\nis not the backend's result\n%s", name, got, want)
		}
		if !strings.Contains(got, vendorTop) || !strings.Contains(got, vendorBlock) {
			t.Fatalf("%s: vendor fields lost: %s", name, got)
		}
		if resp.GetResultType() != "complete" || resp.GetIsError() {
			t.Fatalf("%s: result type %q, is_error %v", name, resp.GetResultType(), resp.GetIsError())
		}
	}
}

// withRegionTool adds a tool whose inputSchema mirrors region (top level)
// and zone (nested) into Mcp-Param-* headers; a Modern go-sdk backend
// checks them itself, so a call only succeeds if the aggregator sends them.
func withRegionTool(b *testBackend) {
	b.server.AddTool(&mcp.Tool{Name: "deploy", InputSchema: map[string]any{
		"type": "object",
		"properties": map[string]any{
			"region": map[string]any{"type": "string", "x-mcp-header": "Region"},
			"target": map[string]any{"type": "object", "properties": map[string]any{
				"zone": map[string]any{"type": "string", "x-mcp-header": "Zone"},
			}},
		},
	}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deployed " + req.Extra.Header.Get("Mcp-Param-Region")}}}, nil
	})
}

// TestParamHeadersCheckedAfterAuthorization: the Mcp-Param-* headers a
// Modern client sent are checked against the tool's x-mcp-header
// annotations, after the authorization decision (a denied tool is
// NOT_FOUND whatever its headers), and the aggregator sends the backend
// the headers its arguments require.
func TestParamHeadersCheckedAfterAuthorization(t *testing.T) {
	modern := newTestBackend(t, "modern", backendOptions{extra: withRegionTool})
	policy := writeFile(t, "p.cedar", `permit (principal in Group::"ops", action, resource);`)
	h := startAggregator(t, parseConfig(t, `
aggregator:
  catalogTTL: 1h
  authz: {policyFile: `+policy+`}
  backends:
    - {name: modern, url: `+modern.url()+`}
`))
	ctx := context.Background()
	args := `{"region":"Zürich","target":{"zone":"b"}}`
	call := func(who *commonv1.Principal, headers map[string]string, check bool) (*aggregatorv1.CallToolResponse, error) {
		return h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: who, Name: "modern_deploy", ArgumentsJson: args, ParamHeaders: headers, CheckParamHeaders: check})
	}
	ops := principal("olga", "ops")
	good := map[string]string{"region": "=?base64?WsO8cmljaA==?=", "zone": "b"}
	resp, err := call(ops, good, true)
	if err != nil || !strings.Contains(resultText(t, resp.GetResultJson()), "deployed =?base64?WsO8cmljaA==?=") {
		t.Fatalf("mirrored headers: %v %v", resp, err)
	}
	// A Legacy request (no check) needs no headers; the backend still gets
	// them from the aggregator.
	if resp, err := call(ops, nil, false); err != nil || !strings.Contains(resp.GetResultJson(), "deployed") {
		t.Fatalf("unchecked call: %v %v", resp, err)
	}
	for name, headers := range map[string]map[string]string{
		"missing nested": {"region": "=?base64?WsO8cmljaA==?="},
		"wrong value":    {"region": "Zurich", "zone": "b"},
	} {
		_, err := call(ops, headers, true)
		wantStatus(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_HEADER_MISMATCH)
		if _, meta := apierr.Info(err); !strings.HasPrefix(meta["header"], "Mcp-Param-") {
			t.Fatalf("%s: metadata %v", name, meta)
		}
	}
	// Denied: NOT_FOUND, exactly like a missing tool, before any header is
	// looked at.
	_, err = call(principal("eve", "guests"), map[string]string{"region": "wrong"}, true)
	wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	_, err = h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: ops, Name: "modern_nope", ParamHeaders: map[string]string{"region": "x"}, CheckParamHeaders: true})
	wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	many := map[string]string{}
	for i := range 65 {
		many[strings.Repeat("h", i+1)] = "x"
	}
	_, err = call(ops, many, true)
	wantStatus(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
}

// TestServerRequestOnRawCallIsRefused: a Legacy backend that asks the
// shared session's client something mid-call (here roots/list) gets a
// JSON-RPC error at once instead of waiting forever, and the call ends.
func TestServerRequestOnRawCallIsRefused(t *testing.T) {
	legacy := newTestBackend(t, "legacy", backendOptions{stateful: true, extra: func(b *testBackend) {
		b.server.AddTool(&mcp.Tool{Name: "roots", InputSchema: map[string]any{"type": "object"}}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			_, err := req.Session.ListRoots(ctx, nil)
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "roots answered: " + errText(err)}}}, nil
		})
	}})
	h := startBeforeLegacy(t, legacy, `, timeout: 20s`)
	start := time.Now()
	resp, err := h.gateway.CallTool(context.Background(), &aggregatorv1.CallToolRequest{Name: "legacy_roots", ArgumentsJson: `{}`})
	if err != nil {
		t.Fatal(err)
	}
	if text := resultText(t, resp.GetResultJson()); !strings.Contains(text, "-32601") && !strings.Contains(text, "does not serve") {
		t.Fatalf("the backend's request was not refused: %s", text)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the refused request took %s", took)
	}
}

func errText(err error) string {
	if err == nil {
		return "no error"
	}
	return err.Error()
}
