package main

import (
	"os"
	"strings"
	"testing"
)

// testdata/call_tool.log is the debug exporter's output for one call_tool
// request through the optimizer, recorded with make run and the local
// collector (span attributes trimmed). Its spans arrive out of order, as
// they do from several services.
func TestRenderCallToolTrace(t *testing.T) {
	f, err := os.Open("testdata/call_tool.log")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	spans, err := parse(f)
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	render(&out, spans, "", "tools/call")
	want := `trace 688227d85113211c85e75553d3cca6f4
  tools/call  [switchboard-gateway server] 153.55ms
    switchboard.indexer.v1.IndexerService/CheckSession  [switchboard-gateway client] 3.13ms
      switchboard.indexer.v1.IndexerService/CheckSession  [switchboard-indexer server] 1.69ms
        postgresql.query  [switchboard-indexer client] 1.53ms
    switchboard.aggregator.v1.AggregatorService/CallTool  [switchboard-gateway client] 149.62ms
      switchboard.aggregator.v1.AggregatorService/CallTool  [switchboard-aggregator server] 145.89ms
        mcp backend weather  [switchboard-aggregator client] 142.85ms
          demo backend POST /mcp  [switchboard-demo-backend server] 139.32ms
`
	if out.String() != want {
		t.Errorf("render:\n%s\nwant:\n%s", out.String(), want)
	}

	out.Reset()
	render(&out, spans, "", "tools/list")
	if out.Len() != 0 {
		t.Errorf("filter by root name kept a tools/call trace:\n%s", out.String())
	}
	out.Reset()
	render(&out, spans, "0000", "")
	if out.Len() != 0 {
		t.Errorf("filter by trace id kept another trace:\n%s", out.String())
	}
}

func TestParseRejectsBadTimes(t *testing.T) {
	_, err := parse(strings.NewReader("    Trace ID       : abc\n    ID             : 1\n    Start time     : yesterday\n"))
	if err == nil {
		t.Error("a malformed start time was accepted")
	}
}

// TestNamedByMethod: a span named by the MCP conventions, "{method}
// {target}", is found by its method or by its whole name, not by a longer
// method.
func TestNamedByMethod(t *testing.T) {
	for _, tc := range []struct {
		name, want string
		ok         bool
	}{
		{"tools/call weather_forecast", "tools/call", true},
		{"tools/call weather_forecast", "tools/call weather_forecast", true},
		{"tools/call", "tools/call", true},
		{"tools/callx", "tools/call", false},
		{"tools/list", "tools/call", false},
	} {
		if got := named(tc.name, tc.want); got != tc.ok {
			t.Errorf("named(%q, %q) = %v", tc.name, tc.want, got)
		}
	}
}
