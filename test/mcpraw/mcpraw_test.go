package mcpraw

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestSend: a request carries the revision's headers and _meta; the answer
// is the result or error of a JSON body or of an event stream's last
// message, and anything else is an error.
func TestSend(t *testing.T) {
	const task = `{"jsonrpc":"2.0","id":1,"result":{"resultType":"task","taskId":"t1.abc"}}`
	var seen *http.Request
	var seenBody map[string]any
	answers := map[string]struct{ contentType, body string }{
		"json":    {"application/json", task},
		"stream":  {"text/event-stream; charset=utf-8", "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\"}\n\nevent: message\ndata:" + task + "\n\n"},
		"error":   {"application/json", `{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"unknown task","data":{"x":1}}}`},
		"neither": {"application/json", `{"jsonrpc":"2.0","id":1}`},
		"garbage": {"text/html", `<html>`},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = r
		raw, _ := io.ReadAll(r.Body)
		_ = json.Unmarshal(raw, &seenBody)
		a := answers[r.URL.Query().Get("answer")]
		w.Header().Set("Content-Type", a.contentType)
		_, _ = io.WriteString(w, a.body)
	}))
	t.Cleanup(srv.Close)
	send := func(answer string) (Answer, error) {
		c := &Client{URL: srv.URL + "?answer=" + answer, Authorization: "Bearer k", Capabilities: TasksCapabilities}
		return c.Send(t.Context(), "tasks/get", "t1.abc", map[string]any{"taskId": "t1.abc"})
	}

	for _, name := range []string{"json", "stream"} {
		a, err := send(name)
		if err != nil || a.Error != nil || !strings.Contains(string(a.Result), `"taskId":"t1.abc"`) {
			t.Fatalf("%s: %+v, %v", name, a, err)
		}
	}
	for h, want := range map[string]string{"Mcp-Protocol-Version": Version, "Mcp-Method": "tasks/get", "Mcp-Name": "t1.abc", "Authorization": "Bearer k"} {
		if got := seen.Header.Get(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	meta, _ := seenBody["params"].(map[string]any)["_meta"].(map[string]any)
	if caps, _ := meta["io.modelcontextprotocol/clientCapabilities"].(map[string]any); caps["extensions"] == nil || meta["io.modelcontextprotocol/protocolVersion"] != Version {
		t.Fatalf("_meta %v", meta)
	}
	a, err := send("error")
	if err != nil || a.Error == nil || a.Error.Code != -32602 || string(a.Error.Data) != `{"x":1}` || !strings.Contains(a.Error.Error(), "-32602") {
		t.Fatalf("error: %+v, %v", a, err)
	}
	for _, name := range []string{"neither", "garbage"} {
		if _, err := send(name); err == nil {
			t.Errorf("%s: answered without an error", name)
		}
	}
}
