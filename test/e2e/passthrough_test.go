package e2e

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/mcpspec"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// vendorSpec lists one item of every kind; the demo backend adds the
// x-acme member, which go-sdk does not model, to each of them and to every
// tool result it returns.
const vendorSpec = `
tools:
  - {name: echo, description: Echo the arguments., behaviour: echo}
resources:
  - {uri: "{{name}}://readme", name: readme, mimeType: text/plain, text: "readme"}
resourceTemplates:
  - {uriTemplate: "{{name}}://items/{id}", name: item, text: "{uri}"}
prompts:
  - {name: greet, text: "Hello"}
extensions:
  x-acme: {tier: gold, n: [1, 2.5, null]}
`

// vendorMember is the member as the demo backend writes it.
const vendorMember = `"x-acme":{"n":[1,2.5,null],"tier":"gold"}`

// TestFieldsGoSDKDoesNotModelReachClients: through the real processes,
// members a backend adds to its listed tools, resources, templates and
// prompts and to its tool results reach Modern and Legacy clients intact,
// from a backend the aggregator speaks Modern to and from a Legacy-only
// one. The clients read the gateway's raw bytes: a go-sdk client would
// drop the members itself.
func TestFieldsGoSDKDoesNotModelReachClients(t *testing.T) {
	c := harness.Start(t, harness.Options{NoIndexer: true, Backends: []harness.Backend{
		{Name: "dual", Spec: strings.ReplaceAll(vendorSpec, "{{name}}", "dual")},
		{Name: "old", Spec: strings.ReplaceAll(vendorSpec, "{{name}}", "old"), Stateful: true},
	}})
	for _, era := range []string{"modern", "legacy"} {
		t.Run(era, func(t *testing.T) {
			cl := &rawClient{t: t, url: c.MCPURL}
			if era == "legacy" {
				cl.initialize()
			}
			lists := []struct{ method, member, key string }{
				{"tools/list", "tools", "name"},
				{"resources/list", "resources", "uri"},
				{"resources/templates/list", "resourceTemplates", "uriTemplate"},
				{"prompts/list", "prompts", "name"},
			}
			for _, l := range lists {
				items := cl.listAll(l.method, l.member)
				if len(items) != 2 {
					t.Fatalf("%s: %d items, want one per backend: %s", l.method, len(items), items)
				}
				for _, item := range items {
					if !bytes.Contains(item, []byte(vendorMember)) {
						t.Errorf("%s: item lost the backend's x-acme member: %s", l.method, item)
					}
				}
			}
			for _, tool := range []string{"dual_echo", "old_echo"} {
				result := cl.request("tools/call", `"name":"`+tool+`","arguments":{"era":"`+era+`"}`, "Mcp-Name", tool)
				if !bytes.Contains(result, []byte(vendorMember)) {
					t.Errorf("%s: result lost the backend's x-acme member: %s", tool, result)
				}
				if !bytes.Contains(result, []byte(`\"era\":\"`+era+`\"`)) && !bytes.Contains(result, []byte(`"era":"`+era+`"`)) {
					t.Errorf("%s: result does not echo the arguments: %s", tool, result)
				}
			}
		})
	}
}

// rawClient speaks MCP over plain HTTP and hands back result bytes; a
// Legacy client has a session, a Modern one sends _meta.
type rawClient struct {
	t       *testing.T
	url     string
	session string
	id      int
}

const rawModernMeta = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"raw","version":"1"}}`

func (c *rawClient) initialize() {
	c.t.Helper()
	resp := c.post([]byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`), nil)
	c.session = resp.Header.Get("Mcp-Session-Id")
	resp.Body.Close()
	if c.session == "" {
		c.t.Fatalf("initialize: no session (HTTP %d)", resp.StatusCode)
	}
	resp = c.post([]byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`), nil)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		c.t.Fatalf("notifications/initialized: HTTP %d", resp.StatusCode)
	}
}

// request sends method with params (members, without braces) and returns
// the result object's bytes; headers are name, value pairs.
func (c *rawClient) request(method, params string, headers ...string) []byte {
	c.t.Helper()
	c.id++
	var body string
	var hs []string
	if c.session == "" {
		if params != "" {
			params = "," + params
		}
		body = `{"jsonrpc":"2.0","id":` + strconv.Itoa(c.id) + `,"method":"` + method + `","params":{` + rawModernMeta + params + `}}`
		hs = append([]string{"Mcp-Protocol-Version", "2026-07-28", "Mcp-Method", method}, headers...)
	} else {
		body = `{"jsonrpc":"2.0","id":` + strconv.Itoa(c.id) + `,"method":"` + method + `","params":{` + params + `}}`
		hs = []string{"Mcp-Protocol-Version", "2025-11-25"}
	}
	resp := c.post([]byte(body), hs)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	msg := mcpspec.LastMessage(resp.Header.Get("Content-Type"), raw)
	var env struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	if err := json.Unmarshal(msg, &env); err != nil || env.Result == nil {
		c.t.Fatalf("%s: HTTP %d, not a result: %s", method, resp.StatusCode, msg)
	}
	return env.Result
}

// listAll walks every page of a list and returns its items' bytes.
func (c *rawClient) listAll(method, member string) []json.RawMessage {
	c.t.Helper()
	var all []json.RawMessage
	cursor := ""
	for range 100 {
		params := ""
		if cursor != "" {
			params = `"cursor":"` + cursor + `"`
		}
		var page map[string]json.RawMessage
		if err := json.Unmarshal(c.request(method, params), &page); err != nil {
			c.t.Fatal(err)
		}
		var items []json.RawMessage
		if err := json.Unmarshal(page[member], &items); err != nil {
			c.t.Fatalf("%s: %s: %v", method, member, err)
		}
		all = append(all, items...)
		cursor = ""
		if next, ok := page["nextCursor"]; ok {
			_ = json.Unmarshal(next, &cursor)
		}
		if cursor == "" {
			return all
		}
	}
	c.t.Fatalf("%s never ends", method)
	return nil
}

func (c *rawClient) post(body []byte, headers []string) *http.Response {
	c.t.Helper()
	req, err := http.NewRequestWithContext(c.t.Context(), http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp
}
