package stdio

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// A stdio server (a third-party npx or uvx package) runs as the
// aggregator's user, which could read the aggregator's whole environment
// (its service tokens, the other backends' keys) in /proc/<its
// parent>/environ, and its memory. Two things keep it out: the
// aggregator is not dumpable (HideFromServers), which closes those files
// to every process of its user that lacks CAP_SYS_PTRACE; and the server
// starts with no capability at all, CAP_SYS_PTRACE included, which an
// aggregator running as root would otherwise hand it.
//
// The capabilities go in a launcher: the aggregator's own binary, started
// with launcherFlag, drops them and then executes the server in its
// place (the same process: its pid, process group and parent-death
// signal are the server's). Go cannot drop them between fork and exec.

// launcherFlag starts the aggregator's binary (or a test binary that
// links this package) as the launcher: launcherFlag, the program's path,
// then the server's argv.
const launcherFlag = "--switchboard-stdio-launcher"

// The launcher runs here, before main, so that every binary that starts
// stdio servers (the aggregator, the tests of the packages that do) is
// one without wiring of its own.
func init() {
	if len(os.Args) > 3 && os.Args[1] == launcherFlag {
		os.Exit(launch(os.Args[2], os.Args[3:]))
	}
}

// serverCommand is the command that runs the program at path with argv
// (argv[0] its name) through the launcher.
func serverCommand(path string, argv []string) *exec.Cmd {
	// /proc/self/exe, read by the child when it executes it, is the
	// aggregator's binary even once an upgrade has replaced the file.
	cmd := exec.Command("/proc/self/exe", append([]string{launcherFlag, path}, argv...)...)
	cmd.Args[0] = "switchboard-stdio-launcher"
	return cmd
}

// launch drops every capability and executes path with argv and the
// environment the bridge prepared; it returns only if it could not.
func launch(path string, argv []string) int {
	// Capabilities and no_new_privs belong to a thread; the execve below
	// must be made by the one that dropped them.
	runtime.LockOSThread()
	if err := dropPrivileges(); err != nil {
		fmt.Fprintln(os.Stderr, "switchboard: the stdio server was not started: "+err.Error())
		return 126
	}
	err := syscall.Exec(path, argv, os.Environ())
	fmt.Fprintf(os.Stderr, "switchboard: the stdio server was not started: exec %s: %v\n", path, err)
	return 127
}

// dropPrivileges empties the thread's bounding, ambient, effective,
// permitted and inheritable capability sets and sets no_new_privs, so
// that what it executes starts with no capability, even as root, and
// gains none from a setuid or file-capability program.
func dropPrivileges() error {
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("setting no_new_privs: %w", err)
	}
	// The bounding set first: dropping from it takes CAP_SETPCAP. Without
	// it (a user other than root) the set stays, harmless: no_new_privs
	// keeps an execve from granting more than the permitted set, which
	// is emptied below.
	for c := 0; ; c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EPERM) {
			break // past the kernel's last capability, or not ours to drop
		}
		if err != nil {
			return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
		}
	}
	// Kernels before 4.3 have no ambient set (EINVAL).
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clearing the ambient capabilities: %w", err)
	}
	var none [2]unix.CapUserData
	if err := unix.Capset(&unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}, &none[0]); err != nil {
		return fmt.Errorf("dropping the capabilities: %w", err)
	}
	return nil
}

// HideFromServers makes the aggregator not dumpable: its environment
// (/proc/<pid>/environ), memory and file descriptors are closed to the
// stdio servers it runs, which hold no CAP_SYS_PTRACE. It costs core
// dumps, and attaching a debugger or strace as the same user without
// that capability; profiling (pprof) is the Go runtime's own and is not
// affected.
func HideFromServers() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("making the aggregator not dumpable: %w", err)
	}
	return nil
}
