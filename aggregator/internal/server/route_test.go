package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	"github.com/switchboard-mcp/switchboard/services/backenderr"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// TestEveryRouteBehavesTheSame holds the five routes of an admitted
// tools/call (route.go) to one behaviour: each column below is asserted
// the same way on each route, against real go-sdk backends of both eras.
// A cell a route cannot drive says why in the table; nothing is skipped
// silently.
//
//	              route cancel timeout progress log credentials answered large capability errors
//	plain/modern  yes   yes    yes     yes      yes yes         yes      yes   yes        yes
//	plain/legacy  yes   yes    yes     yes      n/a yes         yes      yes   yes        yes
//	held          yes   yes    yes     yes      yes yes         yes      yes   n/a        yes
//	resume        yes   yes    yes     yes      yes yes         yes      yes   n/a        yes
//	forward       yes   yes    yes     yes      yes yes         yes      yes   n/a        yes
//	own-session   yes   yes    yes     yes      yes yes         yes      yes   yes        yes
//
// n/a: noLogLevel, declared.
func TestEveryRouteBehavesTheSame(t *testing.T) {
	const (
		noLogLevel = "a streamed call with a log level to a Legacy backend is the own-session route, never plain: MCP sets a Legacy backend's log level per session (logging/setLevel), and the shared session cannot carry one caller's level"
		declared   = "the caller declared elicitation: that is what holds the call, and the tool asks it"
	)
	heldNA := map[string]string{"capability": declared}
	rows := []routeRow{
		{name: "plain/modern"},
		{name: "plain/legacy", legacy: true, na: map[string]string{"log": noLogLevel}},
		{name: "held", legacy: true, caps: true, sessions: 1, na: heldNA},
		{name: "resume", legacy: true, caps: true, retry: true, na: heldNA},
		{name: "forward", legacy: true, caps: true, retry: true, forward: true, na: heldNA},
		{name: "own-session", legacy: true, level: "warning", sessions: 1},
	}
	columns := []struct {
		name string
		run  func(t *testing.T, w *routeWorld)
	}{
		// route: the row takes its route. Held and own-session calls open a
		// backend session of their own, a plain call or a retry none; a
		// retry completes a call that was input_required (routeWorld.call).
		{"route", func(t *testing.T, w *routeWorld) {
			_, resp, err := w.call(context.Background(), "probe", probeArgs{ID: w.row.name + "-route"}, nil)
			if err != nil || resp.GetResultType() != "complete" || resultText(t, resp.GetResultJson()) != "done "+w.row.name+"-route" {
				t.Fatalf("call: %v %v", resp, err)
			}
			if w.opened != w.row.sessions {
				t.Fatalf("the call opened %d backend sessions, want %d for the %s route", w.opened, w.row.sessions, w.row.name)
			}
		}},
		// cancellation: the caller going away cancels the backend's handler.
		{"cancellation", func(t *testing.T, w *routeWorld) {
			id := w.row.name + "-cancel"
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, _, err := w.call(ctx, "probe", probeArgs{ID: id, Do: "hang"}, nil)
				done <- err
			}()
			testkit.Eventually(t, "the backend's handler runs", 5*time.Second, func() bool { return w.probe.is(id, "running") })
			cancel()
			testkit.Eventually(t, "the backend's handler is cancelled", 5*time.Second, func() bool { return w.probe.is(id, "cancelled") })
			if err := <-done; status.Code(err) != codes.Canceled {
				t.Fatalf("the cancelled call ended with %v", err)
			}
		}},
		// timeout: a tool override's timeout bounds the call instead of
		// the backend's: a longer one lets the call outlast the backend's
		// timeout; a shorter one ends the call as a backend timeout, well
		// before the backend's own, and ends the handler.
		{"timeout", func(t *testing.T, w *routeWorld) {
			outlast := w.row.name + "-outlast"
			_, resp, err := w.call(context.Background(), "probe", probeArgs{ID: outlast, Do: "outlast"}, nil)
			if err != nil || resultText(t, resp.GetResultJson()) != "done "+outlast {
				t.Fatalf("a call of a tool whose timeout is longer than the backend's (%s): %v %v", routeBackendTimeout, resp, err)
			}
			id := w.row.name + "-timeout"
			start := time.Now()
			_, _, err = w.call(context.Background(), "slow", probeArgs{ID: id, Do: "hang"}, nil)
			took := time.Since(start)
			wantStatus(t, err, codes.DeadlineExceeded, commonv1.ErrorReason_ERROR_REASON_BACKEND_TIMEOUT)
			if took > 3*time.Second {
				t.Fatalf("timed out after %s: not the tool's timeout (%s)", took, routeToolTimeout)
			}
			testkit.Eventually(t, "the timed-out handler is cancelled", 5*time.Second, func() bool { return w.probe.is(id, "cancelled") })
			// Without an override, the backend's timeout ends the call
			// the same way.
			bare := w.row.name + "-bare"
			_, _, err = w.call(context.Background(), "bare", probeArgs{ID: bare, Do: "hang"}, nil)
			wantStatus(t, err, codes.DeadlineExceeded, commonv1.ErrorReason_ERROR_REASON_BACKEND_TIMEOUT)
			testkit.Eventually(t, "the handler past the backend's timeout is cancelled", 5*time.Second, func() bool { return w.probe.is(bare, "cancelled") })
		}},
		// progress: the backend's progress reaches the caller before the
		// result, with the caller's own token.
		{"progress", func(t *testing.T, w *routeWorld) {
			id := w.row.name + "-progress"
			notes, resp, err := w.call(context.Background(), "probe", probeArgs{ID: id, Do: "report"}, &aggregatorv1.RequestContext{ProgressTokenJson: `"tok-` + id + `"`})
			if err != nil || resultText(t, resp.GetResultJson()) != "done "+id {
				t.Fatalf("call: %v %v", resp, err)
			}
			want := []string{fmt.Sprintf(`"tok-%s" 1 %s`, id, id), fmt.Sprintf(`"tok-%s" 2 %s`, id, id)}
			if got := noteTexts(t, notes, "notifications/progress"); !reflect.DeepEqual(got, want) {
				t.Fatalf("progress %q, want %q", got, want)
			}
		}},
		// log: the backend's log messages at or above the caller's level
		// reach the caller before the result.
		{"log", func(t *testing.T, w *routeWorld) {
			id := w.row.name + "-log"
			notes, resp, err := w.call(context.Background(), "probe", probeArgs{ID: id, Do: "report"}, &aggregatorv1.RequestContext{LogLevel: "warning"})
			if err != nil || resultText(t, resp.GetResultJson()) != "done "+id {
				t.Fatalf("call: %v %v", resp, err)
			}
			want := []string{"warning " + id + " warning"}
			if got := noteTexts(t, notes, "notifications/message"); !reflect.DeepEqual(got, want) {
				t.Fatalf("log messages %q, want %q", got, want)
			}
		}},
		// credentials: the backend's static headers reach the tool's own
		// request, and every request the row's backend got (so also a held
		// call's own session and the answer a retry carries to it); the
		// tool echoes its own back, which the caller gets redacted.
		{"credentials", func(t *testing.T, w *routeWorld) {
			id := w.row.name + "-credentials"
			_, resp, err := w.call(context.Background(), "probe", probeArgs{ID: id, Do: "header"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			if got := resultText(t, resp.GetResultJson()); got != "[redacted]" {
				t.Fatalf("the tool's request carried %s %q, want the backend's credential, echoed back redacted", probeHeader, got)
			}
			w.b.mu.Lock()
			defer w.b.mu.Unlock()
			for _, r := range w.b.requests {
				if r.Header.Get(probeHeader) != w.secret {
					t.Fatalf("a %s request without the backend's header", r.Method)
				}
			}
		}},
		// answered: the backend, or what stands before it (an auth layer,
		// a load balancer), answers the call's request with an HTTP error:
		// 401 and 403 refuse the credential, which is the operator's to
		// fix (no challenge passed on); 429 limits the caller, 503 with
		// Retry-After asks it to come back later, a 500 may carry the
		// backend's JSON-RPC error. The caller gets the same error on
		// every route; the backend's health and sessions are untouched, so
		// the next call runs. On a retry it is the request carrying the
		// client's answer to the backend that is answered so (the call's
		// own went out in the first round): the retry fails at once, not
		// at the call's timeout, and the backend's tool, which waits for
		// that answer, is cancelled.
		{"answered", func(t *testing.T, w *routeWorld) {
			for _, a := range []struct {
				status int
				code   codes.Code
				reason commonv1.ErrorReason
				// backend is the backend error, retryAfter the status's
				// retryAfterSeconds.
				backend    *aggregatorv1.BackendError
				retryAfter string
			}{
				{http.StatusUnauthorized, codes.Unknown, commonv1.ErrorReason_ERROR_REASON_BACKEND_ERROR, refusedCredential(401, "unauthorized"), ""},
				{http.StatusForbidden, codes.Unknown, commonv1.ErrorReason_ERROR_REASON_BACKEND_ERROR, refusedCredential(403, "forbidden"), ""},
				{http.StatusTooManyRequests, codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_RATE_LIMITED, nil, "7"},
				{http.StatusServiceUnavailable, codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_BACKEND_UNAVAILABLE, nil, "9"},
				{http.StatusInternalServerError, codes.Unknown, commonv1.ErrorReason_ERROR_REASON_BACKEND_ERROR, &aggregatorv1.BackendError{Code: -32050, Message: "backend busy"}, ""},
			} {
				marker := fmt.Sprintf("answer-%d", a.status)
				id := w.row.name + "-" + marker
				_, _, err := w.call(context.Background(), "probe", probeArgs{ID: id, Do: marker}, nil)
				wantStatus(t, err, a.code, a.reason)
				if got, ok := backenderr.From(err); a.backend != nil && (!ok || !proto.Equal(got, a.backend)) {
					t.Fatalf("HTTP %d: backend error %v, want %v", a.status, got, a.backend)
				}
				if _, meta := apierr.Info(err); meta["retryAfterSeconds"] != a.retryAfter {
					t.Fatalf("HTTP %d: retryAfterSeconds %q, want %q", a.status, meta["retryAfterSeconds"], a.retryAfter)
				}
				if w.row.retry {
					testkit.Eventually(t, "the tool waiting for the refused answer is cancelled", 5*time.Second, func() bool { return w.probe.is(id, "cancelled asking") })
				}
			}
			id := w.row.name + "-after-answers"
			_, resp, err := w.call(context.Background(), "probe", probeArgs{ID: id}, nil)
			if err != nil || resultText(t, resp.GetResultJson()) != "done "+id {
				t.Fatalf("the call after the answers: %v %v", resp, err)
			}
		}},
		// large: a result as large as a backend's message may be (32 MiB)
		// passes whole; one past it fails the call as a broken protocol,
		// and the next call runs.
		{"large", func(t *testing.T, w *routeWorld) {
			id := w.row.name + "-large"
			_, resp, err := w.call(context.Background(), "probe", probeArgs{ID: id, Do: "large", Size: largeResult}, nil)
			if err != nil || len(resultText(t, resp.GetResultJson())) != largeResult {
				t.Fatalf("a result of %d bytes: %v", largeResult, err)
			}
			_, _, err = w.call(context.Background(), "probe", probeArgs{ID: id + "-over", Do: "large", Size: 33 << 20}, nil)
			wantStatus(t, err, codes.Internal, commonv1.ErrorReason_ERROR_REASON_UNSPECIFIED)
			id += "-after"
			if _, resp, err := w.call(context.Background(), "probe", probeArgs{ID: id}, nil); err != nil || resultText(t, resp.GetResultJson()) != "done "+id {
				t.Fatalf("the call after the oversized result: %v %v", resp, err)
			}
		}},
		// capability: a tool that asks the client for input it did not
		// declare it can give. A Modern backend returns its question,
		// which the gateway answers -32021 for such a client; a go-sdk
		// backend in a Legacy session fails the call with its own text,
		// which becomes the same -32021, on every route.
		{"capability", func(t *testing.T, w *routeWorld) {
			_, resp, err := w.call(context.Background(), "probe", probeArgs{ID: w.row.name + "-capability", Do: "input"}, nil)
			if !w.row.legacy {
				if err != nil || resp.GetResultType() != "input_required" || !strings.Contains(resp.GetResultJson(), "elicitation/create") {
					t.Fatalf("Modern backend: %v %v, want its question", resp, err)
				}
				return
			}
			wantStatus(t, err, codes.Unknown, commonv1.ErrorReason_ERROR_REASON_BACKEND_ERROR)
			got, ok := backenderr.From(err)
			if !ok || got.GetCode() != -32021 || got.GetDataJson() != `{"requiredCapabilities":{"elicitation":{}}}` {
				t.Fatalf("backend error %v, want -32021 naming elicitation", got)
			}
		}},
		// errors: a JSON-RPC error is the backend's error, detail for
		// detail; an isError result is a result, the same on every route.
		{"errors", func(t *testing.T, w *routeWorld) {
			_, _, err := w.call(context.Background(), "probe", probeArgs{ID: w.row.name + "-rpc", Do: "rpc-error"}, nil)
			wantStatus(t, err, codes.Unknown, commonv1.ErrorReason_ERROR_REASON_BACKEND_ERROR)
			wantErr := &aggregatorv1.BackendError{Code: 4242, Message: "probe refused", DataJson: `{"why":"asked to"}`}
			if got, ok := backenderr.From(err); !ok || !proto.Equal(got, wantErr) {
				t.Fatalf("backend error %v, want %v", got, wantErr)
			}
			_, resp, err := w.call(context.Background(), "probe", probeArgs{ID: w.row.name + "-iserror", Do: "is-error"}, nil)
			if err != nil {
				t.Fatal(err)
			}
			// A Modern backend's result also has its era's members (resultType,
			// _meta), passed on as the backend sent them; the rest is the same.
			var got struct {
				Content []map[string]any `json:"content"`
				IsError bool             `json:"isError"`
			}
			want := []map[string]any{{"type": "text", "text": "probe failed"}}
			if err := json.Unmarshal([]byte(resp.GetResultJson()), &got); err != nil || !resp.GetIsError() || !got.IsError || resp.GetResultType() != "complete" || !reflect.DeepEqual(got.Content, want) {
				t.Fatalf("isError result: %v %s (%v)", resp.GetIsError(), resp.GetResultJson(), err)
			}
		}},
	}
	for _, row := range rows {
		t.Run(row.name, func(t *testing.T) {
			t.Parallel()
			w := startRouteWorld(t, row)
			for _, col := range columns {
				t.Run(col.name, func(t *testing.T) {
					if why := row.na[col.name]; why != "" {
						t.Log("not drivable on this route: " + why)
						return
					}
					col.run(t, w)
				})
			}
		})
	}
}

// largeResult is the text of a result near the bound on a backend's
// message (32 MiB), its JSON and the event around it included.
const largeResult = 32<<20 - 1024

// routeToolTimeout is the tool override's timeout of the slow tool,
// routeBackendTimeout the backend's: the probe tool's override is longer
// (10s).
const (
	routeToolTimeout    = 400 * time.Millisecond
	routeBackendTimeout = time.Second
)

// probeHeader is the backend's static credential header.
const probeHeader = "X-Probe-Credential"

// routeRow is a route and how a call takes it.
type routeRow struct {
	name string
	// legacy: a Legacy-only backend (sessions); else a stateless Modern one.
	legacy bool
	// caps: the caller can answer elicitation, so a Legacy backend's call
	// is held (or a held call resumed).
	caps bool
	// level: every call asks for log messages at this level.
	level string
	// retry: the behaviour runs on the retry of a held call, on the
	// replica holding it or, with forward, on its peer.
	retry, forward bool
	// sessions is how many backend sessions the behaviour's request opens.
	sessions int
	// na: behaviours the route cannot drive, each saying why.
	na map[string]string
}

// routeWorld is a row's backend and aggregator replicas.
type routeWorld struct {
	row    routeRow
	b      *testBackend
	probe  *probe
	secret string
	// first gets every call; retry the retries of held calls.
	first, retry aggregatorv1.AggregatorServiceClient
	// owner is the address of the replica holding calls (forward only).
	owner string
	// opened is how many sessions the last behaviour request opened.
	opened int
}

func startRouteWorld(t *testing.T, row routeRow) *routeWorld {
	w := &routeWorld{row: row, probe: &probe{seen: map[string]string{}}, secret: "secret-" + row.name}
	w.b = newTestBackend(t, "b", backendOptions{stateful: row.legacy, extra: w.probe.add})
	// The backend behind a front (an auth layer, a load balancer), which
	// answers a call's request itself when its arguments ask for it
	// (answerMarked).
	url := frontOf(t, w.b, answerMarked)
	protocol := "2026-07-28"
	if row.legacy {
		protocol = "2025-11-25"
	}
	yaml := func(listen, peers string) string {
		return `
aggregator:
  catalogTTL: 1h` + listen + peers + `
  backends:
    - name: b
      url: ` + url + `
      protocol: "` + protocol + `"
      timeout: ` + routeBackendTimeout.String() + `
      headers: {` + probeHeader + `: ` + w.secret + `}
  toolOverrides:
    - {backend: b, tool: slow, timeout: ` + routeToolTimeout.String() + `}
    - {backend: b, tool: probe, timeout: 10s}
`
	}
	start := func(listen, peers string) *harness { return startAggregatorFile(t, yaml(listen, peers)) }
	if !row.forward {
		h := start("", "")
		w.first, w.retry = h.gateway, h.gateway
		return w
	}
	// Two replicas, peers of each other: calls are held by the first, and
	// retries reach the second, which forwards them.
	one, two := freeAddress(t), freeAddress(t)
	peers := "\n  peers: {addresses: [\"" + one + "\", \"" + two + "\"], token: " + aggregatorToken + "}"
	w.first, w.retry, w.owner = start("\n  listen: \""+one+"\"", peers).gateway, start("\n  listen: \""+two+"\"", peers).gateway, one
	return w
}

// freeAddress is a loopback address no one listens on (a replica's own
// address must be known before it starts: its held calls name it).
func freeAddress(t *testing.T) string {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	return lis.Addr().String()
}

// call calls the row's tool the row's way, with the request context rc
// (plus the row's capabilities and log level), streamed, and returns the
// behaviour request's notifications and result. A retry row first makes a
// call that asks the client, which must come back input_required, and
// then retries it with the answer: the behaviour runs in the retry, which
// alone asks for progress (its own token) and log messages.
func (w *routeWorld) call(ctx context.Context, tool string, a probeArgs, rc *aggregatorv1.RequestContext) ([]*aggregatorv1.Notification, *aggregatorv1.CallToolResponse, error) {
	if rc == nil {
		rc = &aggregatorv1.RequestContext{}
	}
	if w.row.caps {
		rc.ClientCapabilitiesJson = `{"elicitation":{}}`
	}
	if w.row.level != "" {
		rc.LogLevel = w.row.level
	}
	a.Ask = w.row.retry
	// On a retry, what stands before the backend answers the request
	// carrying the client's answer (answerMarked), not the call's.
	var answerMeta string
	if w.row.retry && strings.HasPrefix(a.Do, "answer-") {
		answerMeta, a.Do = `,"_meta":{"note":"`+a.Do+`"}`, ""
	}
	args, _ := json.Marshal(a)
	req := &aggregatorv1.CallToolRequest{Principal: principal("alice"), Name: "b_" + tool, ArgumentsJson: string(args), Context: rc}
	if w.row.retry {
		// The first round asks for neither progress nor log messages:
		// the retry gets what it asks for itself, as the same call made
		// plainly would (it once got only what the first round asked).
		first := proto.Clone(req).(*aggregatorv1.CallToolRequest)
		first.Context.ProgressTokenJson, first.Context.LogLevel = "", ""
		_, held, err := streamCallErr(ctx, w.first, first)
		key, state, ok := heldQuestion(held)
		if err != nil || !ok {
			return nil, nil, fmt.Errorf("the call to retry: %v %v", held, err)
		}
		if w.row.forward && !strings.HasSuffix(state, "@"+w.owner) {
			return nil, nil, fmt.Errorf("requestState %q does not name the replica holding the call (%s)", state, w.owner)
		}
		req.InputResponsesJson = `{"` + key + `":{"action":"accept","content":{"sure":true}` + answerMeta + `}}`
		req.RequestState = state
	}
	before := w.b.received("initialize")
	notes, resp, err := streamCallErr(ctx, w.retryOr(), req)
	w.opened = w.b.received("initialize") - before
	return notes, resp, err
}

func (w *routeWorld) retryOr() aggregatorv1.AggregatorServiceClient {
	if w.row.retry {
		return w.retry
	}
	return w.first
}

// streamCallErr is streamCall that returns the call's error.
func streamCallErr(ctx context.Context, c aggregatorv1.AggregatorServiceClient, req *aggregatorv1.CallToolRequest) ([]*aggregatorv1.Notification, *aggregatorv1.CallToolResponse, error) {
	stream, err := c.CallToolStream(ctx, &aggregatorv1.CallToolStreamRequest{Call: req})
	if err != nil {
		return nil, nil, err
	}
	var notes []*aggregatorv1.Notification
	var result *aggregatorv1.CallToolResponse
	for {
		ev, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			return notes, nil, err
		}
		if result != nil {
			return notes, nil, fmt.Errorf("an event after the result: %v", ev)
		}
		if n := ev.GetNotification(); n != nil {
			notes = append(notes, n)
		} else {
			result = ev.GetResult()
		}
	}
	if result == nil {
		return notes, nil, errors.New("the stream ended without a result")
	}
	return notes, result, nil
}

// noteTexts are the notifications of method, one line each: a progress
// notification's token, progress and message, a log message's level and
// data. Params must not carry the backend's _meta.
func noteTexts(t *testing.T, notes []*aggregatorv1.Notification, method string) []string {
	t.Helper()
	var out []string
	for _, n := range notes {
		var p struct {
			ProgressToken json.RawMessage `json:"progressToken"`
			Progress      float64         `json:"progress"`
			Message       string          `json:"message"`
			Level         string          `json:"level"`
			Data          string          `json:"data"`
			Meta          any             `json:"_meta"`
		}
		if err := json.Unmarshal([]byte(n.GetParamsJson()), &p); err != nil || p.Meta != nil {
			t.Fatalf("%s params %s", n.GetMethod(), n.GetParamsJson())
		}
		switch {
		case n.GetMethod() != method:
		case method == "notifications/progress":
			out = append(out, fmt.Sprintf("%s %g %s", p.ProgressToken, p.Progress, p.Message))
		default:
			out = append(out, p.Level+" "+p.Data)
		}
	}
	return out
}

// probe is the tools probe, slow and bare (the same, with a tool
// override's timeout on probe and slow, none on bare): after asking the client, if told to, they do what
// their arguments say, and note what became of each call by its id.
type probe struct {
	mu sync.Mutex
	// seen: running, then cancelled; or cancelled asking (the client).
	seen map[string]string
}

type probeArgs struct {
	ID string `json:"id"`
	// Do: hang (until cancelled), report (progress twice, log at debug
	// and warning), outlast (the backend's timeout, then answer), input,
	// rpc-error, is-error, header (the credential header's value), large
	// (a text of Size bytes),
	// answer-<status> (the request is answered before the tool sees it:
	// answerMarked); else answer "done <id>".
	Do  string `json:"do,omitempty"`
	Ask bool   `json:"ask,omitempty"`
	// Size is the length of the text a large result holds.
	Size int `json:"size,omitempty"`
}

func (p *probe) is(id, state string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[id] == state
}

func (p *probe) note(id, state string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.seen[id] = state
}

func (p *probe) add(b *testBackend) {
	handler := func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		var a probeArgs
		if err := json.Unmarshal(req.Params.Arguments, &a); err != nil {
			return nil, err
		}
		if a.Ask {
			if _, err := req.Session.Elicit(ctx, &mcp.ElicitParams{Message: "Go on?", RequestedSchema: map[string]any{
				"type": "object", "properties": map[string]any{"sure": map[string]any{"type": "boolean"}},
			}}); err != nil {
				if ctx.Err() != nil {
					p.note(a.ID, "cancelled asking")
				}
				return nil, err
			}
		}
		text := func(s string) *mcp.CallToolResult {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: s}}}
		}
		switch a.Do {
		case "hang":
			p.note(a.ID, "running")
			select {
			case <-ctx.Done():
				p.note(a.ID, "cancelled")
				return nil, ctx.Err()
			case <-b.release:
				return text("released"), nil
			}
		case "report":
			if tok := req.Params.GetProgressToken(); tok != nil {
				for i := 1; i <= 2; i++ {
					if err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 2, Message: a.ID}); err != nil {
						return nil, err
					}
				}
			}
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "debug", Data: a.ID + " debug"})
			_ = req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: "warning", Data: a.ID + " warning"})
		case "input":
			// Modern-style: the tool returns its question (go-sdk asks it
			// of a Legacy client itself, or fails without the capability).
			if _, answered := req.Params.InputResponses["q"]; !answered {
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"q": &mcp.ElicitParams{Message: "Go on?",
					RequestedSchema: map[string]any{"type": "object"}}}}, nil
			}
		case "outlast":
			select {
			case <-time.After(routeBackendTimeout + 200*time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
		case "rpc-error":
			return nil, &jsonrpc.Error{Code: 4242, Message: "probe refused", Data: json.RawMessage(`{"why":"asked to"}`)}
		case "is-error":
			return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "probe failed"}}}, nil
		case "header":
			return text(req.Extra.Header.Get(probeHeader)), nil
		case "large":
			return text(strings.Repeat("x", a.Size)), nil
		}
		return text("done " + a.ID), nil
	}
	for _, name := range []string{"probe", "slow", "bare"} {
		b.server.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}}, handler)
	}
}

// answerMarked answers a request whose body holds "answer-<status>" (in a
// call's arguments, or in the _meta of a client's answer) with that
// status, as what stands before the MCP server would: a 401 or 403 with
// a challenge, a 429 or 503 with a Retry-After, a 500 with a JSON-RPC
// error. It passes every other request on.
func answerMarked(w http.ResponseWriter, _ *http.Request, body []byte) bool {
	_, marked, ok := bytes.Cut(body, []byte(`"answer-`))
	if !ok || len(marked) < 3 {
		return false
	}
	status, err := strconv.Atoi(string(marked[:3]))
	if err != nil {
		return false
	}
	switch status {
	case http.StatusUnauthorized:
		w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
	case http.StatusForbidden:
		w.Header().Set("WWW-Authenticate", `Bearer error="insufficient_scope", scope="probe:write"`)
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", "7")
	case http.StatusServiceUnavailable:
		w.Header().Set("Retry-After", "9")
	case http.StatusInternalServerError:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"error":{"code":-32050,"message":"backend busy"}}`))
		return true
	}
	w.WriteHeader(status)
	return true
}

// refusedCredential is the backend error of a refused static credential.
func refusedCredential(status int, reason string) *aggregatorv1.BackendError {
	return &aggregatorv1.BackendError{Code: -32603, DataJson: fmt.Sprintf(`{"httpStatus":%d,"reason":%q}`, status, reason),
		Message: fmt.Sprintf("the tool's server refused the credentials Switchboard holds for it (HTTP %d); an operator must fix them", status)}
}
