package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/codemode"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/engine"
	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
	"github.com/switchboard-mcp/switchboard/services/ratelimit"
	"github.com/switchboard-mcp/switchboard/services/rawjson"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// Code mode (codemode package): RunCode runs a program in a runner
// process, and each tool call the program makes comes back here and is
// made by callTool, exactly as a CallTool of the same principal would be:
// the same admission (the server's filters, Cedar, the rate limits, the
// caller's credentials for the backend) and an audit event whose Via
// names the run. A program therefore reaches no tool its caller could not
// call directly, under any name: call("x") is a CallTool of "x". The run
// itself takes a token like a tools/call of run_code, and records a
// code_run event.

// RunCodeTool is the meta-tool's name: the run's name for the rate
// limits, and the gateway's for the tool.
const RunCodeTool = "run_code"

// errCodeBusy: every runner was busy for the program's whole timeout.
var errCodeBusy = errors.New("code mode is busy on this replica: every runner is running a program; try again")

// codeMode is code mode's configuration in force and its runners.
type codeMode struct {
	bounds          codemode.Bounds
	maxProgramBytes int
	pool            *codemode.Pool
	// offered says whether a server ("" for the whole catalog) offers
	// run_code; a reload replaces it, then closes changed (a new one
	// takes its place), which wakes the catalog watches to tell their
	// callers if their server's offer changed.
	offered   atomic.Pointer[func(server string) bool]
	changedMu sync.Mutex
	changed   chan struct{}
}

// WithCodeMode runs programs with the bounds of c (as WithDefaults
// returns it) in runners started with command (the aggregator's binary
// and codemode.RunnerFlag), where offered says.
func (s *Server) WithCodeMode(c config.CodeMode, command []string, offered func(string) bool) *Server {
	s.code = &codeMode{
		bounds: codemode.Bounds{MaxSteps: c.MaxSteps, Timeout: time.Duration(c.Timeout), MaxMemory: c.MaxMemory,
			MaxCalls: c.MaxCalls, MaxOutputBytes: c.MaxOutputBytes},
		maxProgramBytes: c.MaxProgramBytes,
		pool:            codemode.NewPool(command, c.MaxConcurrent),
		changed:         make(chan struct{}),
	}
	s.code.offered.Store(&offered)
	return s
}

// SetCodeModeOffered puts a reload's aggregator.codeMode.enabled and
// servers[].codeMode in force.
func (s *Server) SetCodeModeOffered(offered func(string) bool) {
	if s.code == nil {
		return
	}
	s.code.offered.Store(&offered)
	s.code.changedMu.Lock()
	close(s.code.changed)
	s.code.changed = make(chan struct{})
	s.code.changedMu.Unlock()
}

// codeModeChanged is closed by the next SetCodeModeOffered; nil (never
// ready) without code mode.
func (s *Server) codeModeChanged() <-chan struct{} {
	if s.code == nil {
		return nil
	}
	s.code.changedMu.Lock()
	defer s.code.changedMu.Unlock()
	return s.code.changed
}

// CloseCodeMode stops the idle runners.
func (s *Server) CloseCodeMode() {
	if s.code != nil {
		s.code.pool.Close()
	}
}

// codeModeIn reports whether server offers run_code.
func (s *Server) codeModeIn(server string) bool {
	return s.code != nil && (*s.code.offered.Load())(server)
}

// RunCode runs a code mode program as the principal.
func (s *Server) RunCode(ctx context.Context, req *aggregatorv1.RunCodeRequest) (*aggregatorv1.RunCodeResponse, error) {
	if caller, _ := svcauth.CallerFrom(ctx); !caller.MayCall(aggregatorv1.AggregatorService_CallTool_FullMethodName) {
		// Each call a program makes is a CallTool of this caller: one
		// its allow list refuses directly is refused here too.
		return nil, s.fail(ctx, "RunCode", errRunNeedsCall)
	}
	resp, err := s.runCode(ctx, req)
	return resp, s.fail(ctx, "RunCode", err)
}

func (s *Server) runCode(ctx context.Context, req *aggregatorv1.RunCodeRequest) (*aggregatorv1.RunCodeResponse, error) {
	start := time.Now()
	run := newRunID()
	var res codemode.Result
	// An unknown server is refused like code mode off there, and both
	// like a program past its bound: in the trail, and taking a token
	// from the principal's limits as every refusal does (refused).
	snap, _, err := s.e.ServerSnapshot(req.GetServer())
	if err == nil {
		err = s.startRun(ctx, req)
	}
	if err != nil {
		err = s.refused(ctx, admission{method: config.RateMethodToolsCall, server: req.GetServer(), kind: catalog.KindTools, key: RunCodeTool}, err)
	}
	if err == nil {
		v := s.e.View(snap, svcauth.PrincipalFrom(ctx))
		named := codemode.Identifiers(req.GetProgram())
		var tools []string
		for i := range v.Len(catalog.KindTools) {
			// A tool of its app alone is no function of the model's.
			if key := v.Key(catalog.KindTools, i); named[key] && modelVisible(snap, key) {
				tools = append(tools, key)
			}
		}
		res, err = s.code.pool.Run(ctx, svcauth.PrincipalFrom(ctx).GetSubject(), req.GetProgram(), tools, s.code.bounds, func(ctx context.Context, tool string, args json.RawMessage) codemode.Answer {
			return s.innerCall(ctx, req, run, tool, args)
		})
		if errors.Is(err, codemode.ErrBusy) {
			err = errCodeBusy
		}
	}
	s.auditRun(ctx, req, run, start, res, err)
	if err != nil {
		return nil, err
	}
	return &aggregatorv1.RunCodeResponse{ResultJson: string(codeResult(res))}, nil
}

// startRun refuses a run the caller may not make: code mode off in its
// server (answered like a missing tool), a program over its bound, or the
// rate limits (a run takes a token like a tools/call of run_code).
func (s *Server) startRun(ctx context.Context, req *aggregatorv1.RunCodeRequest) error {
	if !s.codeModeIn(req.GetServer()) {
		return engine.ErrNotFound
	}
	if len(req.GetProgram()) > s.code.maxProgramBytes {
		return invalidArgument(fmt.Sprintf("the program is %d bytes, more than %d (aggregator.codeMode.maxProgramBytes)", len(req.GetProgram()), s.code.maxProgramBytes))
	}
	if strings.TrimSpace(req.GetProgram()) == "" {
		return invalidArgument("program is required: the text of a Starlark program that sets result")
	}
	return s.limit(ctx, ratelimit.Request{Method: config.RateMethodToolsCall, Server: req.GetServer(), Tool: RunCodeTool})
}

// newRunID names one run in the trail.
func newRunID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// viaKey carries, in an inner call's context, the run that made it.
type viaKey struct{}

// viaOf is the request that the request of ctx was made by, "" for the
// client's own.
func viaOf(ctx context.Context) string {
	v, _ := ctx.Value(viaKey{}).(string)
	return v
}

// innerCall makes one tool call of a program, as its caller.
func (s *Server) innerCall(ctx context.Context, outer *aggregatorv1.RunCodeRequest, run, tool string, args json.RawMessage) codemode.Answer {
	rc := proto.CloneOf(outer.GetContext())
	if rc == nil {
		rc = &aggregatorv1.RequestContext{}
	}
	// A program cannot answer a tool's questions, nor relay its progress:
	// the backend is told the client can do neither.
	rc.ClientCapabilitiesJson, rc.ProgressTokenJson, rc.LogLevel = "", "", ""
	call := &aggregatorv1.CallToolRequest{Principal: outer.GetPrincipal(), Server: outer.GetServer(), Name: tool,
		ArgumentsJson: string(args), Context: rc, ForModel: true}
	resp, err := s.callTool(context.WithValue(ctx, viaKey{}, RunCodeTool+" "+run), call, nil, false)
	if err != nil {
		return s.innerError(ctx, tool, err)
	}
	if resp.GetResultType() == "input_required" {
		return codemode.Answer{Error: tool + " asked for input (input_required), which a program cannot give: call it directly"}
	}
	return toolValue(tool, []byte(resp.GetResultJson()))
}

// innerError is a refused or failed inner call as the program sees it:
// what a direct caller would be told (toStatus: client-safe texts; a rate
// limit's refusal as the gateway tells it, without the limit's name: the
// program's result is the MCP client's), a tool that does not exist, is
// denied or filtered out being not there alike.
func (s *Server) innerError(ctx context.Context, tool string, err error) codemode.Answer {
	var limited *ratelimit.LimitedError
	switch {
	case errors.Is(err, engine.ErrNotFound):
		return codemode.Answer{Error: fmt.Sprintf("no tool named %q is available to you (find tools with find_tool)", tool)}
	case errors.As(err, &limited):
		return codemode.Answer{Error: tool + ": " + ratelimit.ClientMessage(limited.RetryAfterSeconds())}
	}
	return codemode.Answer{Error: fmt.Sprintf("%s failed: %s", tool, status.Convert(toStatus(ctx, s.log, "RunCode", err)).Message())}
}

// toolValue is a tool's result as the program gets it: its structured
// content; else its text, as JSON when it is JSON; a result with isError
// fails the call with its text.
func toolValue(tool string, result []byte) codemode.Answer {
	var r struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
		StructuredContent json.RawMessage `json:"structuredContent"`
		IsError           bool            `json:"isError"`
	}
	if err := json.Unmarshal(result, &r); err != nil {
		return codemode.Answer{Error: tool + " answered a result that is not JSON"}
	}
	var texts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			texts = append(texts, c.Text)
		}
	}
	text := strings.Join(texts, "\n")
	if r.IsError {
		return codemode.Answer{Error: fmt.Sprintf("%s failed: %s", tool, text)}
	}
	if len(r.StructuredContent) > 0 && string(r.StructuredContent) != "null" {
		return codemode.Answer{Value: r.StructuredContent}
	}
	if json.Valid([]byte(text)) && text != "" {
		return codemode.Answer{Value: json.RawMessage(text)}
	}
	return codemode.Answer{Value: rawjson.AppendString(nil, text)}
}

// codeResult is a program's outcome as a tools/call result: its result as
// structured content ({"result": ...}) and text, its printed lines after
// it; or, with isError, why it failed, where, and the bound it reached.
func codeResult(r codemode.Result) []byte {
	type out struct {
		Content           []map[string]string `json:"content"`
		StructuredContent map[string]any      `json:"structuredContent"`
		IsError           bool                `json:"isError,omitempty"`
	}
	o := out{StructuredContent: map[string]any{"calls": r.Calls, "steps": r.Steps}}
	if len(r.Printed) > 0 {
		o.StructuredContent["printed"] = r.Printed
	}
	if r.Error != "" {
		o.IsError = true
		o.StructuredContent["error"] = r.Error
		text := r.Error
		if r.Line > 0 {
			o.StructuredContent["line"] = r.Line
			text = fmt.Sprintf("line %d: %s", r.Line, r.Error)
		}
		if r.Bound != "" {
			o.StructuredContent["bound"] = r.Bound
		}
		o.Content = []map[string]string{{"type": "text", "text": text}}
	} else {
		value := r.Value
		if len(value) == 0 {
			value = json.RawMessage("null")
		}
		o.StructuredContent["result"] = value
		o.Content = []map[string]string{{"type": "text", "text": string(value)}}
	}
	if len(r.Printed) > 0 {
		o.Content = append(o.Content, map[string]string{"type": "text", "text": "printed:\n" + strings.Join(r.Printed, "\n")})
	}
	b, _ := json.Marshal(o)
	return b
}

// auditRun records a run: refused (as its error says), failed (the
// program's error, a tool error outcome), or done; its detail names the
// run, the calls and steps it took, and the bound it reached.
func (s *Server) auditRun(ctx context.Context, req *aggregatorv1.RunCodeRequest, run string, start time.Time, res codemode.Result, err error) {
	if s.audit == nil {
		return
	}
	e := audit.Call(ctx, audit.KindCodeRun, svcauth.PrincipalFrom(ctx), start)
	e.Server, e.Tool, e.RawArguments = req.GetServer(), RunCodeTool, string(rawjson.AppendString(nil, req.GetProgram()))
	e.Outcome, e.Detail = auditOutcome(err)
	if err == nil {
		e.Detail = fmt.Sprintf("run %s: %d calls, %d steps", run, res.Calls, res.Steps)
		if res.Error != "" {
			e.Outcome = audit.OutcomeToolError
			if res.Bound != "" {
				e.Detail += ", reached " + res.Bound
			}
		}
	}
	e.Since(time.Now())
	s.audit.Record(e)
}

// modelVisible reports whether the tool key of snap is one the model may
// see (mcpspec.ModelVisible).
func modelVisible(snap *catalog.Snapshot, key string) bool {
	it, ok := snap.Tool(key)
	return ok && mcpspec.ModelVisible([]byte(it.Msg.GetDefinitionJson()))
}
