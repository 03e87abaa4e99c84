package methods

import (
	"context"
	"encoding/json"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/gateway/internal/mcperr"
	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/rawjson"
)

// Code mode: where the aggregator offers it (Discover's code_mode), the
// optimizer view has a third meta-tool, run_code, whose program the
// aggregator runs as the caller (RunCode): each tool call it makes is
// admitted there like a direct one.
const RunCodeName = "run_code"

// runCodeTool is run_code's definition. Its description is what a model
// knows of the language and the functions: short, with an example.
var runCodeTool = json.RawMessage(`{"name":"run_code","title":"Run a program over your tools",` +
	`"description":` + string(rawjson.AppendString(nil, `Run a short Starlark program (a small dialect of Python: no imports, classes, exceptions or recursion) that calls your tools and returns only what you need, in one step instead of one call per tool.
Every tool you may call is a function of the same name that takes its arguments by name and returns its structured result (usually a dict): weather_forecast(city="Oslo"). Find tools and their arguments with find_tool. call("tool-name", arg=value) calls a tool whose name is not an identifier. try_call(f, arg=value) returns (value, None), or (None, the error message) when the call fails. sum(), json.encode and json.decode are available.
Set the variable result to what you want back (anything JSON can hold); lines you print() come back too. Steps, time, memory, tool calls and the result's size are bounded: an error names the bound, and the line.
Example, the warmest of three cities:
best = None
for city in ["Oslo", "Lisbon", "Rome"]:
    f = weather_forecast(city=city)
    if best == None or f["highC"] > best["highC"]:
        best = f
result = {"city": best["city"], "highC": best["highC"]}`)) +
	`,"inputSchema":{"type":"object","properties":{"program":{"type":"string","description":"The Starlark program. Set result to the answer."}},"required":["program"]},` +
	`"annotations":{"openWorldHint":true}}`)

// offersCode reports whether the principal's view offers run_code.
func (s *Server) offersCode(ctx context.Context, req *Request) (bool, *wire.Error) {
	ctx, cancel := s.serviceCall(ctx)
	defer cancel()
	d, err := s.agg.Discover(ctx, &aggregatorv1.DiscoverRequest{Principal: req.Principal, Server: req.Server})
	if err != nil {
		return false, mcperr.FromError(ctx, s.log, err, req.Era, req.Method)
	}
	return d.GetCodeMode(), nil
}

// runCode is run_code: the aggregator runs the program as the caller.
func (s *Server) runCode(ctx context.Context, req *Request, args wire.Object) (json.RawMessage, *wire.Error) {
	// A missing program is the aggregator's to refuse, after it knows
	// whether the view offers run_code at all: refused here first, it
	// told a view without code mode that the tool was there.
	program, _ := args.String("program")
	rc, rerr := s.requestContext(req)
	if rerr != nil {
		return nil, rerr
	}
	ctx, cancel := s.serviceCall(ctx)
	defer cancel()
	// The aggregator records the run, whatever its outcome.
	req.Trail.Asked = true
	resp, err := s.agg.RunCode(ctx, &aggregatorv1.RunCodeRequest{Principal: req.Principal, Server: req.Server, Program: program, Context: rc})
	if err != nil {
		if status.Code(err) == codes.NotFound {
			// Code mode off here: answered as a tool that does not exist
			// is. (A program the aggregator refuses, too long or empty,
			// is an invalid argument: a failed call saying why, below.)
			return nil, mcperr.FromError(ctx, s.log, err, req.Era, req.Method)
		}
		rerr := mcperr.FromError(ctx, s.log, err, req.Era, req.Method)
		if rerr.Code == wire.CodeRateLimited {
			return nil, rerr
		}
		return s.toolError(req, "run_code: "+rerr.Message)
	}
	return s.shape(req, []byte(resp.GetResultJson()), false)
}
