//go:build unix && !linux

package stdio

import "syscall"

// dieWithParent does nothing where the kernel has no parent-death signal:
// a server outlives an aggregator that dies without stopping it.
func dieWithParent(*syscall.SysProcAttr) {}
