package stdio

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// serverEnv makes the test binary a stdio MCP server (TestMain), so the
// bridge runs a real process.
const serverEnv = "SWITCHBOARD_STDIO_TEST_SERVER"

func TestMain(m *testing.M) {
	switch mode := os.Getenv(serverEnv); {
	case mode == "1":
		serveStdio()
		return
	case mode == "exit":
		os.Exit(1) // a server that never starts
	case mode == "noisy":
		for i := range 2 * maxLinesPerMinute {
			fmt.Fprintf(os.Stderr, "noise %d\n", i)
		}
		os.Exit(1)
	case strings.HasPrefix(mode, "raw-"):
		serveRaw(mode)
		return
	case mode == "stubborn":
		// Serves, then outlives its stdin's end and ignores SIGTERM.
		signal.Ignore(syscall.SIGTERM)
		serveRaw(mode)
		select {}
	case mode == "host":
		hostStubborn()
		return
	}
	os.Exit(m.Run())
}

// serveStdio is the test's stdio server: echo reports its pid and what it
// sees of the environment; add adds a tool; touch updates the resource
// test://readme; crash exits.
func serveStdio() {
	fmt.Fprintln(os.Stderr, "hello from stderr")
	server := mcp.NewServer(&mcp.Implementation{Name: "stdio-test", Version: "0"}, &mcp.ServerOptions{
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
	})
	schema := map[string]any{"type": "object"}
	server.AddTool(&mcp.Tool{Name: "touch", InputSchema: schema}, func(ctx context.Context, _ *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		// go-sdk sends the update to the sessions subscribed to it only.
		_ = server.ResourceUpdated(ctx, &mcp.ResourceUpdatedNotificationParams{URI: "test://readme"})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "touched"}}}, nil
	})
	server.AddTool(&mcp.Tool{Name: "echo", InputSchema: schema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		text := fmt.Sprintf("pid=%d visible=%s secret=%s", os.Getpid(), os.Getenv("TEST_VISIBLE"), os.Getenv("AGGREGATOR_SECRET"))
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
	})
	server.AddTool(&mcp.Tool{Name: "add", InputSchema: schema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		server.AddTool(&mcp.Tool{Name: "added", InputSchema: schema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "added"}}}, nil
		})
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ok"}}}, nil
	})
	server.AddTool(&mcp.Tool{Name: "progress", InputSchema: schema}, func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		token := req.Params.GetProgressToken()
		for i := 1; i <= 2 && token != nil; i++ {
			_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: token, Progress: float64(i), Total: 2})
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: fmt.Sprintf("traceparent=%v", req.Params.Meta["traceparent"])}}}, nil
	})
	server.AddTool(&mcp.Tool{Name: "crash", InputSchema: schema}, func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		os.Exit(3)
		return nil, nil
	})
	server.AddResource(&mcp.Resource{URI: "test://readme", Name: "readme", MIMEType: "text/plain"}, func(_ context.Context, r *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: r.Params.URI, Text: "read me"}}}, nil
	})
	_ = server.Run(context.Background(), &mcp.StdioTransport{})
}

type bearer string

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+string(b))
	return http.DefaultTransport.RoundTrip(r)
}

func echoText(t *testing.T, cs *mcp.ClientSession) (string, error) {
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "echo"})
	if err != nil {
		return "", err
	}
	if res.IsError || len(res.Content) == 0 {
		return "", fmt.Errorf("echo: %+v", res)
	}
	return res.Content[0].(*mcp.TextContent).Text, nil
}

// TestBridge: the bridge runs the command with only its configured
// environment, serves what it lists to holders of its token only, keeps
// the listing current, logs its stderr, starts it again when it exits, and
// stops it on Close.
func TestBridge(t *testing.T) {
	t.Setenv("AGGREGATOR_SECRET", "must-not-leak")
	logs := &testkit.LogBuffer{}
	b, err := Start(Spec{Name: "test", Command: []string{os.Args[0], "-test.run=^$"},
		Env: map[string]string{serverEnv: "1", "TEST_VISIBLE": "yes"}, Log: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			b.Close()
		}
	})

	if resp, err := http.Post(b.URL(), "application/json", strings.NewReader(`{}`)); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the token: %v %v", resp, err)
	}
	// Until the process is up and mirrored the bridge answers 503.
	connect := func() *mcp.ClientSession { return connectTo(t, b, nil) }
	cs := connect()
	var first string
	testkit.Eventually(t, "echo served", 20*time.Second, func() error {
		var err error
		first, err = echoText(t, cs)
		return err
	})
	if !strings.HasSuffix(first, "visible=yes secret=") {
		t.Fatalf("the process's environment: %s", first)
	}
	read, err := cs.ReadResource(t.Context(), &mcp.ReadResourceParams{URI: "test://readme"})
	if err != nil || read.Contents[0].Text != "read me" {
		t.Fatalf("read: %+v %v", read, err)
	}
	testkit.Eventually(t, "stderr logged", 10*time.Second, func() bool { return strings.Contains(logs.String(), "hello from stderr") })

	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "add"}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, "the added tool mirrored", 10*time.Second, func() error {
		res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "added"})
		if err != nil {
			return err
		}
		if res.IsError {
			return fmt.Errorf("added: %+v", res.Content)
		}
		return nil
	})

	// The call the process exits in says so, not "EOF".
	if _, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "crash"}); err == nil || !strings.Contains(err.Error(), ErrExited.Error()) || strings.Contains(err.Error(), "EOF") {
		t.Fatalf("the call the server exited in: %v", err)
	}
	testkit.Eventually(t, "the process started again", 20*time.Second, func() error {
		text, err := echoText(t, connect())
		if err != nil {
			return err
		}
		if text == first {
			return fmt.Errorf("the same process answers: %s", text)
		}
		return nil
	})
	if !strings.Contains(logs.String(), "starting it again") {
		t.Fatalf("the restart was not logged:\n%s", logs.String())
	}

	text, err := echoText(t, connect())
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	if _, err := fmt.Sscanf(text, "pid=%d", &pid); err != nil {
		t.Fatal(err)
	}
	b.Close()
	closed = true
	testkit.Eventually(t, "the process stopped", 10*time.Second, func() bool {
		return syscall.Kill(pid, 0) != nil
	})
}

// TestBridgeRelaysProgressAndMeta: a call's _meta reaches the process,
// and the process's progress comes back to the call under the caller's
// own token, though two callers chose the same one.
func TestBridgeRelaysProgressAndMeta(t *testing.T) {
	b := startMode(t, "1", nil)
	type note struct {
		caller string
		token  any
		n      float64
	}
	notes := make(chan note, 16)
	connect := func(caller string) *mcp.ClientSession {
		return connectTo(t, b, &mcp.ClientOptions{
			ProgressNotificationHandler: func(_ context.Context, r *mcp.ProgressNotificationClientRequest) {
				notes <- note{caller, r.Params.ProgressToken, r.Params.Progress}
			}})
	}
	for _, caller := range []string{"one", "two"} {
		params := &mcp.CallToolParams{Name: "progress", Meta: mcp.Meta{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}
		params.SetProgressToken("tok")
		res, err := connect(caller).CallTool(t.Context(), params)
		if err != nil || res.Content[0].(*mcp.TextContent).Text != "traceparent=00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
			t.Fatalf("%s: %+v %v, want the call's traceparent seen by the process", caller, res, err)
		}
		for i := 1; i <= 2; i++ {
			select {
			case got := <-notes:
				if got != (note{caller, "tok", float64(i)}) {
					t.Fatalf("progress %+v, want %s's %d under its token", got, caller, i)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s: no progress %d", caller, i)
			}
		}
	}
}

// TestBridgeOfAServerThatNeverStarts: while its process is not running
// (here it exits at once, and is started again and again), the bridge
// answers every MCP request 503, as a backend that is down, so that the
// aggregator's health checks see it down and its last listing is kept;
// it never lists an empty catalog as if the server had no tools.
func TestBridgeOfAServerThatNeverStarts(t *testing.T) {
	logs := &testkit.LogBuffer{}
	b := startMode(t, "exit", logs)
	post := func() int {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, b.URL(), strings.NewReader(
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"0"}}}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := (&http.Client{Transport: bearer(b.Token())}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	testkit.Eventually(t, "the process exited and is started again", 20*time.Second, func() bool {
		return strings.Contains(logs.String(), "starting it again")
	})
	if got := post(); got != http.StatusServiceUnavailable {
		t.Fatalf("initialize while the server does not run: HTTP %d, want 503", got)
	}
}

// TestStartRefusesAMissingCommand: a command that is not found is an
// error at once that says what to do.
func TestStartRefusesAMissingCommand(t *testing.T) {
	_, err := Start(Spec{Name: "x", Command: []string{"switchboard-no-such-command"}})
	if err == nil || !strings.Contains(err.Error(), "not found") || !strings.Contains(err.Error(), "full path") {
		t.Fatalf("got %v", err)
	}
}

// TestLineLogBounds: a long line is cut, and lines past the minute's bound
// are counted, not logged.
func TestLineLogBounds(t *testing.T) {
	out := &testkit.LogBuffer{}
	l := newLineLog(slog.New(slog.NewTextHandler(out, nil)), nil, "stderr")
	fmt.Fprintf(l, "%s\n", strings.Repeat("x", 3*maxLineBytes))
	for i := range maxLinesPerMinute + 10 {
		fmt.Fprintf(l, "line %d\n", i)
	}
	l.Flush()
	got := out.String()
	if strings.Contains(got, strings.Repeat("x", maxLineBytes+1)) || !strings.Contains(got, "cut=true") {
		t.Fatalf("a long line was not cut:\n%.300s", got)
	}
	if strings.Contains(got, fmt.Sprintf("line %d", maxLinesPerMinute+5)) || !strings.Contains(got, "lines=11") {
		t.Fatalf("lines past the bound: %s", got[max(0, len(got)-400):])
	}
}

// TestBridgeStopsTheServersChildren: what a stdio server starts (npx's
// node, a wrapper's helper) stops with it, here a helper holding the
// server's stderr.
func TestBridgeStopsTheServersChildren(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "helper.pid")
	script := "sleep 300 & echo $! > " + pidFile + "; exec " + strconv.Quote(os.Args[0]) + " -test.run=^$"
	b, err := Start(Spec{Name: "wrapped", Command: []string{"/bin/sh", "-c", script},
		Env: map[string]string{serverEnv: "1"}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var pid int
	testkit.Eventually(t, "the helper started", 20*time.Second, func() error {
		raw, err := os.ReadFile(pidFile)
		if err == nil {
			pid, err = strconv.Atoi(strings.TrimSpace(string(raw)))
		}
		return err
	})
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL) })
	b.Close()
	testkit.Eventually(t, "the helper stopped with the server", 10*time.Second, func() bool {
		return syscall.Kill(pid, 0) != nil
	})
}

// TestLineLogRedactsSecrets: the server's credentials leave its stderr
// before it is logged, whole even where the line is cut.
func TestLineLogRedactsSecrets(t *testing.T) {
	out := &testkit.LogBuffer{}
	secret := "s3cr3t-value-0123456789"
	l := newLineLog(slog.New(slog.NewTextHandler(out, nil)), cutOut(SecretEnv(map[string]string{"API_TOKEN": secret, "MODE": "production-mode"}, 8)), "stderr")
	fmt.Fprintf(l, "token %s in production-mode\n", secret)
	fmt.Fprintf(l, "%s%s\n", strings.Repeat("x", maxLineBytes-5), secret)
	l.Flush()
	got := out.String()
	if strings.Contains(got, secret[:5]) || !strings.Contains(got, "token [redacted] in production-mode") {
		t.Fatalf("the log:\n%s", got)
	}
}

// cutOut is a Spec.Redact that replaces each of secrets by [redacted].
func cutOut(secrets []string) func(string) string {
	return func(s string) string {
		for _, v := range secrets {
			s = strings.ReplaceAll(s, v, "[redacted]")
		}
		return s
	}
}

// TestBridgeLogsNoCredentialOfTheServer: the server's credentials leave
// the errors it answers before the bridge logs them, as they leave its
// stderr; a failed start, listing or resubscription was logged with the
// error as the server wrote it.
func TestBridgeLogsNoCredentialOfTheServer(t *testing.T) {
	const secret = "sk-live-0123456789abcdef"
	for mode, logged := range map[string]string{
		"raw-leaky": "upstream refused key [redacted]",
		// A listed item it leaves out is logged by its name.
		"raw-odd": "50%off.txt?key=[redacted]",
	} {
		env := map[string]string{serverEnv: mode, "UPSTREAM_API_KEY": secret}
		logs := &testkit.LogBuffer{}
		b, err := Start(Spec{Name: "leaky", Command: []string{os.Args[0], "-test.run=^$"}, Env: env,
			Log: slog.New(slog.NewTextHandler(logs, nil)), Redact: cutOut(SecretEnv(env, 8))})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(b.Close)
		testkit.Eventually(t, mode+": the failure logged", 20*time.Second, func() bool { return strings.Contains(logs.String(), logged) })
		if got := logs.String(); strings.Contains(got, secret) {
			t.Fatalf("%s: the log holds the server's credential:\n%s", mode, got)
		}
	}
}

// TestProgramIsFoundAsTheServerWouldFindIt: a command is looked up in the
// PATH of the server's own environment, and a relative one in its working
// directory, not in the aggregator's.
func TestProgramIsFoundAsTheServerWouldFindIt(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin")
	if err := os.Mkdir(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "myserver"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		dir  string
		want string
	}{
		{"myserver", map[string]string{"PATH": bin}, "", filepath.Join(bin, "myserver")},
		{"myserver", map[string]string{"PATH": "bin"}, dir, filepath.Join(bin, "myserver")},
		{"./bin/myserver", nil, dir, filepath.Join(bin, "myserver")},
		{"myserver", nil, "", ""},
		{"./bin/myserver", nil, "", ""},
	} {
		got, err := program(tc.name, tc.env, tc.dir)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("program(%q, %v, %q) = %q, %v; want %q", tc.name, tc.env, tc.dir, got, err, tc.want)
		}
	}
}

// TestCheckCommandsSaysAScriptIsNotExecutable: a server's program that
// is there but that no one may execute (a script not made executable) is
// refused saying so, by key, named by its path or found in the PATH: it
// was "not found: install it", which sent its author looking elsewhere.
func TestCheckCommandsSaysAScriptIsNotExecutable(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "server.sh"), []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, b := range []config.Backend{
		{Name: "by-path", Command: []string{"./server.sh"}, Dir: dir},
		{Name: "in-path", Command: []string{"server.sh"}, Env: map[string]string{"PATH": dir}},
	} {
		err := CheckCommands([]config.Backend{b})
		if err == nil || !strings.Contains(err.Error(), "aggregator.backends[0].command") || !strings.Contains(err.Error(), "not executable") ||
			!strings.Contains(err.Error(), "chmod +x") || strings.Contains(err.Error(), "install it") {
			t.Errorf("%s: %v", b.Name, err)
		}
	}
}

// TestCheckCommandsRefusesAMissingDir: a stdio server's dir that is not a
// directory refuses the file, by key, as a program that is not found
// does. It was taken, and the server, never able to start there, was
// started again with back-off for as long as the aggregator ran.
func TestCheckCommandsRefusesAMissingDir(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	err := CheckCommands([]config.Backend{
		{Name: "fine", Command: []string{os.Args[0]}, Dir: dir},
		{Name: "missing", Command: []string{os.Args[0]}, Dir: filepath.Join(dir, "missing")},
		{Name: "file", Command: []string{os.Args[0]}, Dir: file},
	})
	got := fmt.Sprint(err)
	if strings.Contains(got, "backends[0]") || !strings.Contains(got, "aggregator.backends[1].dir") || !strings.Contains(got, "aggregator.backends[2].dir") {
		t.Fatalf("CheckCommands = %v; want the dirs of backends 1 and 2 refused", err)
	}
}

// TestCheckCommandsRefusesAMissingInterpreter: a stdio server that is a
// script whose #! line names an interpreter that is not installed (a
// server written for node on a machine without it) is refused by key at
// load, naming the interpreter, whether the line names it by path or
// through env in the server's PATH; it was taken, and the server failed
// to start with "no such file or directory" again and again.
func TestCheckCommandsRefusesAMissingInterpreter(t *testing.T) {
	dir := t.TempDir()
	script := func(name, shebang string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(shebang+"\nexit 0\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	err := CheckCommands([]config.Backend{
		{Name: "sh", Command: []string{script("sh", "#!/bin/sh")}},
		{Name: "env-sh", Command: []string{script("env-sh", "#!/usr/bin/env sh")}},
		{Name: "by-path", Command: []string{script("by-path", "#!/no/such/interpreter -x")}},
		{Name: "by-env", Command: []string{script("by-env", "#!/usr/bin/env no-such-runtime-for-switchboard")}},
		{Name: "by-env-s", Command: []string{script("by-env-s", "#!/usr/bin/env -S no-such-runtime-for-switchboard --flag")}},
		{Name: "binary", Command: []string{os.Args[0]}},
	})
	got := fmt.Sprint(err)
	for i, want := range map[int]string{2: "/no/such/interpreter", 3: "no-such-runtime-for-switchboard", 4: "no-such-runtime-for-switchboard"} {
		if !strings.Contains(got, fmt.Sprintf("aggregator.backends[%d].command: its program is a script whose interpreter (%s,", i, want)) {
			t.Errorf("backend %d not refused for its interpreter %s: %v", i, want, err)
		}
	}
	for _, fine := range []string{"backends[0]", "backends[1]", "backends[5]"} {
		if strings.Contains(got, fine) {
			t.Errorf("%s refused: %v", fine, err)
		}
	}
}
