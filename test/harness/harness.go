// Package harness runs real Switchboard processes for end-to-end, fault and
// load tests: the binaries are built once per test binary (or taken from
// $SWITCHBOARD_BIN), every process gets free loopback ports, its own log
// (shown when the test fails) and a readiness probe polled with a deadline,
// and everything is stopped and removed by t.Cleanup.
//
// A test package calls Main from TestMain, then Start for a whole cluster:
//
//	func TestMain(m *testing.M) { harness.Main(m) }
//
//	c := harness.Start(t, harness.Options{Backends: []harness.Backend{{Name: "alpha"}}})
//	cs := harness.Connect(t, c.MCPURL, harness.Modern)
package harness

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/devstack"
	"github.com/switchboard-mcp/switchboard/test/ports"
)

// module is the import path prefix of the workspace.
const module = "github.com/switchboard-mcp/switchboard/"

// commands are the packages of the binaries the harness runs.
var commands = []string{
	"gateway/cmd/" + devstack.GatewayBin,
	"aggregator/cmd/" + devstack.AggregatorBin,
	"indexer/cmd/" + devstack.IndexerBin,
	"services/cmd/" + devstack.DemoBackendBin,
	"services/cmd/switchboard-dev",
}

// ReadyTimeout bounds how long a process may take to become ready. Builds
// and starts share two cores with other work, so it is generous.
const ReadyTimeout = 90 * time.Second

var (
	buildOnce sync.Once
	binDir    string
	buildDir  string // removed by Main when the harness built the binaries
	buildErr  error
)

// Main runs the package's tests and removes the binaries the harness built.
func Main(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// BinDir returns the directory holding the Switchboard binaries:
// $SWITCHBOARD_BIN when set (make test sets it to bin/), otherwise a
// temporary directory where they are built once per test binary.
func BinDir(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		if dir := os.Getenv("SWITCHBOARD_BIN"); dir != "" {
			binDir = dir
			for _, c := range commands {
				if _, err := os.Stat(filepath.Join(dir, filepath.Base(c))); err != nil {
					buildErr = fmt.Errorf("SWITCHBOARD_BIN=%s lacks %s (run make build): %w", dir, filepath.Base(c), err)
				}
			}
			return
		}
		binDir, buildErr = build()
		buildDir = binDir
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// build compiles every command into a fresh temporary directory with one
// go build in the workspace, so they share the build cache and one link
// step each.
func build() (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "switchboard-bin-")
	if err != nil {
		return "", err
	}
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, c := range commands {
		args = append(args, module+c)
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("harness: go build: %v\n%s", err, out)
	}
	return dir, nil
}

// RepoRoot returns the root of the repository (the directory of go.work).
func RepoRoot(t testing.TB) string {
	t.Helper()
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func repoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOWORK").Output()
	work := strings.TrimSpace(string(out))
	if err != nil || work == "" || work == "off" {
		return "", fmt.Errorf("harness: the tests must run inside the go.work workspace (go env GOWORK: %q, %v)", work, err)
	}
	return filepath.Dir(work), nil
}

// FreeAddr returns a loopback address whose port is free now and that no
// other call in this process has returned (ports.Free).
func FreeAddr(t testing.TB) string {
	t.Helper()
	port, err := ports.Free()
	if err != nil {
		t.Fatal(err)
	}
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
}

// readyContext is the context a readiness wait runs under.
func readyContext(t testing.TB) (context.Context, context.CancelFunc) {
	return context.WithTimeout(t.Context(), ReadyTimeout)
}
