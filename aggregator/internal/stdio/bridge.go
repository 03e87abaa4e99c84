// Package stdio runs a backend MCP server that is a command (an npx or uvx
// package, a local binary) speaking MCP over its stdin and stdout, and
// serves it to the rest of the aggregator as an MCP server over HTTP on a
// loopback port only this process knows the token of. The backend layer
// then treats it as any backend (one path for every call: admission,
// overrides, pinning, limits, both eras), while the process is the one MCP
// session a stdio server has.
//
// A Bridge starts the command, mirrors what it lists (tools, resources,
// templates, prompts) into a go-sdk server and keeps the mirror current on
// its list_changed notifications, forwards every call, read, prompt,
// completion, subscription and ping to it, and logs its stderr, bounded.
// When the process exits, or answers no ping (or, before its first
// listing, no listing) maxMissedPings times in a row, the bridge starts
// it again with back-off (1 s doubling to 30 s, reset after a minute of
// running), and makes its subscriptions again. A request waits up to
// readyWait for a process that is starting, and then fails as one to a
// backend that is down does. Close stops it. The process sees only the
// environment configured for it, and PATH and HOME unless configured, so
// that the aggregator's own secrets never reach it; on Linux it starts
// with no capability and cannot read the aggregator's (isolate_linux.go).
//
// The bridge declares no client capabilities to the process: a stdio
// server cannot ask the client for input (elicitation, sampling, roots)
// through it.
package stdio

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/follow"
)

// Spec is one stdio backend.
type Spec struct {
	// Name is the backend's name, for logs.
	Name string
	// Command is argv: the program and its arguments.
	Command []string
	// Env is the process's whole environment beyond PATH and HOME, which
	// it gets from the aggregator unless Env sets them.
	Env map[string]string
	// Dir is the working directory; empty is the aggregator's.
	Dir string
	// Log receives the bridge's and the process's lines.
	Log *slog.Logger
	// Redact cuts the process's credentials (SecretEnv) out of what the
	// bridge logs of it, its stderr and its errors; nil keeps them as
	// they are.
	Redact func(string) string
}

// Back-off of restarts.
const (
	minBackoff = time.Second
	maxBackoff = 30 * time.Second
	// steadyRun is how long a process must have run for the back-off to
	// start again from minBackoff.
	steadyRun = time.Minute
)

// ErrNotRunning answers a request while the process is not running.
var ErrNotRunning = errors.New("the stdio server is not running")

// Bridge is one running stdio backend and its HTTP face.
type Bridge struct {
	spec Spec
	// path is the program spec.Command names (program).
	path   string
	log    *slog.Logger
	token  string
	url    string
	server *mcp.Server
	http   *http.Server
	cancel context.CancelFunc
	done   chan struct{}

	mu      sync.Mutex
	session *mcp.ClientSession
	// ready is closed once the running process's listing is mirrored,
	// and made anew when it stops: until then the bridge answers as a
	// backend that is down (503), so that health checks see it down and a
	// replaced backend keeps its last listing rather than an empty one.
	ready chan struct{}
	// subscriptions are the bridge's sessions subscribed to each URI,
	// made again on each new process (which knows none of its
	// predecessor's); missedPings counts the pings in a row the running
	// process did not answer. Both under mu.
	subscriptions map[string]map[*mcp.ServerSession]struct{}
	missedPings   int
	// kill stops the running process and what it started at once (nil
	// while none runs), for one that does not stop when asked.
	kill func()
	// syncMu serialises resyncs; mirrored is what the server lists now,
	// by kind, to remove on the next.
	syncMu   sync.Mutex
	mirrored mirrored
	// relist holds a pending resync (listChanged), run by relister.
	relist   chan struct{}
	progress progressRelay
	// stderr logs every run's stderr under one bound: a server that
	// exits at once and is started again logs no more than one that runs.
	// stdout does so for the lines of its stdout that are not messages.
	stderr, stdout *lineLog
}

// Start listens on a loopback port and starts the command in the
// background; the first listing waits for it.
func Start(spec Spec) (*Bridge, error) {
	if len(spec.Command) == 0 || spec.Command[0] == "" {
		return nil, errors.New("a stdio backend needs a command")
	}
	path, err := program(spec.Command[0], spec.Env, spec.Dir)
	if err != nil {
		return nil, fmt.Errorf("command %q: %w: %s", spec.Command[0], err, programAdvice(err))
	}
	log := spec.Log
	if log == nil {
		log = slog.Default()
	}
	var raw [32]byte
	_, _ = rand.Read(raw[:]) // never fails (crypto/rand)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &Bridge{spec: spec, path: path, log: log.With("backend", spec.Name, "stdio", spec.Command[0]), token: hex.EncodeToString(raw[:]),
		url: "http://" + lis.Addr().String() + "/mcp", done: make(chan struct{}), ready: make(chan struct{}), relist: make(chan struct{}, 1),
		subscriptions: map[string]map[*mcp.ServerSession]struct{}{}}
	b.stderr, b.stdout = newLineLog(b.log, spec.Redact, "stderr"), newLineLog(b.log, spec.Redact, "stdout")
	b.server = mcp.NewServer(&mcp.Implementation{Name: spec.Name, Version: "stdio"}, &mcp.ServerOptions{
		Capabilities: &mcp.ServerCapabilities{
			Tools:     &mcp.ToolCapabilities{ListChanged: true},
			Resources: &mcp.ResourceCapabilities{ListChanged: true, Subscribe: true},
			Prompts:   &mcp.PromptCapabilities{ListChanged: true},
		},
		CompletionHandler:  b.complete,
		SubscribeHandler:   b.subscribe,
		UnsubscribeHandler: b.unsubscribe,
		Logger:             slog.New(slog.DiscardHandler),
	})
	b.server.AddReceivingMiddleware(b.passPing)
	mcpHandler := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return b.server }, nil)
	b.http = &http.Server{Handler: b.authorized(mcpHandler), ReadHeaderTimeout: 10 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	go func() { _ = b.http.Serve(lis) }()
	go b.supervise(ctx)
	return b, nil
}

// URL is where the bridge serves MCP; Token is the bearer token it wants.
func (b *Bridge) URL() string   { return b.url }
func (b *Bridge) Token() string { return b.token }

// Close stops the process and the HTTP server.
func (b *Bridge) Close() {
	b.cancel()
	<-b.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = b.http.Shutdown(ctx)
}

// authorized lets through only requests that carry the bridge's token: the
// port is on loopback, but other local processes must not use the
// backend as the aggregator does.
func (b *Bridge) authorized(next http.Handler) http.Handler {
	want := []byte("Bearer " + b.token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if subtle.ConstantTimeCompare([]byte(r.Header.Get("Authorization")), want) != 1 {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost && !b.waitReady(r.Context()) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, ErrNotRunning.Error(), http.StatusServiceUnavailable)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// readyWait is how long a request waits for a process that is starting:
// the first listing and calls made meanwhile are served once it runs.
const readyWait = 10 * time.Second

// waitReady reports whether the process runs and is mirrored, waiting up
// to readyWait (or ctx) for it.
func (b *Bridge) waitReady(ctx context.Context) bool {
	b.mu.Lock()
	ch := b.ready
	b.mu.Unlock()
	if closed(ch) {
		return true
	}
	t := time.NewTimer(readyWait)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-t.C:
	case <-ctx.Done():
	}
	return false
}

// setReadyLocked records whether the process runs and is mirrored; mu is
// held.
func (b *Bridge) setReadyLocked(ready bool) {
	switch was := closed(b.ready); {
	case ready && !was:
		close(b.ready)
	case !ready && was:
		b.ready = make(chan struct{})
	}
}

func closed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// current is the process's session, nil while it does not run.
func (b *Bridge) current() *mcp.ClientSession {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.session
}

// supervise runs the process until ctx ends, again with back-off after
// each exit (follow.Run's: jittered, doubling from minBackoff to
// maxBackoff, from minBackoff again after a run of steadyRun or more),
// and the resyncs its list_changed notifications ask for.
func (b *Bridge) supervise(ctx context.Context) {
	defer close(b.done)
	var relister sync.WaitGroup
	defer relister.Wait()
	relister.Go(func() { b.relister(ctx) })
	follow.Run(ctx, follow.Backoff{Min: minBackoff, Max: maxBackoff}, b.runOnce, func(err error, _ bool, wait time.Duration) {
		b.log.Warn("the stdio server stopped; starting it again", "err", b.redacted(err), "in", wait.Round(time.Millisecond))
	})
}

// runOnce starts the process, mirrors it and waits until it exits (or ctx
// ends, which stops it); a run of steadyRun or more was steady, which
// starts the back-off over.
func (b *Bridge) runOnce(ctx context.Context, steady func()) error {
	started := time.Now()
	defer func() {
		if time.Since(started) >= steadyRun {
			steady()
		}
	}()
	cmd := serverCommand(b.path, b.spec.Command)
	cmd.Env = environment(b.spec.Env)
	cmd.Dir = b.spec.Dir
	ownGroup(cmd)
	defer killGroup(cmd)
	cmd.Stderr = b.stderr
	// A child that kept the server's stderr open must not keep Wait (and
	// the restart) waiting: killGroup stops it afterwards.
	cmd.WaitDelay = time.Second
	defer b.stderr.Flush()
	defer b.stdout.Flush()
	client := mcp.NewClient(&mcp.Implementation{Name: "switchboard-aggregator", Version: "1"}, &mcp.ClientOptions{
		Capabilities:               &mcp.ClientCapabilities{},
		ToolListChangedHandler:     func(context.Context, *mcp.ToolListChangedRequest) { b.listChanged() },
		PromptListChangedHandler:   func(context.Context, *mcp.PromptListChangedRequest) { b.listChanged() },
		ResourceListChangedHandler: func(context.Context, *mcp.ResourceListChangedRequest) { b.listChanged() },
		ResourceUpdatedHandler: func(ctx context.Context, r *mcp.ResourceUpdatedNotificationRequest) {
			_ = b.server.ResourceUpdated(ctx, r.Params)
		},
		Logger: slog.New(slog.DiscardHandler),
	})
	connectCtx, cancel := context.WithTimeout(ctx, time.Minute)
	process := &processStdin{cmd: cmd, grace: 2 * time.Second}
	transport := progressTapped{Transport: commandTransport{process: process, junk: b.stdout}, relay: &b.progress}
	cs, err := client.Connect(connectCtx, transport, &mcp.ClientSessionOptions{ProtocolVersion: "2025-11-25"})
	cancel()
	if err != nil {
		return fmt.Errorf("start %s: %w", b.spec.Command[0], err)
	}
	b.log.Info("stdio server started", "pid", pid(cmd))
	b.mu.Lock()
	b.session, b.missedPings, b.kill = cs, 0, func() { killGroup(cmd) }
	b.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { stopSession(cs, process) })
	defer stop()
	ended := make(chan struct{})
	go func() {
		_ = cs.Wait()
		close(ended)
	}()
	unmade := b.resubscribe(cs, nil)
	if b.firstListing(ended, func() { killGroup(cmd) }) && len(unmade) > 0 {
		// Listed, the server answers: it was slow, not hung, and is asked
		// again for what it left unanswered (the bridge's record of them
		// stays, so clients' later subscribes to them are not sent on).
		b.log.Warn("the restarted stdio server answered a subscription late; asking again for those not made", "count", len(unmade))
		if unmade = b.resubscribe(cs, unmade); len(unmade) > 0 {
			b.log.Warn("the restarted stdio server answers no subscription; those not made wait for its next start", "count", len(unmade))
		}
	}
	err = cs.Wait()
	b.mu.Lock()
	b.session, b.kill = nil, nil
	b.setReadyLocked(false)
	b.mu.Unlock()
	return err
}

// stopGrace bounds how long a process is given to stop when asked (its
// stdin closed, then SIGTERM: commandTransport's grace twice, and a
// second): one that reads nothing has a write to it blocked on a full
// pipe, which holds the session's close, until the process is killed.
const stopGrace = 5 * time.Second

// stopSession stops process, then closes cs, its session, and kills its
// process group if that takes longer than stopGrace. The process first:
// the session's close waits for its calls in flight, which a process
// busy with one answers late or never, and which its stop ends.
func stopSession(cs *mcp.ClientSession, process *processStdin) {
	closed := make(chan struct{})
	go func() {
		_ = process.Close()
		_ = cs.Close()
		close(closed)
	}()
	select {
	case <-closed:
	case <-time.After(stopGrace):
		killGroup(process.cmd)
	}
}

// maxMissedPings is how many pings in a row a running process may leave
// unanswered (one that has just started, listings: firstListing) before
// it is taken for hung and started again.
const maxMissedPings = 3

// passPing answers a ping (the aggregator's health probe) only once the
// process answers one: the bridge's server would answer it itself, and a
// process that stopped reading its stdin would look healthy forever.
// After maxMissedPings unanswered in a row the process is stopped, and
// started again like one that exited.
func (b *Bridge) passPing(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		if method != "ping" {
			return next(ctx, method, req)
		}
		cs := b.current()
		if cs == nil {
			return nil, ErrNotRunning
		}
		if _, ok := ctx.Deadline(); !ok {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, readyWait)
			defer cancel()
		}
		// go-sdk's write to the process ignores the context: once a
		// process that reads nothing has filled its stdin's pipe, a ping
		// waits for ever. It counts as missed when the context ends.
		pinged := make(chan error, 1)
		go func() { pinged <- cs.Ping(ctx, nil) }()
		var err error
		select {
		case err = <-pinged:
		case <-ctx.Done():
			err = ctx.Err()
		}
		b.mu.Lock()
		missed, kill := 0, b.kill
		if b.session == cs {
			if err != nil && ctx.Err() != nil {
				b.missedPings++
			} else {
				b.missedPings = 0
			}
			missed = b.missedPings
		}
		b.mu.Unlock()
		if missed >= maxMissedPings && kill != nil {
			// Killed, not asked: it reads nothing, and writes to it wait
			// (the session's close too) until it is gone.
			b.log.Warn("the stdio server answers no ping; killing it to start it again", "missed", missed)
			kill()
		}
		if err != nil {
			return nil, fmt.Errorf("the stdio server did not answer a ping: %w", err)
		}
		return next(ctx, method, req)
	}
}

// resubscribe makes the bridge's subscriptions again on a process that
// has just started: uris, or all of them when nil. It returns those it
// left unmade at the first one left unanswered: a server that answers
// none would hold the first listing, which tells a hung server, for a
// timeout per subscription.
func (b *Bridge) resubscribe(cs *mcp.ClientSession, uris []string) (unmade []string) {
	if uris == nil {
		b.mu.Lock()
		for uri := range b.subscriptions {
			b.pruneLocked(uri)
		}
		uris = slices.Collect(maps.Keys(b.subscriptions))
		b.mu.Unlock()
	}
	for i, uri := range uris {
		ctx, cancel := context.WithTimeout(context.Background(), listTimeout)
		err := cs.Subscribe(ctx, &mcp.SubscribeParams{URI: uri})
		cancel()
		if errors.Is(err, context.DeadlineExceeded) {
			return uris[i:]
		}
		if err != nil {
			b.log.Warn("subscribing again on the restarted stdio server failed", "err", b.redacted(err))
		}
	}
	return nil
}

func pid(cmd *exec.Cmd) int {
	if cmd.Process == nil {
		return 0
	}
	return cmd.Process.Pid
}

// environment is the process's environment: spec's, and the aggregator's
// PATH and HOME unless spec sets them.
func environment(spec map[string]string) []string {
	env := make([]string, 0, len(spec)+2)
	for _, k := range []string{"PATH", "HOME"} {
		if _, set := spec[k]; !set {
			if v, ok := os.LookupEnv(k); ok {
				env = append(env, k+"="+v)
			}
		}
	}
	for k, v := range spec {
		env = append(env, k+"="+v)
	}
	return env
}

// CheckCommands reports, by key, each stdio backend whose dir is not a
// directory or whose command is not found, or is a script whose
// interpreter is not: at start and on each reload, before a backend is
// replaced by one that cannot run.
func CheckCommands(backends []config.Backend) error {
	var errs []error
	for i, b := range backends {
		if len(b.Command) == 0 || b.Command[0] == "" {
			continue
		}
		if fi, err := os.Stat(b.Dir); b.Dir != "" && (err != nil || !fi.IsDir()) {
			errs = append(errs, &config.KeyError{Key: fmt.Sprintf("aggregator.backends[%d].dir", i), Err: errors.New("is not a directory")})
			continue
		}
		path, err := program(b.Command[0], b.Env, b.Dir)
		if err != nil {
			errs = append(errs, &config.KeyError{Key: fmt.Sprintf("aggregator.backends[%d].command", i),
				Err: fmt.Errorf("%w: %s", err, programAdvice(err))})
			continue
		}
		if interpreter := missingInterpreter(path, b.Env, b.Dir); interpreter != "" {
			errs = append(errs, &config.KeyError{Key: fmt.Sprintf("aggregator.backends[%d].command", i),
				Err: fmt.Errorf("its program is a script whose interpreter (%s, on its #! line) is not found: install it", interpreter)})
		}
	}
	return errors.Join(errs...)
}
