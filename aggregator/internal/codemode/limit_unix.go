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
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, 0, 10)
	return nil
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
