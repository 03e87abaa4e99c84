package harness

import (
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/devstack"
)

func TestMain(m *testing.M) { Main(m) }

// TestKillAndRestart exercises what fault tests rely on: a killed process
// is reported as not running and a restart brings it back on the same
// address, with the output of both runs in its log.
func TestKillAndRestart(t *testing.T) {
	addr := FreeAddr(t)
	p := StartProc(t, "backend:solo", devstack.DemoBackendBin, []string{"--listen", addr, "--name", "solo"}, nil,
		devstack.HTTPOK("http://"+addr+"/healthz"))
	if !p.Running() {
		t.Fatal("a started process is not running")
	}
	first := p.Pid()
	p.Kill()
	if p.Running() {
		t.Fatal("a killed process is still running")
	}
	if _, err := http.Get("http://" + addr + "/healthz"); err == nil {
		t.Fatal("the killed backend still answers")
	}
	p.Restart()
	if !p.Running() || p.Pid() == first {
		t.Fatalf("restart: running %v, pid %d (was %d)", p.Running(), p.Pid(), first)
	}
	resp, err := http.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	p.Stop()
	if p.Running() {
		t.Fatal("a stopped process is still running")
	}
	// Each run logged its start line.
	if n := countLines(p.Log(logTail), "msg=serving"); n != 2 {
		t.Fatalf("log has %d start lines, want 2:\n%s", n, p.Log(logTail))
	}
}

func countLines(log, substr string) int {
	n := 0
	for line := range strings.Lines(log) {
		if strings.Contains(line, substr) {
			n++
		}
	}
	return n
}
