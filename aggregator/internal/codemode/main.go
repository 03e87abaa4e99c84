package codemode

import (
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
)

// RunnerMain is a runner process's main (the aggregator binary started
// with RunnerFlag): it limits itself, then serves programs on its
// standard input and output until the aggregator closes them.
func RunnerMain(args []string) int {
	var memory int64
	for i := 0; i+1 < len(args); i++ {
		if args[i] == MemoryFlag {
			memory, _ = strconv.ParseInt(args[i+1], 10, 64)
		}
	}
	if memory <= 0 {
		fmt.Fprintln(os.Stderr, "code runner: "+MemoryFlag+" is required")
		return 2
	}
	// One core at most, at a lower priority than the aggregator: a
	// program spinning to its step bound leaves the rest of the machine
	// to the callers who are not running code.
	runtime.GOMAXPROCS(1)
	// The heap is kept under the bound by the collector where it can
	// be; the process's data limit makes the bound hard. The collector
	// starts working hard well below that limit (half the headroom), so
	// that garbage and the runtime's own memory do not reach it before a
	// collection, for a program whose live heap is within its bound.
	debug.SetMemoryLimit(memory - memoryHeadroom/2)
	// A built-in recursing through a deep value (json.decode of "[" *
	// 300000) grows its goroutine's stack, which the watchdog, counting
	// the heap, does not see: it grew into the data limit, where the
	// runtime died of a fault of its own. Bounded, the recursion ends in
	// the runtime's "stack overflow", well within the limit, which the
	// pool reports as the program's memory bound (runner.ended).
	debug.SetMaxStack(maxStack(memory - memoryHeadroom))
	if err := limit(memory); err != nil {
		fmt.Fprintln(os.Stderr, "code runner: "+err.Error())
		return 2
	}
	if err := Serve(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "code runner: "+err.Error())
		return 1
	}
	return 0
}

// maxStack bounds a goroutine's stack for a program whose memory bound
// is memory: a quarter of it, and of the headroom beyond it that the
// stack is taken from (the watchdog lets the heap reach the bound). The
// runtime grows a stack by doubling it, both copies held while it
// copies, so a stack takes at most one and a half times this.
func maxStack(memory int64) int { return int(min(memory, memoryHeadroom) / 4) }
