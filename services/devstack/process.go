// Package devstack starts and supervises the processes of a local
// Switchboard: the demo backends, the aggregator, the indexer and the
// gateway, each a separate child process. switchboard-dev runs a whole
// stack from one configuration file with it, and the end-to-end test
// harness uses its process and readiness primitives.
package devstack

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// ProcessSpec describes a child process.
type ProcessSpec struct {
	// Name prefixes every line of the child's output ("gateway | ...").
	Name string
	Path string
	Args []string
	// Env is added to the runner's own environment.
	Env []string
	// Output receives the child's stdout and stderr, line by line with the
	// name prefix. Writes are serialised per Output by the caller's writer;
	// use a SyncWriter when several processes share one.
	Output io.Writer
}

// Process is a running child. It is in its own process group, so a
// terminal's Ctrl-C reaches only the runner, which stops children in
// order, and it is killed if the runner dies (Pdeathsig).
type Process struct {
	Spec ProcessSpec
	cmd  *exec.Cmd
	done chan struct{}
	err  error // exit status, valid after done is closed
}

// StartProcess starts spec.
func StartProcess(spec ProcessSpec) (*Process, error) {
	cmd := exec.Command(spec.Path, spec.Args...)
	cmd.Env = append(os.Environ(), spec.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	cmd.Stderr = cmd.Stdout // one pipe, so the order of lines is kept
	p := &Process{Spec: spec, cmd: cmd, done: make(chan struct{})}
	copied := make(chan struct{})
	started := make(chan error, 1)
	// Pdeathsig fires when the thread that forked the child exits, so one
	// locked goroutine starts the child and waits for it: its thread lives
	// exactly as long as the child.
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		go func() { copyLines(spec.Output, spec.Name, out); close(copied) }()
		<-copied // Wait closes the pipe, so read everything first
		p.err = cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		return nil, fmt.Errorf("start %s: %w", spec.Name, err)
	}
	return p, nil
}

// copyLines copies r to w, prefixing each line with name.
func copyLines(w io.Writer, name string, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fmt.Fprintf(w, "%s | %s\n", name, sc.Bytes())
	}
	// A line longer than the buffer ends the scan; drain the rest so the
	// child never blocks on a full pipe.
	_, _ = io.Copy(io.Discard, r)
}

// Pid returns the child's process id.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Done is closed when the child has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err returns how the child exited; call it after Done is closed.
func (p *Process) Err() error { return p.err }

// Stop sends SIGTERM to the child's process group, waits up to grace for it
// to exit, then kills the group. It returns the exit error unless the exit
// was the expected result of the signal.
func (p *Process) Stop(grace time.Duration) error {
	select {
	case <-p.done:
		return p.err
	default:
	}
	_ = syscall.Kill(-p.Pid(), syscall.SIGTERM)
	select {
	case <-p.done:
		var exit *exec.ExitError
		if errors.As(p.err, &exit) && exit.Sys().(syscall.WaitStatus).Signal() == syscall.SIGTERM {
			return nil
		}
		return p.err
	case <-time.After(grace):
		p.Kill()
		return fmt.Errorf("%s did not stop within %s and was killed", p.Spec.Name, grace)
	}
}

// Kill kills the child's process group at once and waits for the exit.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	<-p.done
}

// SyncWriter serialises writes to W, so several children can share one
// output without interleaving within a line.
type SyncWriter struct {
	mu sync.Mutex
	W  io.Writer
}

// Write writes b to W under the lock.
func (s *SyncWriter) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.W.Write(b)
}
