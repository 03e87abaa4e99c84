// Package codemode runs code mode's programs: short Starlark programs
// (go.starlark.net) in which each tool a caller may use is a function, so
// that one tools/call of run_code does the work of several calls and
// returns only what matters.
//
// A program runs in a runner, a child process of the aggregator
// (switchboard-aggregator --code-runner) that holds no configuration, no
// credential and no connection: it asks its parent for each tool call
// over its standard input and output, and the parent makes the call
// through the aggregator's one admission path as the caller (internal/
// server, codemode.go). The runner enforces the program's bounds
// (execution steps, wall time, memory, tool calls, output size); the
// memory bound is the process's own (RLIMIT_DATA, and a heap watchdog
// that stops the program first with a clear error), which no bound inside
// a shared process could be. The parent keeps a pool of runners, one
// program at a time each, so programs can use no more than the pool's
// share of the machine however they misbehave.
//
// The protocol is JSON, one message a line, each at most MaxMessageBytes.
package codemode

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"
)

// MaxMessageBytes bounds one protocol message: a program, a tool call's
// arguments, a tool's result, or the program's result (each bounded by
// less: Bounds).
const MaxMessageBytes = 8 << 20

// errUnsendable is a message that cannot go out as one protocol message:
// not JSON, or larger than MaxMessageBytes.
var errUnsendable = errors.New("code runner: the message cannot be sent")

// encodeMessage is m as one protocol line, or errUnsendable: a line the
// other side would refuse to read would end the runner.
func encodeMessage(m any) ([]byte, error) {
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errUnsendable, err)
	}
	if len(b) > MaxMessageBytes {
		return nil, fmt.Errorf("%w: %d bytes as JSON, more than %d", errUnsendable, len(b), MaxMessageBytes)
	}
	return append(b, '\n'), nil
}

// Bounds are one program's limits.
type Bounds struct {
	// MaxSteps bounds the Starlark execution steps.
	MaxSteps uint64 `json:"maxSteps"`
	// Timeout bounds the program's wall time, tool calls included.
	Timeout time.Duration `json:"timeout"`
	// MaxMemory bounds the runner's heap while the program runs.
	MaxMemory int64 `json:"maxMemory"`
	// MaxCalls bounds the tool calls the program makes.
	MaxCalls int `json:"maxCalls"`
	// MaxOutputBytes bounds the program's result, as JSON, and its
	// printed lines.
	MaxOutputBytes int `json:"maxOutputBytes"`
}

// toRunner is a message from the aggregator to a runner: a program to
// run, or the answer to one of its tool calls.
type toRunner struct {
	Run    *runRequest `json:"run,omitempty"`
	Answer *answer     `json:"answer,omitempty"`
}

type runRequest struct {
	Program string `json:"program"`
	// Tools are the names of the tools the caller may call that the
	// program names (Identifiers).
	Tools  []string `json:"tools"`
	Bounds Bounds   `json:"bounds"`
}

// answer is the outcome of a tool call: its value, or an error the
// program may catch (try_call), or a bound reached, which it may not.
type answer struct {
	ID    int             `json:"id"`
	Value json.RawMessage `json:"value,omitempty"`
	Error string          `json:"error,omitempty"`
	Bound string          `json:"bound,omitempty"`
}

// fromRunner is a message from a runner: a tool call, or the program's
// end.
type fromRunner struct {
	Call *toolCallMsg `json:"call,omitempty"`
	Done *Result      `json:"done,omitempty"`
}

type toolCallMsg struct {
	ID        int             `json:"id"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

// Result is how a program ended.
type Result struct {
	// Value is the program's result variable, as JSON (null when it set
	// none); empty when it failed.
	Value json.RawMessage `json:"value,omitempty"`
	// Printed are the lines the program printed, cut to the output bound.
	Printed []string `json:"printed,omitempty"`
	// Error is why it failed ("" when it did not), Line where (0 for
	// none), and Bound the bound it reached, if that is why: one of the
	// Bound* names.
	Error string `json:"error,omitempty"`
	Line  int    `json:"line,omitempty"`
	Bound string `json:"bound,omitempty"`
	// Steps and Calls are what it used.
	Steps uint64 `json:"steps"`
	Calls int    `json:"calls"`
	// Spent says the runner mapped more memory than the program's bound
	// while it ran: the runtime keeps what it maps, which counts against
	// the process's limit, so the next program would start with less
	// room than its bound. The pool does not keep such a runner.
	Spent bool `json:"spent,omitempty"`
}

// The bounds, as errors and metrics name them (each is the
// aggregator.codeMode key that sets it).
const (
	BoundSteps   = "maxSteps"
	BoundTime    = "timeout"
	BoundMemory  = "maxMemory"
	BoundCalls   = "maxCalls"
	BoundOutput  = "maxOutputBytes"
	BoundProgram = "maxProgramBytes"
)

// conn is the runner's side of the protocol.
type conn struct {
	in *bufio.Scanner
	// mu keeps the backstop's message from being written into one the
	// program's goroutine is writing.
	mu  sync.Mutex
	out *bufio.Writer
}

func (c *conn) read(m *toRunner) error {
	if !c.in.Scan() {
		if err := c.in.Err(); err != nil {
			return err
		}
		return io.EOF
	}
	return json.Unmarshal(c.in.Bytes(), m)
}

func (c *conn) write(m fromRunner) error {
	b, err := encodeMessage(m)
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, err := c.out.Write(b); err != nil {
		return err
	}
	return c.out.Flush()
}
