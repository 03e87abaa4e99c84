package harness

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/devstack"
)

// StartExternal starts the program at path (StartProc's binaries, or one
// that is not a Switchboard binary, such as a load balancer) with args and
// extra environment env: its output goes to a log shown when the test
// fails, it is ready once probe succeeds, and t.Cleanup stops it.
func StartExternal(t testing.TB, name, path string, args, env []string, probe devstack.Probe) *Proc {
	t.Helper()
	p := &Proc{t: t, Name: name, bin: path, args: args, env: env, probe: probe,
		logPath: filepath.Join(t.TempDir(), strings.ReplaceAll(name, "/", "_")+".log")}
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("---- log of %s (last %d KiB) ----\n%s", name, logTail>>10, p.Log(logTail))
		}
	})
	p.Restart()
	return p
}
