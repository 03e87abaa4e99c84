package codemode

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// RunnerFlag starts the aggregator binary as a code runner; MemoryFlag
// gives it its memory bound.
const (
	RunnerFlag = "--code-runner"
	MemoryFlag = "--code-runner-memory"
)

// ErrBusy: every runner was busy for as long as the caller could wait.
var ErrBusy = errors.New("code mode is busy: every runner is running a program")

// Answer is the outcome of one tool call a program made (see answer).
type Answer struct {
	Value json.RawMessage
	// Error fails the call; the program may catch it (try_call).
	Error string
	// Bound, if set, is a bound the call reached (BoundTime, BoundCalls);
	// it ends the program.
	Bound string
}

// CallFunc makes one tool call of a program, as its caller.
type CallFunc func(ctx context.Context, tool string, arguments json.RawMessage) Answer

// Pool runs programs in runner processes, one program at a time each, at
// most size at once, and at most half of them (at least one) for one
// caller but the anonymous one: a caller sending programs faster than
// they end waits for its own, while others still find runners. A runner is started when first
// needed and kept for the next program, unless its program ended it (a
// bound it could not survive, a crash) or the memory bound changed.
type Pool struct {
	command []string
	idle    chan *runner
	share   int

	mu sync.Mutex
	// callers holds the runner slots of each caller with a program
	// running or waiting (so as many entries as such programs, at most).
	callers map[string]*callerSlots
}

// callerSlots are one caller's share of the runners, and how many of its
// programs use them (the entry goes with the last).
type callerSlots struct {
	slots chan struct{}
	users int
}

// NewPool returns a pool of size runners started with command (the
// aggregator's own binary and RunnerFlag).
func NewPool(command []string, size int) *Pool {
	p := &Pool{command: command, idle: make(chan *runner, size), share: max(1, size/2), callers: map[string]*callerSlots{}}
	for range size {
		p.idle <- nil // a slot with no runner started yet
	}
	return p
}

// Close stops the idle runners; busy ones are stopped when their program
// ends.
func (p *Pool) Close() {
	for {
		select {
		case r := <-p.idle:
			if r != nil {
				r.stop()
			}
		default:
			return
		}
	}
}

// Run runs program for caller with bounds, the caller's tools being
// tools, making each tool call with call. It waits for a runner (and for
// the caller's share of them) for at most the program's timeout, and
// only while ctx could still wait for the whole of it to run and report
// (config.CodeRunMargin; ErrBusy after): a program that waited longer
// would run past its timeout, or be cut by its caller (the gateway's
// request timeout), the tool calls it made and its error lost. A runner
// free at once is taken whatever the time left. The Result says how the
// program ended, a bound it reached included; an error is the pool's
// (busy, a runner that cannot start).
func (p *Pool) Run(ctx context.Context, caller, program string, tools []string, b Bounds, call CallFunc) (Result, error) {
	wait := b.Timeout
	if d, ok := ctx.Deadline(); ok {
		wait = min(wait, time.Until(d)-b.Timeout-config.CodeRunMargin)
	}
	waiting, stop := context.WithTimeout(ctx, wait)
	defer stop()
	// The anonymous principal ("") is every client of a gateway without
	// authentication: sharing among them is not by principal.
	if caller != "" {
		slots, done := p.slotsOf(caller)
		defer done()
		select {
		case slots <- struct{}{}:
		default:
			select {
			case slots <- struct{}{}:
			case <-waiting.Done():
				return Result{}, ErrBusy
			}
		}
		defer func() { <-slots }()
	}
	var r *runner
	select {
	case r = <-p.idle:
	default:
		select {
		case r = <-p.idle:
		case <-waiting.Done():
			return Result{}, ErrBusy
		}
	}
	keep := false
	defer func() {
		if !keep && r != nil {
			r.stop()
			r = nil
		}
		p.idle <- r
	}()
	if r != nil && r.memory != b.MaxMemory {
		r.stop()
		r = nil
	}
	if r == nil {
		var err error
		if r, err = p.start(b.MaxMemory); err != nil {
			return Result{}, err
		}
	}
	res, ok := r.run(ctx, &runRequest{Program: program, Tools: tools, Bounds: b}, call)
	// A runner whose program filled its memory is not kept: what the
	// program left, the next one would pay for.
	keep = ok && res.Bound != BoundMemory && !res.Spent
	return res, nil
}

// slotsOf is caller's share of the runners; done gives it back when the
// program no longer needs it.
func (p *Pool) slotsOf(caller string) (slots chan struct{}, done func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	c := p.callers[caller]
	if c == nil {
		c = &callerSlots{slots: make(chan struct{}, p.share)}
		p.callers[caller] = c
	}
	c.users++
	return c.slots, func() {
		p.mu.Lock()
		defer p.mu.Unlock()
		if c.users--; c.users == 0 {
			delete(p.callers, caller)
		}
	}
}

// runner is one runner process.
type runner struct {
	memory int64
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr *headBuffer
	done   chan struct{} // closed when the process has exited
}

// memoryHeadroom is what a runner may use beyond a program's memory
// bound (the Go runtime, the interpreter, the protocol's buffers) before
// its process limit ends it.
const memoryHeadroom = 96 << 20

func (p *Pool) start(memory int64) (*runner, error) {
	args := append(append([]string{}, p.command[1:]...), MemoryFlag, strconv.FormatInt(memory+memoryHeadroom, 10))
	cmd := exec.Command(p.command[0], args...)
	// A runner gets nothing of the aggregator's: no environment (and so
	// no secret in it), no files but its three pipes.
	cmd.Env = []string{}
	r := &runner{memory: memory, cmd: cmd, stderr: &headBuffer{max: 4 << 10}, done: make(chan struct{})}
	cmd.Stderr = r.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start a code runner: %w", err)
	}
	go func() { _ = cmd.Wait(); close(r.done) }()
	r.in = in
	r.out = bufio.NewScanner(out)
	r.out.Buffer(make([]byte, 64<<10), MaxMessageBytes)
	return r, nil
}

func (r *runner) stop() {
	_ = r.in.Close()
	_ = r.cmd.Process.Kill()
	<-r.done
}

// runGrace is how long past its timeout a program's runner is given to
// report that it stopped, before it is killed: within
// config.CodeRunMargin, so that the pool's report of it still reaches
// the caller.
const runGrace = 2 * time.Second

// run runs one program; ok is false when the runner cannot be used
// again.
func (r *runner) run(ctx context.Context, req *runRequest, call CallFunc) (res Result, ok bool) {
	// The program's wall time covers its tool calls: they get its
	// deadline. The runner stops the program itself at the timeout; it
	// is killed if it has not within the grace.
	callCtx, cancel := context.WithTimeout(ctx, req.Bounds.Timeout)
	defer cancel()
	killCtx, cancelKill := context.WithTimeout(ctx, req.Bounds.Timeout+runGrace)
	defer cancelKill()
	stopKill := context.AfterFunc(killCtx, func() { _ = r.cmd.Process.Kill() })
	defer func() {
		// A kill that started as the program ended (its caller went away
		// at that moment) ends the runner: it is not used again.
		if !stopKill() {
			ok = false
		}
	}()

	// The pool counts the calls it made for the program: a program the
	// runner could not count them for (reported stuck, steps.go) or
	// could not report at all (ended) keeps them, as its tool_call
	// events in the trail do.
	calls := 0
	defer func() { res.Calls = max(res.Calls, calls) }()
	if err := r.send(toRunner{Run: req}); err != nil {
		return r.ended(req.Bounds, false), false
	}
	for {
		var m fromRunner
		if !r.out.Scan() || json.Unmarshal(r.out.Bytes(), &m) != nil {
			// Killed at its own deadline, not for a caller gone.
			return r.ended(req.Bounds, killCtx.Err() != nil && ctx.Err() == nil), false
		}
		switch {
		case m.Done != nil:
			return *m.Done, true
		case m.Call != nil:
			calls++
			var a Answer
			// The runner counts too, but runs the program: the cap
			// holds here whatever it does.
			if calls > req.Bounds.MaxCalls {
				a = Answer{Bound: BoundCalls, Error: fmt.Sprintf("the program made more than %d tool calls (aggregator.codeMode.maxCalls)", req.Bounds.MaxCalls)}
			} else {
				a = call(callCtx, m.Call.Tool, m.Call.Arguments)
				if a.Bound == "" && callCtx.Err() != nil && ctx.Err() == nil {
					a = Answer{Bound: BoundTime, Error: fmt.Sprintf("the program ran longer than %s (aggregator.codeMode.timeout)", req.Bounds.Timeout)}
				}
			}
			err := r.send(toRunner{Answer: &answer{ID: m.Call.ID, Value: a.Value, Error: a.Error, Bound: a.Bound}})
			if errors.Is(err, errUnsendable) {
				// A result too large for the runner to read: an error the
				// program can catch, not a runner that stops.
				err = r.send(toRunner{Answer: &answer{ID: m.Call.ID, Error: m.Call.Tool + ": its result is too large for a program to read"}})
			}
			if err != nil {
				return r.ended(req.Bounds, false), false
			}
		default:
			return r.ended(req.Bounds, false), false
		}
	}
}

func (r *runner) send(m toRunner) error {
	b, err := encodeMessage(m)
	if err != nil {
		return err
	}
	_, err = r.in.Write(b)
	return err
}

// ended is the result of a program whose runner ended before it did:
// out of stack or memory (the process's limit), killed at its timeout,
// or crashed.
func (r *runner) ended(b Bounds, timedOut bool) Result {
	_ = r.cmd.Process.Kill()
	<-r.done
	stderr := r.stderr.String()
	switch {
	case strings.Contains(stderr, "goroutine stack exceeds"):
		// The runtime's words for a stack past SetMaxStack (main.go).
		return Result{Bound: BoundMemory, Error: fmt.Sprintf("the program nested values deeper than its memory allows: more than %d MiB of stack (aggregator.codeMode.maxMemory)", maxStack(b.MaxMemory)>>20)}
	case outOfMemory(stderr):
		return Result{Bound: BoundMemory, Error: fmt.Sprintf("the program used more than %d MiB of memory (aggregator.codeMode.maxMemory)", b.MaxMemory>>20)}
	case timedOut:
		return Result{Bound: BoundTime, Error: fmt.Sprintf("the program ran longer than %s (aggregator.codeMode.timeout)", b.Timeout)}
	}
	return Result{Error: "the code runner stopped before the program ended"}
}

// outOfMemory reports whether a runner's stderr says the Go runtime died
// at the process's data limit: in words, or, past a mapping the limit
// refused (a built-in growing one value at once, which the watchdog
// cannot stop), by a fault in the runtime itself (SIGSEGV in its
// collector). A runner runs no unsafe code, so a fault outside a
// program's panic has no other cause there; a panic's text starts with
// "panic:", not with the signal.
func outOfMemory(stderr string) bool {
	return strings.Contains(stderr, "out of memory") || strings.Contains(stderr, "cannot allocate memory") ||
		strings.HasPrefix(stderr, "SIGSEGV: segmentation violation") || strings.Contains(stderr, "fatal error: unexpected signal during runtime execution")
}

// headBuffer keeps the first max bytes written to it: where the Go
// runtime says why it stopped, before its goroutines' stacks.
type headBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *headBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := t.max - len(t.b); room > 0 {
		t.b = append(t.b, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (t *headBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
