package devstack

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

func TestWithDatabaseKeepsReferences(t *testing.T) {
	for name, raw := range map[string]string{
		"set":     "indexer:\n  listen: 127.0.0.1:9091\n  database: \"\"\ngateway:\n  aggregator: {token: \"${SWITCHBOARD_GATEWAY_TOKEN}\"}\n",
		"absent":  "indexer:\n  listen: 127.0.0.1:9091\ngateway:\n  aggregator: {token: \"${SWITCHBOARD_GATEWAY_TOKEN}\"}\n",
		"null":    "indexer:\ngateway:\n  aggregator: {token: \"${SWITCHBOARD_GATEWAY_TOKEN}\"}\n",
		"missing": "gateway:\n  aggregator: {token: \"${SWITCHBOARD_GATEWAY_TOKEN}\"}\n",
	} {
		t.Run(name, func(t *testing.T) {
			out, err := withDatabase([]byte(raw), "postgres://u@/db?host=/x y")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(out), "${SWITCHBOARD_GATEWAY_TOKEN}") {
				t.Fatalf("the token reference was not kept:\n%s", out)
			}
			cfg, err := config.Parse(out, func(string) (string, bool) { return "tok", true })
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Indexer.Database != "postgres://u@/db?host=/x y" || cfg.Gateway.Aggregator.Token != "tok" {
				t.Fatalf("derived config: database %q, token %q", cfg.Indexer.Database, cfg.Gateway.Aggregator.Token)
			}
		})
	}
	if _, err := withDatabase([]byte("indexer: [1, 2]\n"), "x"); err == nil {
		t.Fatal("an indexer list was accepted")
	}
}

func TestServiceTokens(t *testing.T) {
	t.Setenv("SWITCHBOARD_SET_TOKEN", "given")
	raw := "a: ${SWITCHBOARD_A}\nb: ${SWITCHBOARD_A}\nc: ${SWITCHBOARD_SET_TOKEN}\nd: ${SWITCHBOARD_D:-x}\ne: ${OTHER}\n"
	env, names, err := serviceTokens(raw)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(names, ",") != "SWITCHBOARD_A" || len(env) != 1 {
		t.Fatalf("generated %v (%d values), want SWITCHBOARD_A only", names, len(env))
	}
	if v := strings.TrimPrefix(env[0], "SWITCHBOARD_A="); len(v) < 40 {
		t.Fatalf("token %q is too short to be random", v)
	}
	_, again, _ := serviceTokens(raw)
	env2, _, _ := serviceTokens(raw)
	if len(again) != 1 || env2[0] == env[0] {
		t.Fatal("two runs generated the same token")
	}
	// An edit may reference the tokens generated at start, not new ones:
	// the running children have no value for those.
	if err := newTokens([]byte(raw), names); err != nil {
		t.Fatalf("an edit with the tokens of the start: %v", err)
	}
	if err := newTokens([]byte(raw+"f: ${SWITCHBOARD_CONSOLE_TOKEN}\n"), names); err == nil || !strings.Contains(err.Error(), "SWITCHBOARD_CONSOLE_TOKEN") {
		t.Fatalf("an edit with a new token: %v", err)
	}
}

func TestDialAddress(t *testing.T) {
	for in, want := range map[string]string{
		":8080": "127.0.0.1:8080", "0.0.0.0:1": "127.0.0.1:1", "[::]:2": "127.0.0.1:2",
		"127.0.0.1:3": "127.0.0.1:3", "localhost:4": "localhost:4",
	} {
		if got := DialAddress(in); got != want {
			t.Errorf("DialAddress(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestProcessOutputAndStop(t *testing.T) {
	var out testkit.LogBuffer
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Fatal(err)
	}
	// The child traps TERM and exits 0 itself: a clean stop.
	p, err := StartProcess(ProcessSpec{Name: "child", Path: sh, Args: []string{"-c", `trap 'echo bye; exit 0' TERM; echo "hello $GREETING"; while :; do sleep 0.05; done`},
		Env: []string{"GREETING=world"}, Output: &out})
	if err != nil {
		t.Fatal(err)
	}
	waitOutput(t, p, &out, "child | hello world")
	if err := p.Stop(10 * time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if !strings.Contains(out.String(), "child | bye") {
		t.Fatalf("output = %q", out.String())
	}
}

// waitOutput waits until out contains want.
func waitOutput(t *testing.T, p *Process, out *testkit.LogBuffer, want string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err := WaitReady(ctx, p, func(context.Context) error {
		if !strings.Contains(out.String(), want) {
			return io.EOF
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestStopKillsAfterGrace(t *testing.T) {
	var out testkit.LogBuffer
	p, err := StartProcess(ProcessSpec{Name: "stubborn", Path: "/bin/sh", Args: []string{"-c", `trap '' TERM; echo trapped; while :; do sleep 0.05; done`}, Output: &out})
	if err != nil {
		t.Fatal(err)
	}
	waitOutput(t, p, &out, "trapped")
	start := time.Now()
	if err := p.Stop(300 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("stop of a process ignoring SIGTERM: %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("kill took too long")
	}
}

func TestWaitReadyNoticesExit(t *testing.T) {
	p, err := StartProcess(ProcessSpec{Name: "quitter", Path: "/bin/sh", Args: []string{"-c", "exit 3"}, Output: io.Discard})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	err = WaitReady(ctx, p, func(context.Context) error { return io.EOF })
	if err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("WaitReady = %v, want the exit status", err)
	}
}

func TestRunRejectsBadSetups(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for name, tc := range map[string]struct{ config, want string }{
		"no binaries": {"gateway: {listen: ':1'}\naggregator: {listen: ':2'}\nindexer: {listen: ':3'}\n", "switchboard-gateway not found"},
		// The services' addresses have defaults: a file need not name
		// them.
		"no listen":    {"indexer: {database: x}\n", "switchboard-gateway not found"},
		"unknown key":  {"gateway: {lisen: ':1'}\n", "lisen"},
		"unset secret": {"gateway: {aggregator: {token: '${NOT_A_SWITCHBOARD_VAR_XYZ}'}}\n", "NOT_A_SWITCHBOARD_VAR_XYZ"},
		"twice listed": {"dev: {backends: [{name: a, listen: ':4'}, {name: a, listen: ':5'}]}\n", `"a" is listed twice`},
		"backend addr": {"dev: {backends: [{name: a}]}\n", "name and listen are required"},
		"empty file":   {"", "switchboard-gateway not found"},
	} {
		t.Run(name, func(t *testing.T) {
			err := Run(t.Context(), RunOptions{ConfigPath: write(name+".yaml", tc.config), BinDir: dir,
				Ready: io.Discard, Output: io.Discard, Log: slog.New(slog.DiscardHandler)})
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "listen is required") {
				t.Fatalf("Run = %v, want an error containing %q and none about listen", err, tc.want)
			}
		})
	}
}

// TestRunStopsWhenCancelledDuringStart cancels Run while its first child
// is starting: Run returns without an error and the child is stopped.
func TestRunStopsWhenCancelledDuringStart(t *testing.T) {
	dir := t.TempDir()
	// Stand-ins that start and never become ready.
	for _, bin := range []string{AggregatorBin, IndexerBin, GatewayBin, DemoBackendBin} {
		script := "#!/bin/sh\necho started $$\nexec sleep 600\n"
		if err := os.WriteFile(filepath.Join(dir, bin), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cfgPath := filepath.Join(dir, "switchboard.yaml")
	cfg := "gateway: {listen: '127.0.0.1:1'}\naggregator: {listen: '127.0.0.1:2'}\n" +
		"indexer: {listen: '127.0.0.1:3', database: 'postgres://unused'}\n" +
		"dev: {backends: [{name: a, listen: '127.0.0.1:4'}]}\n"
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := &testkit.LogBuffer{}
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, RunOptions{ConfigPath: cfgPath, BinDir: dir, Ready: io.Discard, Output: out, Log: slog.New(slog.DiscardHandler)})
	}()
	started := func() bool { return strings.Contains(out.String(), "backend:a | started") }
	waitCtx, waitCancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer waitCancel()
	if err := WaitReady(waitCtx, nil, func(context.Context) error {
		if !started() {
			return io.EOF
		}
		return nil
	}); err != nil {
		t.Fatal("the stand-in backend never started")
	}
	var pid int
	if _, err := fmt.Sscanf(out.String(), "backend:a | started %d", &pid); err != nil {
		t.Fatalf("no pid in %q: %v", out.String(), err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run cancelled during start = %v, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancellation")
	}
	if err := syscall.Kill(pid, 0); err == nil {
		t.Fatalf("the stand-in backend %d is still running", pid)
	}
}
