package stdio

import (
	"bufio"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// hostStubborn is an aggregator of one stdio server that outlives its
// stdin's end and ignores SIGTERM (serverEnv "host"): it logs the
// server's start, with its pid, on its stdout, and runs until killed.
func hostStubborn() {
	_, err := Start(Spec{Name: "stubborn", Command: []string{os.Args[0], "-test.run=^$"},
		Env: map[string]string{serverEnv: "stubborn"}, Log: slog.New(slog.NewTextHandler(os.Stdout, nil))})
	if err != nil {
		panic(err)
	}
	select {}
}

// TestServerDoesNotOutliveItsAggregator: a stdio server, in a process
// group of its own, stops when its aggregator dies without stopping it
// (here SIGKILL; an out-of-memory kill alike); one that ignores its
// stdin's end and SIGTERM once ran on, orphaned.
func TestServerDoesNotOutliveItsAggregator(t *testing.T) {
	host := exec.Command(os.Args[0], "-test.run=^$")
	host.Env = append(os.Environ(), serverEnv+"=host")
	out, err := host.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := host.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = host.Process.Kill(); _ = host.Wait() })
	started := regexp.MustCompile(`stdio server started.* pid=(\d+)`)
	lines := bufio.NewScanner(out)
	server := 0
	for server == 0 && lines.Scan() {
		if m := started.FindStringSubmatch(lines.Text()); m != nil {
			server, _ = strconv.Atoi(m[1])
		}
	}
	if server == 0 {
		t.Fatal("the host never started its stdio server")
	}
	t.Cleanup(func() { _ = syscall.Kill(server, syscall.SIGKILL) })
	_ = host.Process.Kill()
	_ = host.Wait()
	testkit.Eventually(t, "the server stopped with its aggregator", 10*time.Second, func() bool {
		return !running(server)
	})
}

// running reports whether pid is a process that has not exited (a zombie
// no one reaped has).
func running(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	state := regexp.MustCompile(`\) (\S)`).FindSubmatch(stat)
	return state != nil && string(state[1]) != "Z"
}
