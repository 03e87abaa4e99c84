package harness

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/devstack"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// stopGrace is how long a process gets to exit after SIGTERM.
const stopGrace = 15 * time.Second

// logTail is how much of a process's log a failed test shows.
const logTail = 64 << 10

// Proc is one running Switchboard process. Its output goes to a log file
// that the test log shows, tail first, when the test fails.
type Proc struct {
	t       testing.TB
	Name    string
	bin     string
	args    []string
	env     []string
	probe   devstack.Probe
	logPath string

	mu sync.Mutex
	p  *devstack.Process
}

// StartProc starts binary bin (a name in BinDir) with args and extra
// environment env, and waits until probe succeeds. t.Cleanup stops it.
func StartProc(t testing.TB, name, bin string, args, env []string, probe devstack.Probe) *Proc {
	t.Helper()
	return StartExternal(t, name, filepath.Join(BinDir(t), bin), args, env, probe)
}

// Restart starts the process again (after Stop or Kill) and waits until it
// is ready.
func (p *Proc) Restart() {
	p.t.Helper()
	p.Start()
	p.WaitReady()
}

// Start starts the process without waiting for readiness, for tests that
// watch it become ready.
func (p *Proc) Start() {
	p.t.Helper()
	out, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		p.t.Fatal(err)
	}
	proc, err := devstack.StartProcess(devstack.ProcessSpec{Name: p.Name, Path: p.bin, Args: p.args, Env: p.env, Output: out})
	if err != nil {
		out.Close()
		p.t.Fatal(err)
	}
	go func() { <-proc.Done(); out.Close() }()
	p.mu.Lock()
	p.p = proc
	p.mu.Unlock()
}

// WaitReady polls the readiness probe until it succeeds, failing the test
// if the process exits first or ReadyTimeout passes.
func (p *Proc) WaitReady() {
	p.t.Helper()
	ctx, cancel := readyContext(p.t)
	defer cancel()
	if err := devstack.WaitReady(ctx, p.current(), p.probe); err != nil {
		p.t.Fatalf("%s: %v\n%s", p.Name, err, p.Log(logTail))
	}
}

// Stop stops the process gracefully (SIGTERM, then SIGKILL after a grace
// period). Stopping a stopped process does nothing.
func (p *Proc) Stop() {
	if cur := p.current(); cur != nil {
		_ = cur.Stop(stopGrace)
	}
}

// Kill kills the process at once, as a crash would.
func (p *Proc) Kill() {
	if cur := p.current(); cur != nil {
		cur.Kill()
	}
}

// Running reports whether the process is alive.
func (p *Proc) Running() bool {
	cur := p.current()
	if cur == nil {
		return false
	}
	select {
	case <-cur.Done():
		return false
	default:
		return true
	}
}

// Pid returns the process id of the current run.
func (p *Proc) Pid() int { return p.current().Pid() }

// Log returns up to the last max bytes of the process's output.
func (p *Proc) Log(max int64) string {
	f, err := os.Open(p.logPath)
	if err != nil {
		return ""
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > max {
		_, _ = f.Seek(st.Size()-max, io.SeekStart)
	}
	b, _ := io.ReadAll(f)
	return string(b)
}

// AwaitLog waits until the process's output holds every one of texts. A
// line reaches the log file through a goroutine of the test process that
// copies the process's output, so a line written before an effect the
// test saw may reach the file after it: a test reads its log by waiting.
func (p *Proc) AwaitLog(t testing.TB, texts ...string) {
	t.Helper()
	testkit.Eventually(t, p.Name+" to log "+strings.Join(texts, " and "), 10*time.Second, func() error {
		log := p.Log(4 << 20)
		for _, text := range texts {
			if !strings.Contains(log, text) {
				return fmt.Errorf("no %q in its log", text)
			}
		}
		return nil
	})
}

func (p *Proc) current() *devstack.Process {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.p
}
