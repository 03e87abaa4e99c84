package hostile

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// rawListing is a raw backend whose tools/list result is the given text,
// written byte for byte (so it may hold what encoding/json never writes:
// bytes that are not UTF-8, numbers no float64 holds), and whose every
// tools/call result is callResult, written the same way.
func rawListing(t *testing.T, result, callResult string) *rawBackend {
	return newRawBackend(t, func(w http.ResponseWriter, method string, id, params json.RawMessage) {
		switch method {
		case "tools/list":
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, result)
		case "tools/call":
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":%s}`, id, callResult)
		default:
			http.Error(w, "no", http.StatusBadRequest)
		}
	})
}

// TestOneBackendsBadItemsStayItsOwn: what one backend lists wrongly is
// refused item by item, and every other item, its own and every other
// backend's, stays listed and callable in both eras:
//
//   - a description with bytes that are not UTF-8 (a Latin-1 "é") is
//     read as U+FFFD, as JSON decoders read it; before, the aggregator
//     passed the bytes on in a protobuf string field and every client's
//     tools/list failed with -32603 (gRPC refuses to send them). A call
//     result with such bytes reaches the caller the same way;
//   - a tool whose inputSchema is missing, null or not an object schema
//     (or whose outputSchema is not one) is not listed: MCP requires
//     object schemas, and clients that check a listing against MCP's
//     schema refuse the whole tools/list for one such tool;
//   - a tool that does not decode (a number no float64 holds, a name
//     that is not a string) is refused alone; before, the whole backend
//     was skipped.
func TestOneBackendsBadItemsStayItsOwn(t *testing.T) {
	const fine = `{"name":"fine","inputSchema":{"type":"object"}}`
	latin1 := rawListing(t, `{"tools":[`+fine+`,{"name":"latin1","description":"caf`+"\xe9"+`","inputSchema":{"type":"object"}}]}`,
		`{"content":[{"type":"text","text":"cr`+"\xe8"+`me"}]}`)
	schemas := rawListing(t, `{"tools":[`+fine+`,{"name":"none"},{"name":"null","inputSchema":null},`+
		`{"name":"text","inputSchema":"anything"},{"name":"untyped","inputSchema":{"properties":{}}},`+
		`{"name":"array","inputSchema":{"type":"array"}},{"name":"out","inputSchema":{"type":"object"},"outputSchema":{"type":"string"}}]}`,
		`{"content":[]}`)
	undecodable := rawListing(t, `{"tools":[`+fine+`,{"name":"big","inputSchema":{"type":"object","properties":{"n":{"type":"number","maximum":1e400}}}},`+
		`{"name":5,"inputSchema":{"type":"object"}}]}`, `{"content":[]}`)
	_, c := startHarness(t, false, func(cfg *config.Config) {
		cfg.Aggregator.Backends = append(cfg.Aggregator.Backends, latin1.config("latin"), schemas.config("schemas"), undecodable.config("odd"))
	})
	want := []string{"weather_forecast", "latin_fine", "latin_latin1", "schemas_fine", "odd_fine"}
	refused := []string{"schemas_none", "schemas_null", "schemas_text", "schemas_untyped", "schemas_array", "schemas_out", "odd_big"}
	testkit.Eventually(t, "every backend's good tools listed", 45*time.Second, func() error {
		names, err := c.listAllTools(t, bobKey)
		if err != nil {
			return err
		}
		if missing := slices.DeleteFunc(slices.Clone(want), func(w string) bool { return slices.Contains(names, w) }); len(missing) > 0 {
			return fmt.Errorf("%v missing from %v", missing, names)
		}
		return nil
	})
	session := c.initialize(t, bobKey)
	for _, legacy := range []bool{false, true} {
		send := func(method, params string, overrides ...string) response {
			if legacy {
				return c.do(t, request{header: legacyHeaders(bobKey, session), body: legacyBody(method, params)})
			}
			return c.modern(t, "/mcp", bobKey, method, strings.TrimSuffix(strings.TrimPrefix(params, "{"), "}"), overrides...)
		}
		r := send("tools/list", "")
		result, rerr, ok := r.rpc()
		if !ok || rerr != nil {
			t.Fatalf("tools/list (legacy %v): %d %.300s", legacy, r.status, r.body)
		}
		var tools []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		}
		if err := json.Unmarshal(result["tools"], &tools); err != nil {
			t.Fatal(err)
		}
		for _, tool := range tools {
			if slices.Contains(refused, tool.Name) {
				t.Errorf("tools/list (legacy %v) lists %s", legacy, tool.Name)
			}
			if tool.Name == "latin_latin1" && tool.Description != "caf\uFFFD" {
				t.Errorf("tools/list (legacy %v): latin_latin1's description is %q, want %q", legacy, tool.Description, "caf\uFFFD")
			}
		}
		r = send("tools/call", `{"name":"latin_fine","arguments":{}}`, "Mcp-Name", "latin_fine")
		result, rerr, ok = r.rpc()
		if !ok || rerr != nil || !strings.Contains(string(result["content"]), "cr\uFFFDme") {
			t.Errorf("tools/call of latin_fine (legacy %v): %d %.300s", legacy, r.status, r.body)
		}
	}
}
