package codemode

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	starlarkjson "go.starlark.net/lib/json"
	"go.starlark.net/resolve"
	"go.starlark.net/starlark"
	"go.starlark.net/syntax"

	"github.com/switchboard-mcp/switchboard/services/textcut"
)

// Serve runs the programs it reads from in, one at a time, answering on
// out, until in ends: the runner process's main loop.
func Serve(in io.Reader, out io.Writer) error {
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), MaxMessageBytes)
	c := &conn{in: sc, out: bufio.NewWriter(out)}
	for {
		var m toRunner
		if err := c.read(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if m.Run == nil {
			return errors.New("code runner: expected a program")
		}
		res := run(m.Run, c)
		res.Spent = mappedBytes() > m.Run.Bounds.MaxMemory
		err := c.write(fromRunner{Done: &res})
		if errors.Is(err, errUnsendable) {
			// Each part within its bound, the whole as JSON (escapes
			// included) may still not fit one message: a clear error,
			// not a runner that stops.
			res = Result{Steps: res.Steps, Calls: res.Calls, Bound: BoundOutput,
				Error: "the program's result and printed lines together are too large to send (aggregator.codeMode.maxOutputBytes)"}
			err = c.write(fromRunner{Done: &res})
		}
		if err != nil {
			return err
		}
		// What the program left is collected now, not counted against
		// the next one (which the watchdog would stop at once).
		if heapBytes() > 16<<20 {
			debug.FreeOSMemory()
		}
	}
}

// The language: Starlark with while loops and if/for/while at top level
// (a program is a script, not a module), no recursion (steps bound loops;
// recursion would bound only the Go stack).
var fileOptions = &syntax.FileOptions{While: true, TopLevelControl: true, GlobalReassign: true, Set: true}

// program is one run's state.
type program struct {
	c      *conn
	req    *runRequest
	thread *starlark.Thread
	calls  int
	nextID int

	// builtinSteps are the steps taken inside built-ins (steps.go).
	builtinSteps uint64

	mu sync.Mutex
	// bound is the bound reached, and boundMsg says so; set once.
	bound, boundMsg string
	// stopped is set once a bound is reached.
	stopped atomic.Bool
	// backstop reports the program if it does not stop soon after a
	// bound (steps.go); ended is set by whichever reports it first.
	backstop *time.Timer
	ended    atomic.Bool

	printed      []string
	printedBytes int
}

// boundError is a bound reached: try_call does not catch it.
type boundError struct{ msg string }

func (e *boundError) Error() string { return e.msg }

// reach records that the program reached bound (the first one reached
// wins) and stops it.
func (p *program) reach(bound, msg string) error {
	p.mu.Lock()
	if p.bound == "" {
		p.bound, p.boundMsg = bound, msg
		p.backstop = time.AfterFunc(backstopGrace, p.reportStuck) // steps.go
	}
	msg = p.boundMsg
	p.mu.Unlock()
	p.stopped.Store(true)
	p.thread.Cancel(msg)
	return &boundError{msg}
}

func (p *program) reached() (string, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bound, p.boundMsg
}

func run(req *runRequest, c *conn) Result {
	p := &program{c: c, req: req}
	res := p.execute()
	if !p.ended.CompareAndSwap(false, true) {
		// The backstop reported the program, and the pool ends this
		// runner (steps.go).
		select {}
	}
	p.stopBackstop()
	return res
}

func (p *program) execute() Result {
	req := p.req
	b := req.Bounds
	p.thread = &starlark.Thread{Name: "run_code", Print: p.print}
	p.thread.SetMaxExecutionSteps(b.MaxSteps)
	p.thread.OnMaxSteps = func(*starlark.Thread) { p.stepsExceeded() }
	timer := time.AfterFunc(b.Timeout, func() {
		_ = p.reach(BoundTime, fmt.Sprintf("the program ran longer than %s (aggregator.codeMode.timeout)", b.Timeout))
	})
	defer timer.Stop()
	stop := p.watchMemory(b.MaxMemory)
	defer stop()

	predeclared := starlark.StringDict{
		"json":     starlarkjson.Module,
		"call":     starlark.NewBuiltin("call", p.callBuiltin),
		"try_call": starlark.NewBuiltin("try_call", p.tryCall),
		"sum":      starlark.NewBuiltin("sum", p.sum),
		"range":    starlark.NewBuiltin("range", p.rangeBuiltin),
	}
	for _, name := range req.Tools {
		if _, taken := predeclared[name]; !taken && isIdentifier(name) && starlark.Universe[name] == nil {
			predeclared[name] = starlark.NewBuiltin(name, p.toolBuiltin)
		}
	}
	globals, err := starlark.ExecFileOptions(fileOptions, p.thread, "program", req.Program, predeclared)
	res := Result{Steps: p.steps(), Calls: p.calls, Printed: p.printed}
	if bound, msg := p.reached(); bound != "" {
		res.Bound, res.Error, res.Line = bound, msg, lineOf(err)
		return res
	}
	if err != nil {
		// A program's own error text (fail("..."), a key it made) is
		// output like its result, within the same bound.
		res.Error, res.Line = cutText(messageOf(err), b.MaxOutputBytes), lineOf(err)
		return res
	}
	value, err := encode(p.thread, resultOf(globals))
	if bound, msg := p.reached(); bound != "" {
		// Reached while encoding: a range stops yielding at a bound, so
		// the value encoded may be cut short.
		res.Bound, res.Error, res.Steps = bound, msg, p.steps()
		return res
	}
	if err != nil {
		// The text names what the program made (a key of its own), so it
		// is output within the same bound.
		res.Error = cutText("the program's result cannot be JSON: "+err.Error(), b.MaxOutputBytes)
		return res
	}
	if len(value) > b.MaxOutputBytes {
		res.Bound, res.Error = BoundOutput, fmt.Sprintf("the program's result is %d bytes, more than %d (aggregator.codeMode.maxOutputBytes)", len(value), b.MaxOutputBytes)
		return res
	}
	res.Value = value
	return res
}

// resultOf is the program's result variable, None when it set none.
func resultOf(globals starlark.StringDict) starlark.Value {
	if v, ok := globals["result"]; ok {
		return v
	}
	return starlark.None
}

// print keeps the program's printed lines, up to the output bound. A
// line costs its text and the quotes and comma that carry it in the
// result, so that empty lines are bounded too.
func (p *program) print(_ *starlark.Thread, msg string) {
	const lineCost = 3
	// The backstop reads them from another goroutine (steps.go).
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.printedBytes+len(msg)+lineCost > p.req.Bounds.MaxOutputBytes {
		if p.printedBytes <= p.req.Bounds.MaxOutputBytes {
			p.printed = append(p.printed, "(more printed lines were left out: aggregator.codeMode.maxOutputBytes)")
			p.printedBytes = p.req.Bounds.MaxOutputBytes + 1
		}
		return
	}
	p.printed = append(p.printed, msg)
	p.printedBytes += len(msg) + lineCost
}

// runtimeBytes is one of the Go runtime's byte metrics, 0 where it has
// none of that name.
func runtimeBytes(name string) int64 {
	sample := []metrics.Sample{{Name: name}}
	metrics.Read(sample)
	if sample[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(sample[0].Value.Uint64())
}

// mappedBytes is the memory the Go runtime has mapped read-write, which
// it keeps once mapped: what the process's data limit counts.
func mappedBytes() int64 { return runtimeBytes("/memory/classes/total:bytes") }

// heapBytes is the heap's objects, live or not yet swept.
func heapBytes() int64 { return runtimeBytes("/memory/classes/heap/objects:bytes") }

// liveHeapBytes is the heap's live objects: the garbage a program made
// and the collector did not take yet counts in heapBytes, and would stop
// a program far under its bound. A collection is a pause, so it runs only
// once the heap is past the bound. The program runs on meanwhile, and
// what it allocates during the collection is counted live however short
// its life (it is allocated marked): a program making garbage fast on a
// busy machine was taken for one past its bound. What was allocated
// during the collection is left out; what of it the program keeps is
// counted at the next check.
func liveHeapBytes() int64 {
	before := runtimeBytes("/gc/heap/allocs:bytes")
	runtime.GC()
	live := runtimeBytes("/gc/heap/live:bytes")
	return live - (runtimeBytes("/gc/heap/allocs:bytes") - before)
}

// watchMemory stops the program when its live heap grows past max: before the
// process's own limit (RLIMIT_DATA, set a little above it) ends the
// runner, so the caller gets a clear error. It returns the watchdog's
// stop function.
func (p *program) watchMemory(max int64) func() {
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			if heapBytes() > max && liveHeapBytes() > max {
				_ = p.reach(BoundMemory, fmt.Sprintf("the program used more than %d MiB of memory (aggregator.codeMode.maxMemory)", max>>20))
				return
			}
		}
	}()
	return func() { close(done) }
}

// toolBuiltin calls the tool the builtin is named after.
func (p *program) toolBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) > 0 {
		return nil, fmt.Errorf("%s: pass the tool's arguments by name, as %s(city=\"Oslo\")", b.Name(), b.Name())
	}
	return p.callTool(thread, b.Name(), kwargs)
}

// callBuiltin is call(name, **arguments), for any tool, whatever its name.
func (p *program) callBuiltin(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	var name string
	if err := starlark.UnpackPositionalArgs(b.Name(), args, nil, 1, &name); err != nil {
		return nil, err
	}
	return p.callTool(thread, name, kwargs)
}

func (p *program) callTool(thread *starlark.Thread, name string, kwargs []starlark.Tuple) (starlark.Value, error) {
	// Every call goes to the aggregator, whatever the name: its
	// admission decides (and records) what the caller may call.
	if p.calls >= p.req.Bounds.MaxCalls {
		return nil, p.reach(BoundCalls, fmt.Sprintf("the program made more than %d tool calls (aggregator.codeMode.maxCalls)", p.req.Bounds.MaxCalls))
	}
	p.calls++
	args := starlark.NewDict(len(kwargs))
	for _, kv := range kwargs {
		if err := args.SetKey(kv[0], kv[1]); err != nil {
			return nil, err
		}
	}
	argsJSON, err := encode(thread, args)
	if _, msg := p.reached(); msg != "" {
		// Reached while encoding: a range stops yielding at a bound, so
		// the arguments may be cut short; the call is not made.
		return nil, &boundError{msg}
	}
	if err != nil {
		return nil, fmt.Errorf("%s: the arguments cannot be JSON: %v", name, err)
	}
	p.nextID++
	id := p.nextID
	if err := p.c.write(fromRunner{Call: &toolCallMsg{ID: id, Tool: name, Arguments: argsJSON}}); errors.Is(err, errUnsendable) {
		return nil, fmt.Errorf("%s: the arguments are too large to send", name)
	} else if err != nil {
		return nil, p.reach(BoundTime, "the aggregator stopped answering")
	}
	var m toRunner
	if err := p.c.read(&m); err != nil || m.Answer == nil || m.Answer.ID != id {
		return nil, p.reach(BoundTime, "the aggregator stopped answering")
	}
	a := m.Answer
	switch {
	case a.Bound != "":
		return nil, p.reach(a.Bound, a.Error)
	case a.Error != "":
		return nil, errors.New(a.Error)
	}
	return decode(thread, a.Value)
}

// tryCall is try_call(f, *args, **kwargs): (f's value, None), or (None,
// the error's message) when f fails; a bound reached is not caught.
func (p *program) tryCall(thread *starlark.Thread, b *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
	if len(args) == 0 {
		return nil, fmt.Errorf("%s: want a function to call, as try_call(weather_forecast, city=\"Oslo\")", b.Name())
	}
	v, err := starlark.Call(thread, args[0], args[1:], kwargs)
	if err == nil {
		return starlark.Tuple{v, starlark.None}, nil
	}
	var be *boundError
	if bound, _ := p.reached(); bound != "" || errors.As(err, &be) {
		return nil, err
	}
	return starlark.Tuple{starlark.None, starlark.String(messageOf(err))}, nil
}

var (
	jsonEncode = starlarkjson.Module.Members["encode"]
	jsonDecode = starlarkjson.Module.Members["decode"]
)

func encode(thread *starlark.Thread, v starlark.Value) (json.RawMessage, error) {
	if nestsDeeper(v, maxNesting) {
		// Deeper than a request may be (the gateway's bound), and than
		// the protocol's JSON can carry: refused before the encoder
		// recurses through it (its stack is the runner's memory),
		// catchably.
		return nil, fmt.Errorf("the value nests lists and dicts more than %d deep, or holds more than %d values", maxNesting, maxValueNodes)
	}
	s, err := starlark.Call(thread, jsonEncode, starlark.Tuple{v}, nil)
	if err != nil {
		return nil, errors.New(messageOf(err))
	}
	return json.RawMessage(s.(starlark.String)), nil
}

// nestsDeeper reports whether v nests iterables (lists, tuples, sets,
// ranges) and dicts more than limit deep, or holds more than maxValueNodes values counted as the
// encoder would write them: a value that holds another twice is written
// twice, so x = [x, x] eighty times over is a few lines of program but
// 2^80 values to walk and write, inside one step of the interpreter
// where nothing could stop it. It looks no deeper than limit.
func nestsDeeper(v starlark.Value, limit int) bool {
	budget := maxValueNodes
	return (&valueWalk{budget: &budget}).deeper(v, limit)
}

// maxValueNodes bounds the values a program may send or return, each
// written at least one byte long: far more than the bounds of a request
// or a result let through.
const maxValueNodes = 1 << 20

type valueWalk struct{ budget *int }

func (w *valueWalk) deeper(v starlark.Value, limit int) bool {
	if *w.budget--; limit < 0 || *w.budget < 0 {
		return true
	}
	switch c := v.(type) {
	case *starlark.Dict:
		for _, kv := range c.Items() {
			if w.deeper(kv[1], limit-1) {
				return true
			}
		}
	case starlark.Iterable:
		// The encoder writes every iterable as an array (a list, a
		// tuple, a set, a range), so each is counted as one.
		it := c.Iterate()
		defer it.Done()
		var e starlark.Value
		for it.Next(&e) {
			if w.deeper(e, limit-1) {
				return true
			}
		}
	}
	return false
}

// maxNesting bounds how deep a value a program sends or returns may nest:
// as deep as a client's request may (the gateway's wire.MaxNestingDepth).
const maxNesting = 512

func decode(thread *starlark.Thread, raw json.RawMessage) (starlark.Value, error) {
	if len(raw) == 0 {
		return starlark.None, nil
	}
	return starlark.Call(thread, jsonDecode, starlark.Tuple{starlark.String(raw)}, nil)
}

// messageOf is an error's message without Starlark's backtrace.
func messageOf(err error) string {
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		return ee.Msg
	}
	var se syntax.Error
	if errors.As(err, &se) {
		return se.Msg
	}
	var re resolve.ErrorList
	if errors.As(err, &re) && len(re) > 0 {
		return re[0].Msg
	}
	return err.Error()
}

// lineOf is the line of the program an error happened on, 0 for none.
func lineOf(err error) int {
	var ee *starlark.EvalError
	if errors.As(err, &ee) {
		line := 0
		for _, fr := range ee.CallStack {
			if fr.Pos.Filename() == "program" {
				line = int(fr.Pos.Line)
			}
		}
		return line
	}
	var se syntax.Error
	if errors.As(err, &se) {
		return int(se.Pos.Line)
	}
	var re resolve.ErrorList
	if errors.As(err, &re) && len(re) > 0 {
		return int(re[0].Pos.Line)
	}
	return 0
}

// isIdentifier reports whether a tool's name can be a Starlark name (not
// a keyword or reserved word: it parses as a bare identifier).
func isIdentifier(name string) bool {
	if name == "" || strings.HasPrefix(name, "__") {
		return false
	}
	for i, r := range name {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || i > 0 && r >= '0' && r <= '9') {
			return false
		}
	}
	e, err := syntax.ParseExpr("", name, 0)
	_, ok := e.(*syntax.Ident)
	return err == nil && ok
}

// cutText is s cut to at most n bytes on a character boundary, saying so.
func cutText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const note = "… (cut: aggregator.codeMode.maxOutputBytes)"
	return textcut.Prefix(s, n-len(note)) + note
}
