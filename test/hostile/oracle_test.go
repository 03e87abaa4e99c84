package hostile

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// TestNoExistenceOracle: a tool the caller may not call is answered
// exactly like a tool that does not exist, whatever Mcp-Param-* headers
// the request carries. alice may not use the notes backend, whose
// secret_report mirrors "region" (and the nested "filter.owner") into
// headers; notes_no_such_report does not exist. Each pair of requests
// differs only in the tool's name, and their answers may differ only
// there: same HTTP status, same code, same message and data once the name
// is taken out. The header rules are checked for a tool alice may call,
// so the pairs cannot agree only because no header is ever checked.
func TestNoExistenceOracle(t *testing.T) {
	s := startStack(t)
	c := newClient(s)
	const denied, missing = "notes_secret_report", "notes_no_such_report"
	listsBefore := s.gatewayRPCs(t, "ListTools")

	// bob sees the tool, so it exists and its header bindings are known
	// to the aggregator before alice asks.
	r := c.modern(t, "/mcp", bobKey, "tools/call", `"name":"`+denied+`","arguments":{"region":"north","filter":{"owner":"bob"}}`,
		"Mcp-Name", denied, "Mcp-Param-Region", "north", "Mcp-Param-Owner", "bob")
	if result, rerr, ok := r.rpc(); r.status != http.StatusOK || !ok || rerr != nil || result["content"] == nil {
		t.Fatalf("bob's call of %s: %d %s", denied, r.status, r.body)
	}

	variants := []struct {
		name    string
		args    string
		headers []string
	}{
		{"no parameter headers", `{"region":"north"}`, nil},
		{"matching headers", `{"region":"north","filter":{"owner":"alice"}}`, []string{"Mcp-Param-Region", "north", "Mcp-Param-Owner", "alice"}},
		{"mismatching header", `{"region":"north"}`, []string{"Mcp-Param-Region", "south"}},
		{"mismatching nested header", `{"region":"north","filter":{"owner":"alice"}}`, []string{"Mcp-Param-Region", "north", "Mcp-Param-Owner", "mallory"}},
		{"header for an absent argument", `{}`, []string{"Mcp-Param-Region", "north"}},
		{"header the tool does not declare", `{"region":"north"}`, []string{"Mcp-Param-Region", "north", "Mcp-Param-Unknown", "x"}},
		{"base64 header", `{"region":"north"}`, []string{"Mcp-Param-Region", b64("north")}},
		{"no arguments", ``, []string{"Mcp-Param-Region", "north"}},
	}
	for _, v := range variants {
		t.Run("Modern "+v.name, func(t *testing.T) {
			call := func(tool string) response {
				params := `"name":"` + tool + `"`
				if v.args != "" {
					params += `,"arguments":` + v.args
				}
				return c.modern(t, "/mcp", aliceKey, "tools/call", params, append([]string{"Mcp-Name", tool}, v.headers...)...)
			}
			sameAnswer(t, call(denied), denied, call(missing), missing)
		})
	}

	aliceSession := c.initialize(t, aliceKey)
	for _, v := range variants {
		if v.args == "" {
			continue
		}
		t.Run("Legacy "+v.name, func(t *testing.T) {
			call := func(tool string) response {
				hs := legacyHeaders(aliceKey, aliceSession, v.headers...)
				return c.do(t, request{header: hs, body: legacyBody("tools/call", `{"name":"`+tool+`","arguments":`+v.args+`}`)})
			}
			sameAnswer(t, call(denied), denied, call(missing), missing)
		})
	}

	// The same header rules do apply to a tool alice may call: a mismatch
	// there is a header mismatch (-32020), not "unknown tool".
	t.Run("headers are checked where the caller may call", func(t *testing.T) {
		r := c.modern(t, "/mcp", aliceKey, "tools/call", `"name":"weather_regional_report","arguments":{"region":"north"}`,
			"Mcp-Name", "weather_regional_report", "Mcp-Param-Region", "south")
		if _, rerr, ok := r.rpc(); r.status != http.StatusBadRequest || !ok || rerr == nil || rerr.Code != -32020 {
			t.Fatalf("mismatching header on an allowed tool: %d %s", r.status, r.body)
		}
	})
	// Nested bindings are checked as go-sdk v1.8.0's server checks them:
	// filter.owner is mirrored into Mcp-Param-Owner.
	t.Run("nested header rules", func(t *testing.T) {
		call := func(owner string) response {
			return c.modern(t, "/mcp", bobKey, "tools/call", `"name":"`+denied+`","arguments":{"region":"north","filter":{"owner":"bob"}}`,
				"Mcp-Name", denied, "Mcp-Param-Region", "north", "Mcp-Param-Owner", owner)
		}
		if r := call("bob"); r.status != http.StatusOK {
			t.Errorf("matching nested header: %d %s", r.status, r.body)
		}
		if r := call("mallory"); r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "-32020") {
			t.Errorf("mismatching nested header: %d %s, want 400 with -32020", r.status, r.body)
		}
		r := c.modern(t, "/mcp", bobKey, "tools/call", `"name":"`+denied+`","arguments":{"region":"north","filter":{"owner":"bob"}}`,
			"Mcp-Name", denied, "Mcp-Param-Region", "north")
		if r.status != http.StatusBadRequest || !strings.Contains(string(r.body), "-32020") {
			t.Errorf("missing nested header: %d %s, want 400 with -32020", r.status, r.body)
		}
	})

	// Not one of these calls made the gateway list the catalog: header
	// rules are the aggregator's, checked from its snapshot.
	if after := s.gatewayRPCs(t, "ListTools"); after != listsBefore {
		t.Errorf("the gateway listed tools %d times during calls", after-listsBefore)
	}
	s.checkAlive(t)
}

// gatewayRPCs is how many AggregatorService RPCs named method the
// aggregator has handled for the gateway's credential, from its metrics.
func (s *stack) gatewayRPCs(t *testing.T, method string) int {
	t.Helper()
	resp, err := http.Get(s.aggregatorOps + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	want := `method="/switchboard.aggregator.v1.AggregatorService/` + method + `"`
	n, seen := 0, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "switchboard_grpc_server_handled_total{") {
			continue
		}
		seen = true
		if !strings.Contains(line, want) || !strings.Contains(line, `caller="gateway"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		n += int(v)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	if !seen {
		t.Fatal("the aggregator exports no switchboard_grpc_server_handled_total")
	}
	return n
}

// sameAnswer fails unless a and b are the same answer once their tools'
// names (aName in a, bName in b) are replaced by one placeholder, and that
// answer is an error (a denied tool must never be served).
func sameAnswer(t *testing.T, a response, aName string, b response, bName string) {
	t.Helper()
	_, aErr, aOK := a.rpc()
	_, bErr, bOK := b.rpc()
	if !aOK || aErr == nil {
		t.Fatalf("the denied tool was not refused: %d %s", a.status, a.body)
	}
	if !bOK || bErr == nil {
		t.Fatalf("the missing tool was not refused: %d %s", b.status, b.body)
	}
	if a.status != b.status {
		t.Errorf("LEAK: HTTP status %d for the denied tool, %d for a missing one", a.status, b.status)
	}
	if aErr.Code != bErr.Code {
		t.Errorf("LEAK: code %d (%s) for the denied tool, %d (%s) for a missing one", aErr.Code, aErr.Message, bErr.Code, bErr.Message)
	}
	const placeholder = "<tool>"
	if am, bm := strings.ReplaceAll(aErr.Message, aName, placeholder), strings.ReplaceAll(bErr.Message, bName, placeholder); am != bm {
		t.Errorf("LEAK: message %q for the denied tool, %q for a missing one", am, bm)
	}
	if ad, bd := canonicalData(t, aErr.Data, aName, placeholder), canonicalData(t, bErr.Data, bName, placeholder); ad != bd {
		t.Errorf("LEAK: data %s for the denied tool, %s for a missing one", ad, bd)
	}
	for _, h := range []string{"Content-Type", "Www-Authenticate", "Retry-After"} {
		if a.header.Get(h) != b.header.Get(h) {
			t.Errorf("LEAK: header %s %q for the denied tool, %q for a missing one", h, a.header.Get(h), b.header.Get(h))
		}
	}
}

// canonicalData is data re-encoded (sorted keys) with name replaced.
func canonicalData(t *testing.T, data json.RawMessage, name, placeholder string) string {
	t.Helper()
	if len(data) == 0 {
		return ""
	}
	var v any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("error data is not JSON: %s", data)
	}
	out, _ := json.Marshal(v)
	return strings.ReplaceAll(string(out), name, placeholder)
}
