//go:build unix

package stdio

import (
	"os/exec"
	"syscall"
)

// ownGroup starts cmd in a process group of its own: a signal sent to
// the aggregator's group (a terminal's Ctrl-C, a runner stopping it) does
// not reach the server, which the aggregator stops itself, and what the
// server starts (npx's node, a wrapper's child) can be stopped with it.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	dieWithParent(cmd.SysProcAttr)
}

// killGroup kills what is left of cmd's process group once the server
// itself has stopped, so that no child of it outlives it.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
