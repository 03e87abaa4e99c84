package config

import (
	"errors"
	"runtime"
	"time"
)

// CodeMode configures code mode: the run_code tool, offered beside the
// optimizer's find_tool and call_tool, runs a short Starlark program in
// which each tool the caller may use is a function; every call it makes
// is admitted like a direct one (docs/code-mode.md). Read by
// the aggregator at start; servers[].codeMode turns it on or off per
// server.
type CodeMode struct {
	// Enabled offers run_code in the optimizer view of the whole catalog
	// (/mcp/optimized, and /mcp with gateway.optimizer.enabled) and, unless
	// servers[].codeMode says otherwise, of every server.
	Enabled bool `yaml:"enabled"`
	// MaxSteps bounds a program's Starlark execution steps; Timeout its
	// wall time, its tool calls included; MaxMemory (bytes) the memory of
	// the process running it; MaxCalls the tool calls it makes;
	// MaxOutputBytes its result (as JSON) and its printed lines;
	// MaxProgramBytes its text.
	MaxSteps        uint64   `yaml:"maxSteps"`
	Timeout         Duration `yaml:"timeout"`
	MaxMemory       int64    `yaml:"maxMemory"`
	MaxCalls        int      `yaml:"maxCalls"`
	MaxOutputBytes  int      `yaml:"maxOutputBytes"`
	MaxProgramBytes int      `yaml:"maxProgramBytes"`
	// MaxConcurrent bounds the programs running at once on one replica,
	// each in a runner process of its own limited to one core; a program
	// that cannot start within its timeout is refused as busy.
	MaxConcurrent int `yaml:"maxConcurrent"`
}

// Code mode defaults and bounds.
const (
	DefaultCodeSteps         = 1_000_000
	DefaultCodeTimeout       = 30 * time.Second
	DefaultCodeMemory        = 64 << 20
	DefaultCodeCalls         = 50
	DefaultCodeOutputBytes   = 64 << 10
	DefaultCodeProgramBytes  = 16 << 10
	MaxCodeTimeout           = 10 * time.Minute
	MinCodeMemory            = 8 << 20
	MaxCodeMemory            = 4 << 30
	MaxCodeCalls             = 10_000
	MaxCodeOutputBytes       = 4 << 20
	MaxCodeProgramBytes      = 1 << 20
	MaxCodeConcurrentRunners = 256
)

// CodeRunMargin is how much longer than aggregator.codeMode.timeout
// gateway.timeouts.request must be. A run's own timeout starts after the
// gateway's call to the aggregator did (admission, a runner to start),
// and its error comes back after it: at once for a program the runner
// stops, within 2s for one the pool kills at its timeout (its runGrace),
// the rest for starting the run and carrying the answer back. With less,
// the gateway cut every run reaching its timeout: the model read "the
// request timed out", the bound, line, calls and printed lines lost.
const CodeRunMargin = 3 * time.Second

// WithDefaults is the section with every unset value at its default;
// MaxConcurrent defaults to the cores the replica may use (GOMAXPROCS).
func (c CodeMode) WithDefaults() CodeMode {
	if c.MaxSteps == 0 {
		c.MaxSteps = DefaultCodeSteps
	}
	c.Timeout = Duration(c.Timeout.Or(DefaultCodeTimeout))
	if c.MaxMemory == 0 {
		c.MaxMemory = DefaultCodeMemory
	}
	c.MaxCalls = orInt(c.MaxCalls, DefaultCodeCalls)
	c.MaxOutputBytes = orInt(c.MaxOutputBytes, DefaultCodeOutputBytes)
	c.MaxProgramBytes = orInt(c.MaxProgramBytes, DefaultCodeProgramBytes)
	// GOMAXPROCS follows the container's CPU limit (NumCPU is the
	// node's): each runner takes a core and its memory bound, which a
	// pod sized for two cores must hold, not one sized for the node.
	c.MaxConcurrent = orInt(c.MaxConcurrent, runtime.GOMAXPROCS(0))
	return c
}

// Validate checks the section as WithDefaults returns it.
func (c CodeMode) Validate() error {
	var errs []error
	if t := time.Duration(c.Timeout); t <= 0 || t > MaxCodeTimeout {
		errs = append(errs, keyErr("aggregator.codeMode.timeout", "must be positive and at most %s", MaxCodeTimeout))
	}
	if c.MaxMemory < MinCodeMemory || c.MaxMemory > MaxCodeMemory {
		errs = append(errs, keyErr("aggregator.codeMode.maxMemory", "must be between %d and %d bytes", MinCodeMemory, int64(MaxCodeMemory)))
	}
	if c.MaxCalls <= 0 || c.MaxCalls > MaxCodeCalls {
		errs = append(errs, keyErr("aggregator.codeMode.maxCalls", "must be between 1 and %d", MaxCodeCalls))
	}
	if c.MaxOutputBytes <= 0 || c.MaxOutputBytes > MaxCodeOutputBytes {
		errs = append(errs, keyErr("aggregator.codeMode.maxOutputBytes", "must be between 1 and %d", MaxCodeOutputBytes))
	}
	if c.MaxProgramBytes <= 0 || c.MaxProgramBytes > MaxCodeProgramBytes {
		errs = append(errs, keyErr("aggregator.codeMode.maxProgramBytes", "must be between 1 and %d", MaxCodeProgramBytes))
	}
	if c.MaxConcurrent <= 0 || c.MaxConcurrent > MaxCodeConcurrentRunners {
		errs = append(errs, keyErr("aggregator.codeMode.maxConcurrent", "must be between 1 and %d", MaxCodeConcurrentRunners))
	}
	return errors.Join(errs...)
}

// CodeModeIn reports whether run_code is offered in server's optimizer
// view ("" for the whole catalog).
func (c *Config) CodeModeIn(server string) bool {
	if s, ok := c.ServerByName(server); ok && s.CodeMode != nil {
		return *s.CodeMode
	}
	return c.Aggregator.CodeMode.Enabled
}
