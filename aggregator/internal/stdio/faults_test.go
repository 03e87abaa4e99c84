package stdio

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/listing"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// startMode starts a bridge of the test binary as the server serverEnv's
// mode makes it, logging to logs (nil: nowhere).
func startMode(t *testing.T, mode string, logs *testkit.LogBuffer) *Bridge {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	if logs != nil {
		log = slog.New(slog.NewTextHandler(logs, nil))
	}
	b, err := Start(Spec{Name: mode, Command: []string{os.Args[0], "-test.run=^$"}, Env: map[string]string{serverEnv: mode}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

// connectTo opens a Legacy session to b once it serves, within 20 s.
func connectTo(t *testing.T, b *Bridge, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "0"}, opts)
	var cs *mcp.ClientSession
	testkit.Eventually(t, "the bridge serves", 20*time.Second, func() error {
		var err error
		cs, err = client.Connect(t.Context(), &mcp.StreamableClientTransport{Endpoint: b.URL(), HTTPClient: &http.Client{Transport: bearer(b.Token())}},
			&mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
		return err
	})
	t.Cleanup(func() { cs.Close() })
	return cs
}

// callText calls tool and returns its text.
func callText(ctx context.Context, cs *mcp.ClientSession, tool string) (string, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool})
	if err != nil {
		return "", err
	}
	if res.IsError || len(res.Content) == 0 {
		return "", fmt.Errorf("%s: %+v", tool, res.Content)
	}
	return res.Content[0].(*mcp.TextContent).Text, nil
}

// TestBridgeLeavesOutWhatItCannotServe: a listing item go-sdk's server
// cannot serve (a URI that does not parse, a URI template that is not
// one, an invalid parameter header annotation) is left out and logged;
// it once panicked on the bridge's goroutine, which took the aggregator
// down for every backend and user, on every restart.
func TestBridgeLeavesOutWhatItCannotServe(t *testing.T) {
	logs := &testkit.LogBuffer{}
	cs := connectTo(t, startMode(t, "raw-odd", logs), nil)
	var tools, resources []string
	for tool, err := range cs.Tools(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		tools = append(tools, tool.Name)
	}
	for r, err := range cs.Resources(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		resources = append(resources, r.URI)
	}
	templates := 0
	for _, err := range cs.ResourceTemplates(t.Context(), nil) {
		if err != nil {
			t.Fatal(err)
		}
		templates++
	}
	slices.Sort(tools)
	if !slices.Equal(tools, []string{"hang", "ok"}) || !slices.Equal(resources, []string{"file:///data/fine.txt"}) || templates != 0 {
		t.Fatalf("listed tools %v, resources %v, %d templates; want the valid ones only", tools, resources, templates)
	}
	if _, err := callText(t.Context(), cs, "ok"); err != nil {
		t.Fatal(err)
	}
	// (go-sdk's client drops the tool odd itself, as it reads the listing.)
	for _, name := range []string{"file:///data/50%off.txt", "file:///{unclosed"} {
		if !strings.Contains(logs.String(), "name="+strconv.Quote(name)) && !strings.Contains(logs.String(), "name="+name) {
			t.Errorf("leaving out %s was not logged:\n%s", name, logs.String())
		}
	}
}

// TestBridgeListsAServerWhoseFirstListingFailed: a listing that fails
// once (a server still warming up) is tried again; the bridge once stayed
// down for as long as the process ran. The server implements no
// resources/templates/list, which lists no templates, not no server.
func TestBridgeListsAServerWhoseFirstListingFailed(t *testing.T) {
	cs := connectTo(t, startMode(t, "raw-warming", nil), nil)
	if _, err := callText(t.Context(), cs, "ok"); err != nil {
		t.Fatal(err)
	}
}

// TestBridgeServesItsToolsWhileItResyncs: a tool the process has all along
// answers every call while its listing is mirrored again; a resync once
// removed every tool before adding them back, and calls between failed
// as unknown tools.
func TestBridgeServesItsToolsWhileItResyncs(t *testing.T) {
	var resyncs atomic.Int64
	cs := connectTo(t, startMode(t, "raw-churn", nil), &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { resyncs.Add(1) },
	})
	ctx, stop := context.WithCancel(t.Context())
	var calls, failed atomic.Int64
	var firstErr atomic.Value
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			calls.Add(1)
			if _, err := callText(t.Context(), cs, "t0099"); err != nil {
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
			}
		}
	}()
	for i := range 10 {
		if _, err := callText(t.Context(), cs, "poke"); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, "the listing mirrored again", 10*time.Second, func() bool { return resyncs.Load() > int64(i) })
	}
	stop()
	<-done
	if failed.Load() > 0 {
		t.Fatalf("%d of %d calls of a tool the process always had failed during resyncs; the first: %v", failed.Load(), calls.Load(), firstErr.Load())
	}
}

// restartSubscribed starts a bridge of a raw-then-* mode with listings
// timing out after 200 ms, subscribes a client to n URIs, kills the
// process for the bridge to start it again, and returns the client.
func restartSubscribed(t *testing.T, mode string, n int, logs *testkit.LogBuffer) *mcp.ClientSession {
	t.Helper()
	was := listTimeout
	listTimeout = 200 * time.Millisecond
	t.Cleanup(func() { listTimeout = was })
	log := slog.New(slog.DiscardHandler)
	if logs != nil {
		log = slog.New(slog.NewTextHandler(logs, nil))
	}
	b, err := Start(Spec{Name: mode, Command: []string{os.Args[0], "-test.run=^$"},
		Env: map[string]string{serverEnv: mode, "STARTED_FILE": filepath.Join(t.TempDir(), "started")}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	cs := connectTo(t, b, nil)
	for i := range n {
		if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: "test://" + strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	b.mu.Lock()
	kill := b.kill
	b.mu.Unlock()
	kill()
	return cs
}

// TestBridgeResubscribesWhatASlowServerLeftUnanswered: a restarted server
// that leaves a subscription unanswered, then lists, was slow rather than
// hung, and is asked again for every subscription it did not make; they
// were once left unmade until its next start, and clients' subscribes to
// them were never sent on.
func TestBridgeResubscribesWhatASlowServerLeftUnanswered(t *testing.T) {
	cs := restartSubscribed(t, "raw-then-slow", 5, nil)
	testkit.Eventually(t, "the five subscriptions made again on the restarted server", 20*time.Second, func() bool {
		n, err := callText(t.Context(), cs, "subs")
		return err == nil && n == "5"
	})
}

// TestBridgeMergesBurstsOfListChanged: a burst of list_changed from the
// process costs a resync or two, as an HTTP backend's costs a listing or
// two (engine.requestList); each once ran a resync of its own, one after
// the other, and 5000 listed everything thousands of times.
func TestBridgeMergesBurstsOfListChanged(t *testing.T) {
	cs := connectTo(t, startMode(t, "raw-flood", nil), nil)
	if _, err := callText(t.Context(), cs, "flood"); err != nil {
		t.Fatal(err)
	}
	lists := func() int {
		text, err := callText(t.Context(), cs, "lists")
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(text)
		return n
	}
	testkit.Eventually(t, "the listing mirrored again", 10*time.Second, func() bool { return lists() > 1 })
	time.Sleep(time.Second) // for listings the burst still asks for
	if n := lists(); n > 5 {
		t.Fatalf("the first listing and 5000 list_changed notifications made %d listings, want the first and a resync or two", n)
	}
}

// TestBridgeRestartsAServerThatAnswersNoPing: a process that stops
// reading its stdin answers no ping, so the aggregator's health probes
// (pings) see it down, and after maxMissedPings in a row it is killed and
// started again, also once its stdin's pipe is full (every write to it
// waits then, and a ping once waited with them, uncounted); the bridge
// once answered pings itself, and a hung server stayed healthy, and hung,
// for ever. The bridge then closes (the test's cleanup): its close of a
// process that reads nothing kills it after stopGrace.
func TestBridgeRestartsAServerThatAnswersNoPing(t *testing.T) {
	cs := connectTo(t, startMode(t, "raw-wedged", nil), nil)
	first, err := callText(t.Context(), cs, "ok")
	if err != nil {
		t.Fatal(err)
	}
	hung, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	_, _ = cs.CallTool(hung, &mcp.CallToolParams{Name: "hang"})
	cancel()
	// A call whose arguments are larger than the pipe to its stdin holds
	// (64 KiB): the bridge's write to it never ends, nor do the writes
	// after it (pings included) until the process is killed.
	big, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
	_, _ = cs.CallTool(big, &mcp.CallToolParams{Name: "ok", Arguments: map[string]any{"blob": strings.Repeat("x", 256<<10)}})
	cancel()
	for i := range maxMissedPings {
		ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
		err := cs.Ping(ctx, nil)
		cancel()
		if err == nil {
			t.Fatalf("ping %d of a hung server answered", i+1)
		}
	}
	testkit.Eventually(t, "the hung server started again", 20*time.Second, func() error {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		now, err := callText(ctx, cs, "ok")
		if err == nil && now == first {
			return errors.New("the hung process still runs")
		}
		return err
	})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if err := cs.Ping(ctx, nil); err != nil {
		t.Fatalf("a ping of the new process: %v", err)
	}
}

// TestBridgeRestartsAServerHungBeforeItsFirstListing: a process that
// answers initialize and then nothing is killed and started again once
// maxMissedPings listings in a row time out. Until its first listing the
// bridge answers every request 503, the health probes' pings too, so
// passPing never counted it, and it stayed down for as long as it ran.
func TestBridgeRestartsAServerHungBeforeItsFirstListing(t *testing.T) {
	was := listTimeout
	listTimeout = 200 * time.Millisecond
	t.Cleanup(func() { listTimeout = was })
	logs := &testkit.LogBuffer{}
	startMode(t, "raw-mute", logs)
	testkit.Eventually(t, "the hung server started again", 20*time.Second, func() bool {
		return strings.Count(logs.String(), "stdio server started") >= 2
	})
}

// TestBridgeResubscribesNoLongerThanAHungServerAnswers: the clients'
// subscriptions, made again on each start, do not hold off the listing
// that finds a started server hung: the first left unanswered ends them,
// where each once waited its own timeout.
func TestBridgeResubscribesNoLongerThanAHungServerAnswers(t *testing.T) {
	logs := &testkit.LogBuffer{}
	restartSubscribed(t, "raw-then-mute", 20, logs)
	testkit.Eventually(t, "the mute server found hung and started again", 30*time.Second, func() bool {
		return strings.Count(logs.String(), "stdio server started") >= 3
	})
	if n := strings.Count(logs.String(), "subscribing again on the restarted stdio server failed"); n > 0 {
		t.Fatalf("a restarted server that answers nothing was asked for each subscription: %d timeouts", n)
	}
}

// TestBridgeSubscriptionsOutliveARestart: what the bridge subscribed to
// is subscribed again on a process started again, which knows nothing of
// its predecessor's subscriptions; updates once stopped for good.
func TestBridgeSubscriptionsOutliveARestart(t *testing.T) {
	updates := make(chan string, 16)
	cs := connectTo(t, startMode(t, "1", nil), &mcp.ClientOptions{
		ResourceUpdatedHandler: func(_ context.Context, r *mcp.ResourceUpdatedNotificationRequest) { updates <- r.Params.URI },
	})
	if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: "test://readme"}); err != nil {
		t.Fatal(err)
	}
	updated := func(when string) {
		t.Helper()
		for len(updates) > 0 {
			<-updates
		}
		if _, err := callText(t.Context(), cs, "touch"); err != nil {
			t.Fatal(err)
		}
		select {
		case <-updates:
		case <-time.After(10 * time.Second):
			t.Fatalf("no update of the subscribed resource %s", when)
		}
	}
	updated("before the restart")
	first, err := echoText(t, cs)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "crash"})
	testkit.Eventually(t, "the process started again", 20*time.Second, func() error {
		now, err := echoText(t, cs)
		if err == nil && now == first {
			return errors.New("the same process")
		}
		return err
	})
	updated("after the restart")
}

// TestStderrBoundHoldsAcrossRestarts: a server that writes to its stderr
// and exits, again and again, logs no more lines a minute than one that
// runs; the bound once started over with each run.
func TestStderrBoundHoldsAcrossRestarts(t *testing.T) {
	logs := &testkit.LogBuffer{}
	startMode(t, "noisy", logs)
	// Two runs ended: each wrote twice the minute's bound.
	testkit.Eventually(t, "two runs", 20*time.Second, func() bool { return strings.Count(logs.String(), "starting it again") >= 2 })
	if n := strings.Count(logs.String(), `stderr="noise `); n > maxLinesPerMinute {
		t.Fatalf("%d stderr lines logged within a minute, bound %d", n, maxLinesPerMinute)
	}
}

// TestRelativeDirAndCommand: a relative command in a relative working
// directory runs; it was once looked for again in the directory, under
// dir/dir/name, and never started.
func TestRelativeDirAndCommand(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.Mkdir("srv", 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\nexec " + strconv.Quote(os.Args[0]) + " -test.run=^$\n"
	if err := os.WriteFile(filepath.Join("srv", "run"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := Start(Spec{Name: "relative", Command: []string{"./run"}, Dir: "srv", Env: map[string]string{serverEnv: "1"}, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	if _, err := echoText(t, connectTo(t, b, nil)); err != nil {
		t.Fatal(err)
	}
}

// TestBridgeSubscriptionsFollowSessions: the bridge subscribes at the
// process while a session of its own is subscribed: a session that ended
// without unsubscribing (the aggregator drops a broken session and
// subscribes again on a new one) holds nothing, so the last live one's
// unsubscribe reaches the process, and no process started after is asked
// for it. A count of subscribe calls once kept such a subscription for
// good.
func TestBridgeSubscriptionsFollowSessions(t *testing.T) {
	b := startMode(t, "1", nil)
	old := connectTo(t, b, nil)
	if err := old.Subscribe(t.Context(), &mcp.SubscribeParams{URI: "test://readme"}); err != nil {
		t.Fatal(err)
	}
	old.Close() // ended without unsubscribing
	cs := connectTo(t, b, nil)
	for range 2 { // a repeated subscribe of one session is one
		if err := cs.Subscribe(t.Context(), &mcp.SubscribeParams{URI: "test://readme"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cs.Unsubscribe(t.Context(), &mcp.UnsubscribeParams{URI: "test://readme"}); err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	n := len(b.subscriptions["test://readme"])
	b.mu.Unlock()
	if n != 0 {
		t.Fatalf("no session is subscribed, yet the bridge holds %d subscriptions to test://readme", n)
	}
}

// TestBridgeBoundsTheServersListing: a stdio server's listing is bounded
// as an HTTP backend's is (listing.Collect): one whose cursor never ends
// fails it, and is listed again with back-off. The bridge once read and
// held its pages until the listing's 30 s timeout: gigabytes of them, the
// aggregator's memory growing by tens of MiB a second.
func TestBridgeBoundsTheServersListing(t *testing.T) {
	logs := &testkit.LogBuffer{}
	b, err := Start(Spec{Name: "endless", Command: []string{os.Args[0], "-test.run=^$"}, Env: map[string]string{serverEnv: "raw-endless"},
		Log: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	testkit.Eventually(t, "the endless listing refused", 15*time.Second, func() error {
		if !strings.Contains(logs.String(), listing.ErrCursorLoop.Error()) {
			return fmt.Errorf("no listing refused yet:\n%s", logs.String())
		}
		return nil
	})
}

// TestBridgeLogsWhatIsNotJSONOnTheServersStdout: a line of the process's
// stdout that is not a JSON-RPC message (a banner, a print left in, and
// what looks like JSON but is none: a structured log line, a Python dict)
// is logged, bounded and without the server's credentials, as its stderr
// is, and the session goes on, as the reference SDKs' clients skip such
// lines. It once ended the session (a JSON-looking one until lately):
// one at start had the server started again for ever, never served; one
// mid-session failed every call in flight.
func TestBridgeLogsWhatIsNotJSONOnTheServersStdout(t *testing.T) {
	const key = "upstream-key-0123456789"
	logs := &testkit.LogBuffer{}
	b, err := Start(Spec{Name: "chatty", Command: []string{os.Args[0], "-test.run=^$"}, Env: map[string]string{serverEnv: "raw-chatty", "UPSTREAM_API_KEY": key},
		Log: slog.New(slog.NewTextHandler(logs, nil)), Redact: cutOut([]string{key})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	cs := connectTo(t, b, nil)
	first, err := callText(t.Context(), cs, "ok")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := callText(t.Context(), cs, "ok"); err != nil || again != first {
		t.Fatalf("the second call answered %q, %v; want %q from the same process", again, err, first)
	}
	testkit.Eventually(t, "the lines logged", 5*time.Second, func() error {
		if !strings.Contains(logs.String(), "Starting the raw server on stdio") || !strings.Contains(logs.String(), "calling ok") ||
			!strings.Contains(logs.String(), "structured log line") || !strings.Contains(logs.String(), "dict printed") {
			return fmt.Errorf("not logged yet:\n%s", logs.String())
		}
		return nil
	})
	if strings.Contains(logs.String(), key) {
		t.Fatalf("the server's key was logged:\n%s", logs.String())
	}
}

// TestBridgeSeesAServerExitWhoseChildHoldsItsStdout: a server that exits
// while a process it started still holds its stdout (a helper, a
// subprocess that inherited it) has exited: the call in flight fails at
// once and the server is started again. The bridge once waited for the
// end of its stdout, which the child held: the calls in flight hung until
// their timeout, and the backend until three pings had been missed.
func TestBridgeSeesAServerExitWhoseChildHoldsItsStdout(t *testing.T) {
	cs := connectTo(t, startMode(t, "raw-orphan", nil), nil)
	first, err := callText(t.Context(), cs, "ok")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if _, err := callText(ctx, cs, "crash"); err == nil || ctx.Err() != nil || !strings.Contains(err.Error(), ErrExited.Error()) {
		t.Fatalf("the call the server exited in: %v, after %v; want it failed at once", err, context.Cause(ctx))
	}
	testkit.Eventually(t, "the server started again", 10*time.Second, func() error {
		again, err := callText(t.Context(), cs, "ok")
		if err == nil && again == first {
			err = fmt.Errorf("the same process answers: %s", again)
		}
		return err
	})
}

// TestBridgeSkipsAnErrorThatAnswersNoRequest: a JSON-RPC error whose id
// is null, which JSON-RPC 2.0 has a server send and which answers no
// request of the client's, is a line the client cannot use: it is logged
// and skipped, and the session goes on. go-sdk's decoder refuses it,
// which once ended the session: a server that answers each notification
// so (notifications/initialized first) was started again for ever.
func TestBridgeSkipsAnErrorThatAnswersNoRequest(t *testing.T) {
	logs := &testkit.LogBuffer{}
	cs := connectTo(t, startMode(t, "raw-nullid", logs), nil)
	first, err := callText(t.Context(), cs, "ok")
	if err != nil {
		t.Fatalf("%v; log:\n%s", err, logs.String())
	}
	testkit.Eventually(t, "the null-id error logged", 5*time.Second, func() error {
		if !strings.Contains(logs.String(), "Method not found") {
			return fmt.Errorf("not logged yet:\n%s", logs.String())
		}
		return nil
	})
	if again, err := callText(t.Context(), cs, "ok"); err != nil || again != first {
		t.Errorf("the second call answered %q, %v; want %q from the same process", again, err, first)
	}
	if strings.Contains(logs.String(), "starting it again") {
		t.Errorf("the server was started again:\n%s", logs.String())
	}
}
