package stdio

import (
	"bufio"
	"log/slog"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
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

// TestServerCannotReadTheAggregatorsEnvironment: a stdio server runs as
// the aggregator's user, but starts with no capability (none in any set,
// the bounding set included, and no_new_privs), and cannot read the
// environment of its aggregator, which is not dumpable: the tokens there
// are not the server's (configuration.md, backends[].env). It once read
// all of it in /proc/<its parent>/environ, as root or not.
func TestServerCannotReadTheAggregatorsEnvironment(t *testing.T) {
	const secret = "aggregator-only-0123456789"
	t.Setenv("STDIO_TEST_AGGREGATOR_TOKEN", secret)
	if err := HideFromServers(); err != nil {
		t.Fatal(err)
	}
	cs := connectTo(t, startMode(t, "raw-snoop", nil), nil)
	seen, err := callText(t.Context(), cs, "snoop")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(seen, secret) || !strings.Contains(seen, "parent's environment: open /proc/") {
		t.Errorf("the server read its aggregator's environment:\n%s", seen)
	}
	sets := []string{"CapInh", "CapPrm", "CapEff", "CapAmb"}
	if mayDropBoundingSet(t) {
		// Elsewhere (not root) the bounding set stays: no_new_privs and
		// the empty permitted set keep the server from gaining what it
		// allows.
		sets = append(sets, "CapBnd")
	}
	for _, set := range sets {
		if !regexp.MustCompile(`(?m)^` + set + `:\s+0+$`).MatchString(seen) {
			t.Errorf("the server holds capabilities (%s):\n%s", set, seen)
		}
	}
	if !regexp.MustCompile(`(?m)^NoNewPrivs:\s+1$`).MatchString(seen) {
		t.Errorf("the server may gain privileges:\n%s", seen)
	}
}

// mayDropBoundingSet reports whether the test holds CAP_SETPCAP (as
// root), which the launcher needs to empty the bounding set.
func mayDropBoundingSet(t *testing.T) bool {
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^CapEff:\s+([0-9a-f]+)$`).FindSubmatch(status)
	if m == nil {
		t.Fatalf("no CapEff in /proc/self/status:\n%s", status)
	}
	eff, err := strconv.ParseUint(string(m[1]), 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	const capSetPCap = 8
	return eff&(1<<capSetPCap) != 0
}
