//go:build unix

package codemode

import (
	"fmt"
	"syscall"
)

// limit bounds the runner's writable memory (RLIMIT_DATA counts the
// heap's mappings; address space reserved and never written does not) and
// lowers its priority.
func limit(memory int64) error {
	lim := &syscall.Rlimit{Cur: uint64(memory), Max: uint64(memory)}
	if err := syscall.Setrlimit(syscall.RLIMIT_DATA, lim); err != nil {
		return fmt.Errorf("limit memory: %w", err)
	}
	_ = syscall.Setpriority(syscall.PRIO_PROCESS, 0, 10)
	return nil
}
