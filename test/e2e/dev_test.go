package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/http/cookiejar"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/devstack"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// devStartTimeout covers initdb, the migrations and four services starting
// on a busy two-core machine.
const devStartTimeout = 3 * time.Minute

// TestDevRunner runs switchboard-dev with a copy of the example
// configuration (on free ports): it prints one ready line with the MCP URL,
// the URL serves every demo backend (one of them Legacy-only) in both eras, and SIGTERM leaves no
// process and no file behind.
func TestDevRunner(t *testing.T) {
	dev := startDev(t)
	for _, pin := range []string{harness.Modern, harness.Legacy} {
		cs := harness.Connect(t, dev.url, pin)
		names := strings.Join(harness.ToolNames(t, cs), ",")
		for _, want := range []string{"weather_forecast", "notes_create_note", "toolbox_echo", "local_echo"} {
			if !strings.Contains(names, want) {
				t.Fatalf("version %q: tools %s lack %s", pin, names, want)
			}
		}
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "weather_forecast", Arguments: map[string]any{"city": "Oslo"}})
		if err != nil {
			t.Fatal(err)
		}
		if answer := structured(t, res); answer["backend"] != "weather" {
			t.Fatalf("weather_forecast answered by %v", answer["backend"])
		}
		// local is a stdio server the aggregator runs.
		res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "local_echo", Arguments: map[string]any{"pin": pin}})
		if err != nil {
			t.Fatal(err)
		}
		if answer := structured(t, res); answer["backend"] != "local" {
			t.Fatalf("local_echo answered by %v", answer["backend"])
		}
		// toolbox serves Legacy sessions only: the aggregator fell back.
		res, err = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "toolbox_echo"})
		if err != nil {
			t.Fatal(err)
		}
		if answer := structured(t, res); answer["backend"] != "toolbox" {
			t.Fatalf("toolbox_echo answered by %v", answer["backend"])
		}
		cs.Close()
	}
	// The operator console, with the dev operator key the example
	// configuration documents.
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &consoleBrowser{t: t, base: dev.console, http: &http.Client{Jar: jar, Timeout: 30 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	if code, loc := b.login("switchboard-dev-operator-key"); code != http.StatusSeeOther || loc != "/console/backends" {
		t.Fatalf("the dev operator key: %d to %q", code, loc)
	}
	backends := b.page("/console/backends")
	for _, name := range []string{"weather", "notes", "toolbox"} {
		if !strings.Contains(backends, `data-backend="`+name+`"`) {
			t.Fatalf("the console lists no %s:\n%s", name, backends)
		}
	}

	family := dev.family(t)
	if err := dev.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := dev.wait(t); err != nil {
		t.Fatalf("switchboard-dev exited with %v after SIGTERM", err)
	}
	dev.assertNothingLeft(t, family)
}

// TestDevRunnerStopsWhenAChildDies kills the aggregator under
// switchboard-dev: the runner stops everything else, exits with an error
// and leaves nothing behind.
func TestDevRunnerStopsWhenAChildDies(t *testing.T) {
	dev := startDev(t)
	family := dev.family(t)
	victim := 0
	for _, pid := range family {
		cmdline, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if strings.Contains(string(cmdline), devstack.AggregatorBin) {
			victim = pid
		}
	}
	if victim == 0 {
		t.Fatal("no aggregator among the runner's processes")
	}
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if err := dev.wait(t); err == nil {
		t.Fatal("switchboard-dev exited 0 after its aggregator was killed")
	}
	dev.assertNothingLeft(t, family)
}

// TestDevRunnerFollowsEdits: an edit of the file switchboard-dev was
// started with reaches the running services, as a reload does in
// production: a virtual server added to it is served.
func TestDevRunnerFollowsEdits(t *testing.T) {
	dev := startDev(t)
	raw, err := os.ReadFile(dev.config)
	if err != nil {
		t.Fatal(err)
	}
	edited := strings.Replace(string(raw), "\nservers:\n", "\nservers:\n  - name: edited\n    backends: [notes]\n", 1)
	if edited == string(raw) {
		t.Fatal("the example configuration has no servers section to edit")
	}
	harness.WriteFileAtomic(t, dev.config, []byte(edited))
	testkit.Eventually(t, "the edited server served", 30*time.Second, func() error {
		client := mcp.NewClient(&mcp.Implementation{Name: "dev-edit", Version: "0"}, nil)
		cs, err := client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: dev.url + "/edited", MaxRetries: -1},
			&mcp.ClientSessionOptions{ProtocolVersion: harness.Modern})
		if err != nil {
			return err
		}
		defer cs.Close()
		res, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			return err
		}
		for _, tool := range res.Tools {
			if strings.HasPrefix(tool.Name, "weather_") {
				return fmt.Errorf("the edited server lists %s", tool.Name)
			}
		}
		if len(res.Tools) == 0 {
			return errors.New("no tools yet")
		}
		return nil
	})
}

// devRun is a running switchboard-dev.
type devRun struct {
	cmd *exec.Cmd
	url string
	// console is the operator console's base URL (the gateway's ops port).
	console string
	tmp     string
	// config is the configuration file the runner was started with.
	config string
	lines  chan string
	exited chan error
}

// startDev starts switchboard-dev on a copy of the example configuration
// and waits for its ready line, which must name the gateway's MCP URL.
func startDev(t *testing.T) *devRun {
	t.Helper()
	bin := harness.BinDir(t)
	configPath, gatewayAddr, opsAddr := copyExample(t)

	// The runner's temporary files (derived config, PostgreSQL data) go
	// here, so the test can check that none is left. PostgreSQL runs as
	// the postgres user when the test runs as root: it must be able to
	// traverse this directory.
	tmp, err := os.MkdirTemp("", "switchboard-dev-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	if err := os.Chmod(tmp, 0o755); err != nil {
		t.Fatal(err)
	}

	logPath := filepath.Join(t.TempDir(), "switchboard-dev.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		logFile.Close()
		if t.Failed() {
			log, _ := os.ReadFile(logPath)
			t.Logf("---- switchboard-dev stderr ----\n%s", log)
		}
	})
	cmd := exec.Command(filepath.Join(bin, "switchboard-dev"), "--config", configPath)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.Stderr = logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &devRun{cmd: cmd, url: "http://" + gatewayAddr + "/mcp", console: "http://" + opsAddr, tmp: tmp, config: configPath,
		lines: make(chan string, 8), exited: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			d.lines <- sc.Text()
		}
		close(d.lines)
		d.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		// Kill a runner the test did not stop; after a normal exit this
		// fails harmlessly, as the process is gone.
		_ = cmd.Process.Kill()
	})

	select {
	case ready := <-d.lines:
		if ready != "ready "+d.url {
			t.Fatalf("first stdout line = %q, want %q", ready, "ready "+d.url)
		}
	case <-time.After(devStartTimeout):
		t.Fatalf("no ready line within %s", devStartTimeout)
	}
	return d
}

// family returns the runner's descendants: at least the three demo
// backends, the aggregator, the indexer, the gateway and the postmaster.
func (d *devRun) family(t *testing.T) []int {
	t.Helper()
	pids := descendants(d.cmd.Process.Pid)
	if len(pids) < 7 {
		t.Fatalf("switchboard-dev has %d descendant processes, want at least 7", len(pids))
	}
	return pids
}

// wait waits for the runner to exit and returns its exit error; stdout
// must hold nothing after the ready line.
func (d *devRun) wait(t *testing.T) error {
	t.Helper()
	var err error
	select {
	case err = <-d.exited:
	case <-time.After(time.Minute):
		t.Fatal("switchboard-dev did not exit within a minute")
	}
	for line := range d.lines {
		t.Errorf("more output on stdout after the ready line: %q", line)
	}
	return err
}

// assertNothingLeft checks that every process of family is gone and the
// runner's temporary directory is empty.
func (d *devRun) assertNothingLeft(t *testing.T, family []int) {
	t.Helper()
	// Orphans would be reparented and reaped by init; allow that a moment.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := devstack.WaitReady(ctx, nil, func(context.Context) error {
		for _, pid := range family {
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
				return fmt.Errorf("process %d is still alive", pid)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("processes left behind: %v", err)
	}
	left, err := os.ReadDir(d.tmp)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range left {
		t.Errorf("left behind in the temporary directory: %s", e.Name())
	}
}

// copyExample copies deploy/examples into a temporary directory with every
// loopback address replaced by a free one, and returns the copy of
// switchboard-dev.yaml and the gateway's new address.
func copyExample(t *testing.T) (configPath, gatewayAddr, opsAddr string) {
	t.Helper()
	src := filepath.Join(harness.RepoRoot(t), "deploy", "examples")
	dst := t.TempDir()
	addrs := map[string]string{}
	loopback := regexp.MustCompile(`127\.0\.0\.1:\d+`)
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		out := loopback.ReplaceAllStringFunc(string(raw), func(a string) string {
			if addrs[a] == "" {
				addrs[a] = harness.FreeAddr(t)
			}
			return addrs[a]
		})
		return os.WriteFile(filepath.Join(dst, rel), []byte(out), 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	gatewayAddr = addrs["127.0.0.1:8080"]
	if gatewayAddr == "" {
		t.Fatal("the example configuration no longer puts the gateway on 127.0.0.1:8080")
	}
	opsAddr = addrs["127.0.0.1:8081"]
	if opsAddr == "" {
		t.Fatal("the example configuration no longer puts the gateway's ops port (the console) on 127.0.0.1:8081")
	}
	return filepath.Join(dst, "switchboard-dev.yaml"), gatewayAddr, opsAddr
}

// descendants returns the process ids of every descendant of pid.
func descendants(pid int) []int {
	parent := map[int]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// The command name may contain spaces and parentheses: the fields
		// after the last ")" are state, ppid, ...
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 {
			parent[p], _ = strconv.Atoi(fields[1])
		}
	}
	var out []int
	frontier := []int{pid}
	for len(frontier) > 0 {
		next := frontier[0]
		frontier = frontier[1:]
		for p, pp := range parent {
			if pp == next {
				out = append(out, p)
				frontier = append(frontier, p)
			}
		}
	}
	return out
}

// TestDevCheck: switchboard-dev check validates a file as every service
// would: the example passes; a broken one fails with every problem named
// by key and line, never its values, and starts nothing.
func TestDevCheck(t *testing.T) {
	bin := harness.BinDir(t)
	configPath, _, _ := copyExample(t)
	run := func(path string) (string, error) {
		out, err := exec.Command(filepath.Join(bin, "switchboard-dev"), "check", "--config", path).CombinedOutput()
		return string(out), err
	}
	out, err := run(configPath)
	if err != nil {
		t.Fatalf("the example: %v\n%s", err, out)
	}
	for _, svc := range []string{"switchboard-aggregator", "switchboard-indexer", "switchboard-gateway"} {
		if !strings.Contains(out, svc+": "+configPath+": ok") {
			t.Fatalf("no verdict of %s:\n%s", svc, out)
		}
	}

	raw, err := os.ReadFile(configPath)
	if err != nil {
		t.Fatal(err)
	}
	const secret = "s3cr3t-in-a-url"
	broken := strings.Replace(string(raw), "    backends: [weather]", "    backends: [nowhere]", 1)
	broken = strings.Replace(broken, "url: http://", "url: ftp://"+secret+"@", 1)
	brokenPath := filepath.Join(filepath.Dir(configPath), "broken.yaml")
	if err := os.WriteFile(brokenPath, []byte(broken), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = run(brokenPath)
	if err == nil {
		t.Fatalf("a broken file passed:\n%s", out)
	}
	for _, want := range []string{"servers[0].backends[0]", "aggregator.backends[0].url", "(line ", "refused by"} {
		if !strings.Contains(out, want) {
			t.Errorf("the check does not say %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, secret) {
		t.Errorf("the check quotes a value:\n%s", out)
	}
}
