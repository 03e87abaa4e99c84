//go:build unix

package codemode

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// limit bounds the runner's writable memory to memory more than the
// process has mapped before any program runs, and lowers its priority.
// RLIMIT_DATA counts every private writable mapping, touched or not: the
// Go runtime maps tens of MiB of its own (its heap's index) before the
// first allocation, which a bound on the program must not count.
func limit(memory int64) error {
	total := uint64(memory + mappedData())
	lim := &syscall.Rlimit{Cur: total, Max: total}
	if err := syscall.Setrlimit(syscall.RLIMIT_DATA, lim); err != nil {
		return fmt.Errorf("limit memory: %w", err)
	}
	lowerPriority(runnerNice)
	return nil
}

// runnerNice is the runner's scheduling priority: below the aggregator's,
// so that programs yield the core to the calls it serves.
const runnerNice = 10

// lowerPriority sets the nice value of every thread of the process. On
// Linux a nice value is a thread's, and the Go runtime has started
// several before a runner's main runs: setting the process's (its main
// thread's) left the threads that run programs at the aggregator's
// priority. A thread started later inherits its creator's, so the loop
// ends once a round finds no thread it had not set.
func lowerPriority(nice int) {
	done := map[int]bool{}
	for round := 0; round < 10; round++ {
		entries, err := os.ReadDir("/proc/self/task")
		if err != nil {
			// No per-thread view (not Linux): the value is the process's.
			_ = syscall.Setpriority(syscall.PRIO_PROCESS, 0, nice)
			return
		}
		fresh := false
		for _, e := range entries {
			tid, err := strconv.Atoi(e.Name())
			if err != nil || done[tid] {
				continue
			}
			_ = syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice)
			done[tid], fresh = true, true
		}
		if !fresh {
			return
		}
	}
}

// mappedData is the process's data mappings as the kernel counts them
// against RLIMIT_DATA (VmData), or 0 where it does not say.
func mappedData() int64 {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "VmData:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
