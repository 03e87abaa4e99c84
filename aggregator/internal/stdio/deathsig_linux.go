package stdio

import "syscall"

// dieWithParent has the kernel kill the server when the aggregator dies
// without stopping it (killed, out of memory): a server in a process
// group of its own gets no signal sent to the aggregator's, and one that
// does not exit when its stdin closes would run on, orphaned. The signal
// follows the thread that started the server; Go ends a thread only when
// a goroutine locked to it exits, which the aggregator's never do.
func dieWithParent(attr *syscall.SysProcAttr) {
	attr.Pdeathsig = syscall.SIGKILL
}
