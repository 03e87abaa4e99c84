package codemode

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// The test binary is its own code runner, as the aggregator's binary is.
func TestMain(m *testing.M) {
	if slices.Contains(os.Args, RunnerFlag) {
		os.Exit(RunnerMain(os.Args[1:]))
	}
	os.Exit(m.Run())
}

func testBounds() Bounds {
	return Bounds{MaxSteps: 1_000_000, Timeout: 10 * time.Second, MaxMemory: 64 << 20, MaxCalls: 10, MaxOutputBytes: 4096}
}

var testPool = sync.OnceValue(func() *Pool { return NewPool([]string{os.Args[0], RunnerFlag}, 2) })

// weather answers like a forecast tool: {"city": c, "highC": len(c)*3}; a
// city named "error" fails.
func weather(calls *[]string) CallFunc {
	var mu sync.Mutex
	return func(_ context.Context, tool string, args json.RawMessage) Answer {
		mu.Lock()
		*calls = append(*calls, tool+" "+string(args))
		mu.Unlock()
		var in struct{ City string }
		_ = json.Unmarshal(args, &in)
		if !slices.Contains([]string{"weather_forecast", "odd-name", "echo"}, tool) {
			return Answer{Error: fmt.Sprintf("no tool named %q is available to you (find tools with find_tool)", tool)}
		}
		if in.City == "error" {
			return Answer{Error: "weather_forecast failed: no such city"}
		}
		v, _ := json.Marshal(map[string]any{"city": in.City, "highC": len(in.City) * 3})
		return Answer{Value: v}
	}
}

func runProgram(t *testing.T, program string, b Bounds, call CallFunc) Result {
	t.Helper()
	res, err := testPool().Run(t.Context(), "alice", program, []string{"weather_forecast", "odd-name", "echo"}, b, call)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestProgramCallsToolsAndReturnsItsResult(t *testing.T) {
	var calls []string
	res := runProgram(t, `
cities = ["Oslo", "Lisbon", "Rome"]
best = None
for c in cities:
    f = weather_forecast(city=c)
    if best == None or f["highC"] > best["highC"]:
        best = f
print("checked", len(cities), sum([1, 2, 3]), sum([0.5], 1))
other = call("odd-name", n=1)
result = {"warmest": best["city"], "other": other["city"]}
`, testBounds(), weather(&calls))
	if res.Error != "" {
		t.Fatalf("error at line %d: %s", res.Line, res.Error)
	}
	if string(res.Value) != `{"other":"","warmest":"Lisbon"}` {
		t.Errorf("value %s", res.Value)
	}
	if want := []string{`weather_forecast {"city":"Oslo"}`, `weather_forecast {"city":"Lisbon"}`, `weather_forecast {"city":"Rome"}`, `odd-name {"n":1}`}; !slices.Equal(calls, want) {
		t.Errorf("calls %q, want %q", calls, want)
	}
	if res.Calls != 4 || res.Steps == 0 || !slices.Equal(res.Printed, []string{"checked 3 6 1.5"}) {
		t.Errorf("calls %d steps %d printed %q", res.Calls, res.Steps, res.Printed)
	}
}

func TestErrorsCarryTheLineAndToolErrorsCanBeCaught(t *testing.T) {
	var calls []string
	res := runProgram(t, `
v, err = try_call(weather_forecast, city="error")
w, err2 = try_call(weather_forecast, city="Oslo")
result = {"v": v, "err": err, "w": w["city"], "err2": err2}
`, testBounds(), weather(&calls))
	if res.Error != "" || string(res.Value) != `{"err":"weather_forecast failed: no such city","err2":null,"v":null,"w":"Oslo"}` {
		t.Fatalf("result %s, error %q", res.Value, res.Error)
	}
	for program, want := range map[string]struct {
		line int
		msg  string
	}{
		"x = 1\nweather_forecast(city=\"error\")\n":     {2, "weather_forecast failed: no such city"},
		"x = 1\n\nweather_forecast(\"Oslo\")\n":         {3, "pass the tool's arguments by name"},
		"x = 1\ny = nope(1)\n":                          {2, "undefined: nope"},
		"def f(:\n":                                     {1, "got ':'"},
		"result = call(\"secret_tool\")\n":              {1, `no tool named "secret_tool" is available to you`},
		"def f():\n    return 1 / 0\nresult = f()\n":    {2, "division by zero"},
		"result = weather_forecast(city=lambda x: x)\n": {1, "cannot be JSON"},
	} {
		res := runProgram(t, program, testBounds(), weather(&calls))
		if res.Line != want.line || !strings.Contains(res.Error, want.msg) || res.Bound != "" {
			t.Errorf("%q: line %d, error %q; want line %d, %q", program, res.Line, res.Error, want.line, want.msg)
		}
	}
}

// Each bound stops the program with an error that names it, try_call
// cannot catch one, and the pool keeps working after each.
func TestBoundsStopPrograms(t *testing.T) {
	var calls []string
	b := testBounds()
	b.MaxSteps, b.MaxCalls, b.MaxOutputBytes = 10_000, 3, 1000
	slow := b
	slow.MaxSteps, slow.Timeout = 1<<62, 300*time.Millisecond
	cases := []struct {
		name, program string
		bounds        Bounds
		bound, msg    string
	}{
		{"steps", "x = 0\nwhile True:\n    x += 1\n", b, BoundSteps, "more than 10000 steps (aggregator.codeMode.maxSteps)"},
		{"time", "x = 0\nwhile True:\n    x += 1\n", slow, BoundTime, "longer than 300ms (aggregator.codeMode.timeout)"},
		// A loop inside a built-in is one step of the interpreter's, which
		// once let these run until the runner was killed.
		{"steps inside a built-in", "result = max(range(1 << 50))\n", b, BoundSteps, "more than 10000 steps (aggregator.codeMode.maxSteps)"},
		{"steps inside sum", "result = sum(range(1 << 50))\n", b, BoundSteps, "more than 10000 steps (aggregator.codeMode.maxSteps)"},
		{"time inside a built-in", "result = any([x < 0 for x in []]) or max(range(1 << 50))\n", func() Bounds { x := slow; x.MaxSteps = 1 << 60; return x }(), BoundTime, "longer than 300ms (aggregator.codeMode.timeout)"},
		// A tuple nested sixty times over hashes in 2^60 steps of Go and
		// one of Starlark's, taking no memory.
		{"time inside a hash", "t = (1,)\nfor i in range(60):\n    t = (t, t)\nd = {t: 1}\n", slow, BoundTime, "longer than 300ms (aggregator.codeMode.timeout)"},
		{"memory", "s = \"x\" * (200 * 1024 * 1024)\nresult = len(s)\n", b, BoundMemory, "more than 64 MiB of memory (aggregator.codeMode.maxMemory)"},
		{"memory, a little at a time", "l = []\nfor i in range(100000):\n    l.append(\"y\" * 4096)\n", func() Bounds { x := b; x.MaxSteps = 1 << 40; return x }(), BoundMemory, "aggregator.codeMode.maxMemory"},
		{"calls", "for i in range(10):\n    try_call(weather_forecast, city=\"Oslo\")\n", b, BoundCalls, "more than 3 tool calls (aggregator.codeMode.maxCalls)"},
		{"output", "result = \"x\" * 5000\n", b, BoundOutput, "more than 1000 (aggregator.codeMode.maxOutputBytes)"},
	}
	for _, c := range cases {
		start := time.Now()
		res := runProgram(t, c.program, c.bounds, weather(&calls))
		if res.Bound != c.bound || !strings.Contains(res.Error, c.msg) || res.Value != nil {
			t.Errorf("%s: bound %q, error %q, value %s", c.name, res.Bound, res.Error, res.Value)
		}
		// Reported before the pool's kill (the timeout and runGrace): a
		// program stuck in a built-in once held a core until then.
		if took := time.Since(start); took >= c.bounds.Timeout+runGrace {
			t.Errorf("%s: reported after %v, at the pool's kill", c.name, took)
		}
		if ok := runProgram(t, "result = 1 + 1\n", testBounds(), weather(&calls)); string(ok.Value) != "2" {
			t.Fatalf("after %s: %+v", c.name, ok)
		}
	}
	// A program's own error text is output too: cut to the bound (it once
	// came back whole, megabytes of it).
	for _, program := range []string{"fail(\"x\" * 100000)\n", "d = {}\nd[\"k\" * 100000]\n", "result = {\"k\" * 100000: len}\n"} {
		res := runProgram(t, program, b, weather(&calls))
		if res.Error == "" || len(res.Error) > b.MaxOutputBytes || !strings.HasSuffix(res.Error, "(cut: aggregator.codeMode.maxOutputBytes)") {
			t.Errorf("%q: error of %d bytes (bound %d): %.80q", program, len(res.Error), b.MaxOutputBytes, res.Error)
		}
	}
}

// range is Starlark's, counted: its length, elements, slices, membership,
// equality and text are as they were.
// A range's elements reach neither a tool nor the result cut short: a
// range stops yielding at a bound, and encoding one as the steps ran out
// once sent a tool 9,992 of 20,000 ids and returned a short result as if
// it were whole.
func TestBoundReachedWhileEncodingIsReported(t *testing.T) {
	b := testBounds()
	b.MaxSteps, b.MaxOutputBytes = 10_000, 1<<20
	var calls []string
	if res := runProgram(t, "result = range(20000)\n", b, weather(&calls)); res.Bound != BoundSteps || res.Value != nil {
		t.Errorf("a result encoded past the bound: bound %q, %d bytes of value", res.Bound, len(res.Value))
	}
	if res := runProgram(t, "weather_forecast(city=\"Oslo\", ids=range(20000))\n", b, weather(&calls)); res.Bound != BoundSteps || len(calls) != 0 {
		t.Errorf("arguments encoded past the bound: bound %q, calls %d", res.Bound, len(calls))
	}
}

func TestRangeIsStarlarks(t *testing.T) {
	var calls []string
	res := runProgram(t, "r = range(2, 20, 3)\nresult = [len(r), r[1], list(r[1:3]), 8 in r, 9 in r, r == range(2, 20, 3), r != range(5), str(r), type(r), list(range(3)), bool(range(0))]\n", testBounds(), weather(&calls))
	if want := `[6,5,[5,8],true,false,true,true,"range(2, 20, 3)","range",[0,1,2],false]`; res.Error != "" || string(res.Value) != want {
		t.Fatalf("got %s %q, want %s", res.Value, res.Error, want)
	}
}

// A tool call whose answer takes the program past its timeout ends it at
// the timeout, and the caller's calls get the program's deadline.
func TestToolCallsShareTheTimeout(t *testing.T) {
	b := testBounds()
	b.Timeout = 300 * time.Millisecond
	start := time.Now()
	res := runProgram(t, "weather_forecast(city=\"Oslo\")\n", b, func(ctx context.Context, _ string, _ json.RawMessage) Answer {
		<-ctx.Done()
		return Answer{Error: "cancelled"}
	})
	if res.Bound != BoundTime {
		t.Fatalf("%+v", res)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("took %v", took)
	}
}

// Programs run at once up to the pool's size; a caller that cannot wait
// is told the pool is busy, and so is a program that found no runner
// within its own timeout, however long its caller could wait (it once
// waited for as long as the caller's context allowed).
func TestPoolIsBounded(t *testing.T) {
	p := NewPool([]string{os.Args[0], RunnerFlag}, 1)
	t.Cleanup(p.Close)
	release := make(chan struct{})
	started := make(chan struct{})
	go func() {
		_, _ = p.Run(context.Background(), "alice", "weather_forecast(city=\"Oslo\")\n", []string{"weather_forecast"}, testBounds(), func(context.Context, string, json.RawMessage) Answer {
			close(started)
			<-release
			return Answer{Value: json.RawMessage(`{}`)}
		})
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if _, err := p.Run(ctx, "alice", "result = 1\n", nil, testBounds(), nil); err != ErrBusy {
		t.Fatalf("a second program on a pool of one: %v, want ErrBusy", err)
	}
	patient, cancelPatient := context.WithTimeout(context.Background(), time.Minute)
	defer cancelPatient()
	short := testBounds()
	short.Timeout = 100 * time.Millisecond
	if _, err := p.Run(patient, "alice", "result = 1\n", nil, short, nil); err != ErrBusy || patient.Err() != nil {
		t.Fatalf("a program whose timeout passed waiting: %v (the caller's context: %v), want ErrBusy before the caller gave up", err, patient.Err())
	}
	close(release)
	res, err := p.Run(context.Background(), "alice", "result = 2\n", nil, testBounds(), nil)
	if err != nil || string(res.Value) != "2" {
		t.Fatalf("after the first: %+v %v", res, err)
	}
}

// A program waits for a runner only while its caller could still wait
// for the whole of its timeout and its report (config.CodeRunMargin):
// one started later was cut by its caller (the gateway's request
// timeout) mid-run, its tool calls made for nothing, or as it reached
// its timeout, its error lost. A runner free at once is taken however
// little time is left.
func TestProgramsWaitNoLongerThanTheirCallers(t *testing.T) {
	p := NewPool([]string{os.Args[0], RunnerFlag}, 1)
	t.Cleanup(p.Close)
	b := testBounds()
	short, cancel := context.WithTimeout(context.Background(), b.Timeout/4)
	defer cancel()
	if res, err := p.Run(short, "alice", "result = 1\n", nil, b, nil); err != nil || string(res.Value) != "1" {
		t.Fatalf("a free runner, for a caller that cannot wait the timeout: %+v %v", res, err)
	}
	release, started := make(chan struct{}), make(chan struct{})
	defer close(release)
	go func() {
		_, _ = p.Run(context.Background(), "bob", "weather_forecast(city=\"Oslo\")\n", []string{"weather_forecast"}, b, func(context.Context, string, json.RawMessage) Answer {
			close(started)
			<-release
			return Answer{Value: json.RawMessage(`{}`)}
		})
	}()
	<-started
	ctx, cancel := context.WithTimeout(context.Background(), b.Timeout+config.CodeRunMargin/2)
	defer cancel()
	start := time.Now()
	if _, err := p.Run(ctx, "alice", "result = 1\n", nil, b, nil); err != ErrBusy || time.Since(start) > config.CodeRunMargin/4 {
		t.Fatalf("a program whose caller cannot wait for it to wait, run and report: %v after %v, want ErrBusy at once", err, time.Since(start))
	}
}

func ExamplePool_Run() {
	p := NewPool([]string{os.Args[0], RunnerFlag}, 1)
	defer p.Close()
	res, _ := p.Run(context.Background(), "alice", `result = [add(a=i, b=i) for i in range(3)]`, []string{"add"}, testBounds(),
		func(_ context.Context, _ string, args json.RawMessage) Answer {
			var in struct{ A, B int }
			_ = json.Unmarshal(args, &in)
			return Answer{Value: json.RawMessage(fmt.Sprint(in.A + in.B))}
		})
	fmt.Println(string(res.Value), res.Calls)
	// Output: [0,2,4] 3
}

// A caller that goes away as its program ends leaves no dead runner in
// the pool: the next program runs.
func TestCallersGoingAwayLeaveWorkingRunners(t *testing.T) {
	p := NewPool([]string{os.Args[0], RunnerFlag}, 1)
	t.Cleanup(p.Close)
	for i := range 200 {
		// The tool answers around when the caller gives up.
		wait := 1500*time.Microsecond + time.Duration(i%11)*100*time.Microsecond
		slow := func(context.Context, string, json.RawMessage) Answer {
			time.Sleep(wait)
			return Answer{Value: json.RawMessage(`1`)}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Millisecond)
		_, _ = p.Run(ctx, "alice", "result = weather_forecast(city=\"Oslo\")\n", []string{"weather_forecast"}, testBounds(), slow)
		cancel()
		res, err := p.Run(context.Background(), "alice", "result = 2\n", nil, testBounds(), nil)
		if err != nil || string(res.Value) != "2" {
			t.Fatalf("after a caller went away (%d): %+v %v", i, res, err)
		}
	}
}

// TestProgramsNearTheirBounds: what a program may do within its bounds
// ends as the program says, not with a runner that stopped or a bound it
// did not reach. Each once failed: garbage counted against maxMemory
// stopped a program holding half of it; a value nested deeper than JSON
// goes ended the runner (as a result) or read as a timeout (as a tool's
// arguments); a result whose JSON escapes made it larger than one
// protocol message ended the runner.
func TestProgramsNearTheirBounds(t *testing.T) {
	var calls []string
	b := testBounds()
	b.MaxSteps = 1 << 40
	// On a runner of its own, which no earlier program has used.
	fresh := NewPool([]string{os.Args[0], RunnerFlag}, 1)
	defer fresh.Close()
	garbage := "keep = \"x\" * (36 * 1024 * 1024)\nfor i in range(400):\n    t = \"y\" * (256 * 1024)\nresult = len(keep)\n"
	if res, err := fresh.Run(t.Context(), "alice", garbage, nil, b, nil); err != nil || res.Error != "" || string(res.Value) != "37748736" {
		t.Errorf("36 MiB kept and garbage made, under 64 MiB: %+v %v", res, err)
	}
	deep := "v = 1\nfor i in range(20000):\n    v = [v]\n"
	for _, c := range []struct{ program, want string }{
		{deep + "result = v\n", "nests lists and dicts more than 512 deep"},
		{deep + "r, err = try_call(echo, v=v)\nresult = err\n", "nests lists and dicts more than 512 deep"},
	} {
		res := runProgram(t, c.program, b, weather(&calls))
		if res.Bound != "" || !strings.Contains(res.Error+string(res.Value), c.want) {
			t.Errorf("%q: %+v, want a program error %q", c.program[len(deep):], res, c.want)
		}
	}
	big := b
	big.MaxOutputBytes = 4 << 20
	res := runProgram(t, "result = \"<\" * (3 * 1024 * 1024)\n", big, weather(&calls))
	if res.Bound != BoundOutput || !strings.Contains(res.Error, "too large to send") {
		t.Errorf("a result that escapes past one message: bound %q, error %q", res.Bound, res.Error)
	}
	if ok := runProgram(t, "result = 1 + 1\n", testBounds(), weather(&calls)); string(ok.Value) != "2" {
		t.Fatalf("after the large result: %+v", ok)
	}
}

// TestRunnersRunBelowTheAggregator: every thread of a runner, not its
// main thread alone, has the runner's lower priority (a nice value is a
// thread's on Linux).
func TestRunnersRunBelowTheAggregator(t *testing.T) {
	var calls []string
	runProgram(t, "result = 1\n", testBounds(), weather(&calls))
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, e := range entries {
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.Contains(string(cmdline), RunnerFlag) {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil || strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))[1] != strconv.Itoa(os.Getpid()) {
			continue // not a runner of this test's pool
		}
		tasks, _ := os.ReadDir("/proc/" + e.Name() + "/task")
		for _, task := range tasks {
			raw, err := os.ReadFile("/proc/" + e.Name() + "/task/" + task.Name() + "/stat")
			if err != nil {
				continue
			}
			// The nice value is the 19th field; fields after the command
			// in parentheses start at the 3rd.
			fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
			if nice := fields[16]; nice != strconv.Itoa(runnerNice) {
				t.Errorf("runner %s thread %s has nice %s, want %d", e.Name(), task.Name(), nice, runnerNice)
			}
			checked++
		}
	}
	if checked < 2 {
		t.Fatalf("checked %d runner threads", checked)
	}
}

// A value that holds another many times over is refused as the encoder
// would have to write it, not walked until the runner is killed past its
// timeout (x = [x, x] eighty times is 2^80 values); empty printed lines
// count against the output bound too.
func TestValuesAndLinesAreBoundedAsWritten(t *testing.T) {
	var calls []string
	for _, last := range []string{"result = x", "result = echo(v=x)"} {
		// Any iterable is written as an array, a set as a list is: its
		// values count too (a range's are steps of their own).
		for _, x := range []string{
			"x = [1]\nfor i in range(80):\n    x = [x, x]\n",
			"s = set(range(1000))\nx = [s] * 2000\n",
		} {
			res := runProgram(t, x+last+"\n", testBounds(), weather(&calls))
			if res.Bound != "" || !strings.Contains(res.Error, "holds more than") {
				t.Errorf("%s%s: bound %q, error %q", x, last, res.Bound, res.Error)
			}
		}
	}
	b := testBounds()
	res := runProgram(t, "for i in range(90000):\n    print(\"\")\nresult = 1\n", b, weather(&calls))
	if printed, _ := json.Marshal(res.Printed); len(printed) > b.MaxOutputBytes+200 {
		t.Errorf("empty lines: %d printed, %d bytes as JSON, past the bound of %d", len(res.Printed), len(printed), b.MaxOutputBytes)
	}
}

// A caller holds at most half the runners (at least one): its next
// program waits for its own, while another caller's runs.
func TestCallersShareTheRunners(t *testing.T) {
	p := NewPool([]string{os.Args[0], RunnerFlag}, 2)
	t.Cleanup(p.Close)
	release := make(chan struct{})
	started := make(chan struct{})
	go func() {
		_, _ = p.Run(context.Background(), "mallory", "weather_forecast(city=\"Oslo\")\n", []string{"weather_forecast"}, testBounds(), func(context.Context, string, json.RawMessage) Answer {
			close(started)
			<-release
			return Answer{Value: json.RawMessage(`{}`)}
		})
	}()
	<-started
	short := testBounds()
	short.Timeout = 200 * time.Millisecond
	if _, err := p.Run(context.Background(), "mallory", "result = 1\n", nil, short, nil); err != ErrBusy {
		t.Fatalf("a caller's second program on a pool of two: %v, want ErrBusy", err)
	}
	if res, err := p.Run(context.Background(), "bob", "result = 2\n", nil, testBounds(), nil); err != nil || string(res.Value) != "2" {
		t.Fatalf("another caller's program: %+v %v", res, err)
	}
	// The anonymous principal (every client of a gateway without
	// authentication) is held to no share: its second program runs.
	anonRelease, anonStarted := make(chan struct{}), make(chan struct{})
	go func() {
		_, _ = p.Run(context.Background(), "", "weather_forecast(city=\"Oslo\")\n", []string{"weather_forecast"}, testBounds(), func(context.Context, string, json.RawMessage) Answer {
			close(anonStarted)
			<-anonRelease
			return Answer{Value: json.RawMessage(`{}`)}
		})
	}()
	close(release)
	<-anonStarted
	if res, err := p.Run(context.Background(), "", "result = 4\n", nil, testBounds(), nil); err != nil || string(res.Value) != "4" {
		t.Fatalf("the anonymous principal's second program: %+v %v", res, err)
	}
	close(anonRelease)
	if res, err := p.Run(context.Background(), "mallory", "result = 3\n", nil, testBounds(), nil); err != nil || string(res.Value) != "3" {
		t.Fatalf("the caller's program after its first: %+v %v", res, err)
	}
}

// A program reported stuck in a built-in still reports the calls it made
// and the lines it printed: the report once said 0 calls and dropped
// them, in the run's result and its audit event.
func TestStuckProgramKeepsItsCallsAndLines(t *testing.T) {
	var calls []string
	b := testBounds()
	b.MaxSteps, b.Timeout = 1<<62, 300*time.Millisecond
	res := runProgram(t, "weather_forecast(city=\"Oslo\")\nprint(\"before\")\nt = (1,)\nfor i in range(60):\n    t = (t, t)\nd = {t: 1}\n", b, weather(&calls))
	if res.Bound != BoundTime || res.Calls != 1 || !slices.Contains(res.Printed, "before") {
		t.Fatalf("bound %q, calls %d, printed %q; want the timeout, 1 call, the line", res.Bound, res.Calls, res.Printed)
	}
}

// The pool's kill of a runner that did not stop at its timeout, and its
// report, fit in the margin the gateway's request timeout leaves a run.
func TestRunGraceFitsTheRequestMargin(t *testing.T) {
	if runGrace+time.Second > config.CodeRunMargin {
		t.Fatalf("runGrace %s leaves less than a second of config.CodeRunMargin (%s) to start a run and report it", runGrace, config.CodeRunMargin)
	}
}

// A program whose runner the pool ends before it reports (its caller
// gone, as here, its deadline passed, a crash) keeps the calls the pool
// made for it: its Result, and so the code_run event's detail, said 0
// calls beside the trail's tool_call events for them.
func TestEndedRunnersKeepTheCallsMade(t *testing.T) {
	pool := NewPool([]string{os.Args[0], RunnerFlag}, 1)
	defer pool.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	calls := 0
	call := func(callCtx context.Context, tool string, _ json.RawMessage) Answer {
		calls++
		if calls == 2 {
			// The caller goes away (its request's deadline) while the
			// second call runs.
			cancel()
			<-callCtx.Done()
			return Answer{Error: tool + " failed: cancelled"}
		}
		return Answer{Value: json.RawMessage(`{"ok":true}`)}
	}
	b := testBounds()
	b.Timeout = 5 * time.Second
	res, err := pool.Run(ctx, "alice", "echo()\necho()\nx = 0\nwhile True:\n    x += 1\n", []string{"echo"}, b, call)
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 || res.Calls != 2 {
		t.Errorf("the program made %d calls; its result says %d (%+v)", calls, res.Calls, res)
	}
}

// A program that runs out of memory where the watchdog cannot stop it
// is stopped at maxMemory with an error naming it, every time. A
// built-in recursing through a deep value grows a stack, which the
// watchdog does not count; a built-in growing one value is one step it
// cannot stop. Both ran into the process's data limit, where the runtime
// died now in words ("out of memory"), now by a fault of its own
// (SIGSEGV in its collector), reported as "the code runner stopped
// before the program ended". Each runs a few times: how the runtime dies
// varies from run to run.
func TestProgramsOutOfMemoryAreStoppedAtTheirBound(t *testing.T) {
	b := testBounds()
	b.MaxSteps = 1 << 40
	for _, c := range []struct{ name, program, msg string }{
		{"on the stack", "result = len(json.decode(\"[\" * 300000 + \"]\" * 300000))\n", "MiB of stack (aggregator.codeMode.maxMemory)"},
		{"in one built-in", "l = list(range(50000000))\nresult = len(l)\n", "aggregator.codeMode.maxMemory"},
	} {
		for range 4 {
			res := runProgram(t, c.program, b, nil)
			if res.Bound != BoundMemory || !strings.Contains(res.Error, c.msg) {
				t.Errorf("%s: bound %q, error %q; want %q", c.name, res.Bound, res.Error, c.msg)
			}
		}
	}
}
