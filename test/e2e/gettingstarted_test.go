package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// step is one annotated block of docs/getting-started.md: the comment
// before a fenced block says what to do with it.
type step struct {
	verb, arg string // run, start, file, append; what follows the colon
	body      string
}

var stepComment = regexp.MustCompile(`^<!-- (run|start|file|append): (.*) -->$`)

// gettingStartedSteps reads the page's steps, in order.
func gettingStartedSteps(t *testing.T) []step {
	raw, err := os.ReadFile(filepath.Join(harness.RepoRoot(t), "docs", "getting-started.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(raw), "\n")
	var steps []step
	for i := 0; i < len(lines); i++ {
		m := stepComment.FindStringSubmatch(lines[i])
		if m == nil {
			continue
		}
		if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "```") {
			t.Fatalf("line %d: %s is not followed by a fenced block", i+1, lines[i])
		}
		var body []string
		for i += 2; i < len(lines) && lines[i] != "```"; i++ {
			body = append(body, lines[i])
		}
		steps = append(steps, step{verb: m[1], arg: m[2], body: strings.Join(body, "\n") + "\n"})
	}
	return steps
}

var quoted = regexp.MustCompile(`"([^"]*)"`)

// TestGettingStarted runs docs/getting-started.md: every command in it, in
// order, in a directory of its own, with what each step says it shows.
// Only the addresses differ from the page's (free ports, so that the test
// runs beside others), and the binaries are the ones under test.
func TestGettingStarted(t *testing.T) {
	bin := harness.BinDir(t)
	dir := t.TempDir()
	// PostgreSQL runs as the postgres user when the test runs as root: it
	// must be able to traverse switchboard-dev's temporary directory.
	tmp, err := os.MkdirTemp("", "switchboard-getting-started-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}
	addrs := map[string]string{"127.0.0.1:8080": harness.FreeAddr(t), "127.0.0.1:9101": harness.FreeAddr(t)}
	localize := func(s string) string {
		for from, to := range addrs {
			s = strings.ReplaceAll(s, from, to)
		}
		if strings.HasPrefix(s, "bin/") {
			s = bin + "/" + strings.TrimPrefix(s, "bin/")
		}
		return s
	}
	// The page leaves the services on their default ports; here they get
	// free ones.
	grpcListens := "aggregator:\n  listen: " + harness.FreeAddr(t) + "\n"
	indexerListen := "indexer:\n  listen: " + harness.FreeAddr(t) + "\n"
	shell := func(command string) *exec.Cmd {
		cmd := exec.Command("sh", "-c", localize(strings.TrimSpace(command)))
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		return cmd
	}

	steps := gettingStartedSteps(t)
	if len(steps) < 8 {
		t.Fatalf("docs/getting-started.md has %d steps", len(steps))
	}
	for i, s := range steps {
		what := quoted.FindStringSubmatch(s.arg)
		switch {
		case s.verb == "run" && s.arg == "build":
			// harness.BinDir built the binaries (make build does the
			// same): they are all there.
			for _, b := range []string{"switchboard-dev", "switchboard-gateway", "switchboard-aggregator", "switchboard-indexer", "switchboard-demo-backend"} {
				if _, err := os.Stat(filepath.Join(bin, b)); err != nil {
					t.Fatalf("step %d: %v", i+1, err)
				}
			}
		case s.verb == "file":
			body := localize(s.body)
			body = strings.Replace(body, "aggregator:\n", grpcListens, 1) + indexerListen
			body = strings.Replace(body, "gateway:\n", "gateway:\n  listen: "+addrs["127.0.0.1:8080"]+"\n", 1)
			if err := os.WriteFile(filepath.Join(dir, s.arg), []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		case s.verb == "append":
			path := filepath.Join(dir, s.arg)
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			// Appended to the end of servers, which the test's listens
			// follow.
			edited := strings.Replace(string(raw), indexerListen, localize(s.body)+indexerListen, 1)
			harness.WriteFileAtomic(t, path, []byte(edited))
		case s.verb == "start" && what != nil:
			cmd, out := shell(s.body), &testkit.LogBuffer{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatalf("step %d: %v", i+1, err)
			}
			t.Cleanup(func() {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
				done := make(chan struct{})
				go func() { _ = cmd.Wait(); close(done) }()
				select {
				case <-done:
				case <-time.After(30 * time.Second):
					_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
				}
				if t.Failed() {
					t.Logf("---- output of step %d ----\n%s", i+1, out.String())
				}
			})
			want := localize(what[1])
			deadline := time.Now().Add(2 * time.Minute)
			for !strings.Contains(out.String(), want) {
				if time.Now().After(deadline) {
					t.Fatalf("step %d: no %q within 2 minutes:\n%s", i+1, want, out.String())
				}
				time.Sleep(50 * time.Millisecond)
			}
		case s.verb == "run" && what != nil:
			eventually := strings.HasPrefix(s.arg, "eventually ")
			deadline := time.Now().Add(30 * time.Second)
			for {
				out, err := shell(s.body).CombinedOutput()
				if err == nil && strings.Contains(string(out), what[1]) {
					break
				}
				if !eventually || time.Now().After(deadline) {
					t.Fatalf("step %d: %v, want %q in:\n%s", i+1, err, what[1], out)
				}
				time.Sleep(200 * time.Millisecond)
			}
		default:
			t.Fatalf("step %d: cannot do %q: %q", i+1, s.verb, s.arg)
		}
	}
}
