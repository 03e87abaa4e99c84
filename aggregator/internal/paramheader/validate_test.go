package paramheader

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// validateCases are inputSchemas, each with whether go-sdk v1.8.0's client
// keeps a tool that has it.
var validateCases = []struct {
	name   string
	schema string
	valid  bool
}{
	{"no annotations", `{"type":"object","properties":{"a":{"type":"string"}}}`, true},
	{"string, integer and boolean", schema[:strings.Index(schema, `"bad"`)] + `"z":{"type":"string"}}}`, true},
	{"on an object", `{"type":"object","properties":{"a":{"type":"object","x-mcp-header":"A"}}}`, false},
	{"on a number", `{"type":"object","properties":{"a":{"type":"number","x-mcp-header":"A"}}}`, false},
	{"without a type", `{"type":"object","properties":{"a":{"x-mcp-header":"A"}}}`, false},
	{"empty name", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":""}}}`, false},
	{"not a string", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":7}}}`, false},
	{"not a token", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"A B"}}}`, false},
	{"non-ASCII", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"Ré"}}}`, false},
	{"duplicate ignoring case", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"Zone"},"b":{"type":"string","x-mcp-header":"zone"}}}`, false},
	{"nested duplicate", `{"type":"object","properties":{"a":{"type":"string","x-mcp-header":"Zone"},"t":{"type":"object","properties":{"z":{"type":"string","x-mcp-header":"ZONE"}}}}}`, false},
	{"nested invalid", `{"type":"object","properties":{"t":{"type":"object","properties":{"z":{"type":"array","x-mcp-header":"Z"}}}}}`, false},
	{"type array: nothing decodes, nothing binds", `{"type":"object","properties":{"a":{"type":["string","null"],"x-mcp-header":"A"}}}`, true},
	{"annotation in capitals is not one", `{"type":"object","properties":{"a":{"type":"object","X-MCP-Header":"A"}}}`, true},
}

func TestValidate(t *testing.T) {
	for _, tc := range validateCases {
		if err := Validate([]byte(tc.schema)); (err == nil) != tc.valid {
			t.Errorf("%s: Validate = %v, want valid %v", tc.name, err, tc.valid)
		}
	}
}

// TestValidateAgreesWithGoSDK lists every case's tool to a real go-sdk
// v1.8.0 client, from a hand-written server that sends the schemas as
// they are, and checks that the client keeps exactly the tools Validate
// accepts.
func TestValidateAgreesWithGoSDK(t *testing.T) {
	var tools []json.RawMessage
	for i, tc := range validateCases {
		tools = append(tools, json.RawMessage(`{"name":"`+caseTool(i)+`","inputSchema":`+tc.schema+`}`))
	}
	list, _ := json.Marshal(map[string]any{"tools": tools})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		_ = json.Unmarshal(body, &req)
		if req.ID == nil {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		var result string
		switch req.Method {
		case "initialize":
			result = `{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"raw","version":"1"}}`
		case "tools/list":
			result = string(list)
		default:
			result = `{}`
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(req.ID)+`,"result":`+result+`}`)
	}))
	defer srv.Close()
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil)
	cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: srv.URL, DisableStandaloneSSE: true}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	res, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var kept, want []string
	for _, tool := range res.Tools {
		kept = append(kept, tool.Name)
	}
	for i, tc := range validateCases {
		if Validate([]byte(tc.schema)) == nil {
			want = append(want, caseTool(i))
		}
	}
	slices.Sort(kept)
	slices.Sort(want)
	if !slices.Equal(kept, want) {
		t.Fatalf("go-sdk keeps %v, Validate accepts %v", kept, want)
	}
}

// caseTool names the tool of case i.
func caseTool(i int) string { return string(rune('a'+i/26)) + string(rune('a'+i%26)) }

// TestExtractReadsAsGoSDK: bindings come from the members go-sdk reads, as
// it reads them.
func TestExtractReadsAsGoSDK(t *testing.T) {
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":"string","X-MCP-Header":"A"}}}`,
		`{"type":"object","Properties":{"a":{"type":"string","x-mcp-header":"A"}}}`,
		`{"type":"object","properties":{"a":{"type":["string","null"],"x-mcp-header":"A"}}}`,
	} {
		if got := Extract([]byte(s)); got != nil {
			t.Errorf("Extract(%s) = %+v, want no bindings", s, got)
		}
	}
}
