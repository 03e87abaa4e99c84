package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// codeBackend is the weather demo backend's tools that the code mode
// tests and the evaluation use.
const codeBackend = `
tools:
  - {name: forecast_chart, description: "Five days of highs and lows for a city.", behaviour: forecast}
  - {name: add_temperatures, description: "Add two temperatures a and b.", behaviour: add}
  - {name: confirm_alert, description: "Send a weather alert, after confirming.", behaviour: confirm}
`

// startCodeMode is a cluster whose whole catalog offers code mode, with
// a server that does not.
func startCodeMode(t *testing.T) *harness.Cluster {
	return harness.Start(t, harness.Options{NoIndexer: true, Backends: []harness.Backend{{Name: "weather", Spec: codeBackend}},
		Configure: func(cfg *config.Config) {
			cfg.Aggregator.CodeMode = config.CodeMode{Enabled: true, MaxCalls: 30}
			no := false
			cfg.Servers = []config.Server{{Name: "plain", Backends: []string{"weather"}, CodeMode: &no}}
		},
	})
}

// runCode calls run_code and returns its structured content and whether
// it is an error result.
func runCode(t *testing.T, cs *mcp.ClientSession, program string) (map[string]any, bool, string) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "run_code", Arguments: map[string]any{"program": program}})
	if err != nil {
		t.Fatalf("run_code: %v", err)
	}
	sc, _ := res.StructuredContent.(map[string]any)
	text := ""
	if len(res.Content) > 0 {
		text = res.Content[0].(*mcp.TextContent).Text
	}
	return sc, res.IsError, text
}

// TestCodeModeThroughTheGateway: in both eras, the optimizer view offers
// run_code beside find_tool where code mode is on (not on a server that
// turns it off); a program calls tools by name and returns what it
// computed; an error names its line; a tool that asks for input fails its
// call clearly.
func TestCodeModeThroughTheGateway(t *testing.T) {
	c := startCodeMode(t)
	base := strings.TrimSuffix(c.MCPURL, "/mcp")
	for _, era := range []string{harness.Modern, harness.Legacy} {
		cs := harness.Connect(t, base+"/mcp/optimized", era)
		names := harness.ToolNames(t, cs)
		if strings.Join(names, ",") != "find_tool,call_tool,run_code" {
			t.Fatalf("era %q: optimizer tools %v", era, names)
		}
		if plain := harness.ToolNames(t, harness.Connect(t, base+"/mcp/plain/optimized", era)); strings.Join(plain, ",") != "find_tool,call_tool" {
			t.Errorf("era %q: a server without code mode lists %v", era, plain)
		}

		sc, isErr, text := runCode(t, cs, `
best = None
for city in ["Oslo", "Lisbon", "Rome", "Lima"]:
    f = weather_forecast_chart(city=city)
    high = max([d["highC"] for d in f["days"]])
    if best == None or high > best[1]:
        best = (city, high)
total = weather_add_temperatures(a=best[1], b=1)["sum"]
result = {"city": best[0], "highC": best[1], "plusOne": total}
`)
		want := warmest(t, harness.Connect(t, c.MCPURL, era), []string{"Oslo", "Lisbon", "Rome", "Lima"})
		got, _ := sc["result"].(map[string]any)
		if isErr || got["city"] != want.city || got["highC"] != float64(want.high) || got["plusOne"] != float64(want.high+1) || sc["calls"] != float64(5) {
			t.Errorf("era %q: %v (%s), want %+v", era, sc, text, want)
		}

		sc, isErr, text = runCode(t, cs, "x = 1\ny = weather_forecast_chart(town=\"Oslo\")\n")
		if !isErr || sc["line"] != float64(2) || !strings.HasPrefix(text, "line 2: weather_forecast_chart failed: ") {
			t.Errorf("era %q: a failing call: %v %q", era, sc, text)
		}
		// A program over its bound fails as a call, naming the bound; it
		// is not answered as a tool that does not exist.
		_, isErr, text = runCode(t, cs, "result = 1\n"+strings.Repeat("#", 17<<10))
		if !isErr || !strings.Contains(text, "maxProgramBytes") {
			t.Errorf("era %q: a program of 17 KiB: error %v, %q", era, isErr, text)
		}
		// A tool that asks for input: its backend is told the client can
		// answer no questions, so it refuses the call (the capability it
		// needs named, on every route), or asks anyway and the aggregator
		// fails the call; either way the program's call fails, saying
		// why, and try_call may catch it.
		sc, isErr, text = runCode(t, cs, "v, err = try_call(weather_confirm_alert, text=\"storm\")\nresult = err\n")
		msg, _ := sc["result"].(string)
		if isErr || !strings.HasPrefix(msg, "weather_confirm_alert ") ||
			!strings.Contains(msg, "missing required client capability: elicitation") && !strings.Contains(msg, "asked for input (input_required), which a program cannot give") {
			t.Errorf("era %q: a tool that asks: %v %q", era, sc, text)
		}
	}
	if n := c.Calls(t, "weather")["tools/call confirm_alert"]; n != 2 {
		t.Errorf("confirm_alert was called %d times, want once per era", n)
	}
}

type warmestCity struct {
	city string
	high int
}

// warmest is the warmest of cities as a client finds it calling the
// forecast itself, once per city.
func warmest(t *testing.T, cs *mcp.ClientSession, cities []string) warmestCity {
	t.Helper()
	var best warmestCity
	for _, city := range cities {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "weather_forecast_chart", Arguments: map[string]any{"city": city}})
		if err != nil || res.IsError {
			t.Fatalf("forecast %s: %v %v", city, res, err)
		}
		days := res.StructuredContent.(map[string]any)["days"].([]any)
		high := 0
		for _, d := range days {
			high = max(high, int(d.(map[string]any)["highC"].(float64)))
		}
		if best.city == "" || high > best.high {
			best = warmestCity{city, high}
		}
	}
	return best
}

// twentyCities are the evaluation's cities.
var twentyCities = []string{"Oslo", "Lisbon", "Rome", "Lima", "Tokyo", "Nairobi", "Quito", "Reykjavik", "Sydney", "Toronto",
	"Madrid", "Cairo", "Delhi", "Seoul", "Dublin", "Athens", "Havana", "Perth", "Vienna", "Denver"}

func cityList(cities []string) string {
	quoted := make([]string, len(cities))
	for i, c := range cities {
		quoted[i] = fmt.Sprintf("%q", c)
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}

// evaluationTask is one multi-step task of the evaluation: the calls a
// client makes for it one at a time, and the program that does it in one.
type evaluationTask struct {
	name    string
	direct  []map[string]any // forecast_chart arguments, one call each
	program string
}

var evaluationTasks = []evaluationTask{
	{"The warmest of 20 cities", forecastCalls(twentyCities), `
best = None
for city in ` + cityList(twentyCities) + `:
    high = max([d["highC"] for d in weather_forecast_chart(city=city)["days"]])
    if best == None or high > best[1]:
        best = (city, high)
result = {"city": best[0], "highC": best[1]}
`},
	{"The five-day mean high of 5 cities", forecastCalls(twentyCities[:5]), `
result = {}
for city in ` + cityList(twentyCities[:5]) + `:
    days = weather_forecast_chart(city=city)["days"]
    result[city] = sum([d["highC"] for d in days]) / len(days)
`},
	{"Which of 20 cities have a day at 10 °C or below", forecastCalls(twentyCities), `
result = [c for c in ` + cityList(twentyCities) + ` if min([d["lowC"] for d in weather_forecast_chart(city=c)["days"]]) <= 10]
`},
}

func forecastCalls(cities []string) []map[string]any {
	out := make([]map[string]any, len(cities))
	for i, c := range cities {
		out[i] = map[string]any{"city": c}
	}
	return out
}

// tokens estimates a text's tokens as the indexer and the load reports
// do: bytes / 4.
func tokens(text string) int { return (len(text) + 3) / 4 }

// TestCodeModeEvaluation measures, for each evaluation task over the
// demo weather backend, what a model receives and how many round trips it
// takes calling the tools one at a time and with one run_code, and checks
// docs/code-mode.md reports exactly that (the forecasts are the same on
// every run, so the figures are).
func TestCodeModeEvaluation(t *testing.T) {
	c := startCodeMode(t)
	direct := harness.Connect(t, c.MCPURL, harness.Modern)
	code := harness.Connect(t, strings.TrimSuffix(c.MCPURL, "/mcp")+"/mcp/optimized", harness.Modern)
	var table strings.Builder
	table.WriteString("| Task | Tool calls | One at a time: round trips | One at a time: tokens received | Code mode: round trips | Code mode: tokens received | Code mode: program tokens |\n")
	table.WriteString("|---|---:|---:|---:|---:|---:|---:|\n")
	for _, task := range evaluationTasks {
		received := 0
		for _, args := range task.direct {
			res, err := direct.CallTool(t.Context(), &mcp.CallToolParams{Name: "weather_forecast_chart", Arguments: args})
			if err != nil || res.IsError {
				t.Fatalf("%s: %v %v", task.name, res, err)
			}
			received += tokens(res.Content[0].(*mcp.TextContent).Text)
		}
		sc, isErr, text := runCode(t, code, task.program)
		if isErr || sc["calls"] != float64(len(task.direct)) {
			t.Fatalf("%s: %v %q", task.name, sc, text)
		}
		fmt.Fprintf(&table, "| %s | %d | %d | %d | 1 | %d | %d |\n", task.name, len(task.direct), len(task.direct), received, tokens(text), tokens(task.program))
	}
	doc := readRepoFile(t, "docs/code-mode.md")
	const start, end = "<!-- evaluation -->\n", "<!-- /evaluation -->"
	i, j := strings.Index(doc, start), strings.Index(doc, end)
	if i < 0 || j < i {
		t.Fatalf("docs/code-mode.md has no %q ... %q section", start, end)
	}
	if got := doc[i+len(start) : j]; got != table.String() {
		t.Errorf("docs/code-mode.md's evaluation is not what was measured; measured:\n%s", table.String())
	}
}

func readRepoFile(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(harness.RepoRoot(t), path))
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

// TestRunCodeWhereCodeModeIsOffIsAnUnknownTool: where code mode is off,
// run_code is answered as a tool that does not exist, in both eras,
// whatever its arguments. Without a program it was a tool result saying
// run_code needs one (the gateway checked the arguments first), which
// showed the tool there; with one, a message of its own.
func TestRunCodeWhereCodeModeIsOffIsAnUnknownTool(t *testing.T) {
	c := startCodeMode(t)
	base := strings.TrimSuffix(c.MCPURL, "/mcp")
	for _, era := range []string{harness.Modern, harness.Legacy} {
		cs := harness.Connect(t, base+"/mcp/plain/optimized", era)
		answer := func(name string, args map[string]any) string {
			res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
			if err != nil {
				return "protocol error: " + strings.ReplaceAll(err.Error(), name, "<name>")
			}
			return fmt.Sprintf("a result (isError %v): %v", res.IsError, res.Content)
		}
		unknown := answer("no_such_tool", map[string]any{})
		if !strings.HasPrefix(unknown, "protocol error") {
			t.Fatalf("era %q: an unknown tool: %s", era, unknown)
		}
		for name, args := range map[string]map[string]any{"with a program": {"program": "result = 1"}, "without one": {}} {
			if got := answer("run_code", args); got != unknown {
				t.Errorf("era %q: run_code %s: %s; an unknown tool: %s", era, name, got, unknown)
			}
		}
	}
}

// TestCodeModeTimeoutErrorOutlivesTheRequest: with the shortest
// gateway.timeouts.request the configuration accepts for a code mode
// timeout (the timeout and config.CodeRunMargin), a program that runs to
// its timeout gets its own error back, naming the bound, its key and
// what it printed. With the two equal (accepted once), the gateway's
// request timeout, started first, cut every such run: the model read
// "run_code: the request timed out", nothing more.
func TestCodeModeTimeoutErrorOutlivesTheRequest(t *testing.T) {
	const timeout = 2 * time.Second
	c := harness.Start(t, harness.Options{NoIndexer: true, Backends: []harness.Backend{{Name: "alpha"}},
		Configure: func(cfg *config.Config) {
			cfg.Aggregator.CodeMode = config.CodeMode{Enabled: true, Timeout: config.Duration(timeout)}
			cfg.Gateway.Timeouts.Request = config.Duration(timeout + config.CodeRunMargin)
		},
	})
	cs := harness.Connect(t, strings.TrimSuffix(c.MCPURL, "/mcp")+"/mcp/optimized", harness.Modern)
	sc, isErr, text := runCode(t, cs, "print(\"before the call\")\nresult = alpha_sleep(duration=\"30s\")\n")
	printed, _ := sc["printed"].([]any)
	if !isErr || sc["bound"] != "timeout" || !strings.Contains(text, "aggregator.codeMode.timeout") || sc["calls"] != 1.0 || len(printed) != 1 {
		t.Errorf("a program that ran to its timeout: %q %v, want its error naming aggregator.codeMode.timeout, its call and printed line", text, sc)
	}
}

// TestCodeModeMemoryBoundIsNamed: a program that exhausts its runner's
// memory is stopped at maxMemory with an error naming the key, in the
// aggregator's own runner too. A json.decode of a deeply nested text
// grew a stack the watchdog does not count until the Go runtime, at the
// process's data limit, died by a fault in its collector: the model read
// "the code runner stopped before the program ended", no bound, no key.
func TestCodeModeMemoryBoundIsNamed(t *testing.T) {
	c := startCodeMode(t)
	cs := harness.Connect(t, strings.TrimSuffix(c.MCPURL, "/mcp")+"/mcp/optimized", harness.Modern)
	for _, depth := range []int{200000, 250000, 300000} {
		sc, isErr, text := runCode(t, cs, fmt.Sprintf("result = len(json.decode(\"[\" * %d + \"]\" * %d))\n", depth, depth))
		if !isErr || sc["bound"] != "maxMemory" || !strings.Contains(text, "aggregator.codeMode.maxMemory") {
			t.Errorf("depth %d: %q (bound %v), want the program stopped at aggregator.codeMode.maxMemory", depth, text, sc["bound"])
		}
	}
}
