// Package audit is the audit trail every Switchboard service writes: one
// Event type (the schema, documented field by field in docs/operations.md,
// "Audit trail"), and a Writer that takes events on the request path
// without waiting (a bounded queue per process) and writes them in batches
// from the background to the configured sinks: JSON lines on standard
// output or a file, and the indexer's PostgreSQL table.
//
// Each event is written where its fact is known: calls, reads, prompts,
// denials and quarantines in the aggregator, find_tool in the indexer,
// sessions and the requests it refuses before asking either in the
// gateway, configuration reloads in every service.
package audit

import (
	"context"
	"encoding/json"
	"time"

	"go.opentelemetry.io/otel/trace"

	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// Schema names the shape of an event; it is in every JSON line, so a log
// pipeline can tell the trail from the services' logs.
const Schema = "switchboard.audit.v1"

// Kind is what happened.
type Kind string

// The kinds of events.
const (
	KindToolCall     Kind = "tool_call"
	KindResourceRead Kind = "resource_read"
	KindPromptGet    Kind = "prompt_get"
	// KindResourceSubscribe is a subscription to a resource's updates
	// (resources/subscribe: its Resource is the URI).
	KindResourceSubscribe Kind = "resource_subscribe"
	// KindCompletion is a completion/complete: its Prompt or Resource is
	// the reference completed.
	KindCompletion   Kind = "completion"
	KindFindTool     Kind = "find_tool"
	KindSessionStart Kind = "session_start"
	KindSessionEnd   Kind = "session_end"
	KindQuarantine   Kind = "quarantine"
	KindConfigReload Kind = "config_reload"
	// The requests about a task a tools/call created (tasks/get,
	// tasks/update, tasks/cancel): their Tool is the task's tool.
	KindTaskGet    Kind = "task_get"
	KindTaskUpdate Kind = "task_update"
	KindTaskCancel Kind = "task_cancel"
	// KindTaskList is a listing of the principal's tasks (tasks/list).
	KindTaskList Kind = "task_list"
	// KindTaskEnd is the end of a task Switchboard runs: the outcome of
	// the call it ran (its tool_call event was written when it was made).
	KindTaskEnd Kind = "task_end"
	// KindCodeRun is a code mode program's run (run_code): its Detail
	// names the run, which the events of the tool calls it made name in
	// their Via.
	KindCodeRun Kind = "code_run"
)

// Outcome is how it ended.
type Outcome string

// The outcomes.
const (
	// OutcomeOK: done (a call whose result is not an error result; a
	// reload in force; a session opened or ended).
	OutcomeOK Outcome = "ok"
	// OutcomeToolError: the tool answered with an error result (isError).
	OutcomeToolError Outcome = "tool_error"
	// OutcomeDenied: the policy refused it. The client was answered as if
	// the item did not exist (not found); only the trail says denied.
	OutcomeDenied Outcome = "denied"
	// OutcomeNotFound: no such tool, resource or prompt.
	OutcomeNotFound Outcome = "not_found"
	// OutcomeInvalid: the request was malformed (bad arguments, a hidden
	// argument set, a header mismatch, a bad cursor).
	OutcomeInvalid Outcome = "invalid"
	// OutcomeRateLimited: a rate limit refused it.
	OutcomeRateLimited Outcome = "rate_limited"
	// OutcomeBackendError: the backend was down, unreachable, broke the
	// protocol or answered a JSON-RPC error.
	OutcomeBackendError Outcome = "backend_error"
	// OutcomeTimeout: the backend, or the tool's configured timeout, ran
	// out.
	OutcomeTimeout Outcome = "timeout"
	// OutcomeCancelled: the caller went away first.
	OutcomeCancelled Outcome = "cancelled"
	// OutcomeRejected: a configuration reload was refused (the
	// configuration in force was kept).
	OutcomeRejected Outcome = "rejected"
	// OutcomeQuarantined: a tool was withheld (pinning mode pin), or
	// flagged (mode warn: OutcomeChanged).
	OutcomeQuarantined Outcome = "quarantined"
	// OutcomeChanged: a pinned tool's definition changed and mode warn
	// kept listing it.
	OutcomeChanged Outcome = "changed"
	// OutcomeError: anything else (an internal error).
	OutcomeError Outcome = "error"
)

// Event is one entry of the trail. Every field but Schema, Time, Service,
// Kind and Outcome is empty when it does not apply; encoded, empty fields
// are left out.
type Event struct {
	Schema string    `json:"schema"`
	Time   time.Time `json:"time"`
	// Service is the process kind that wrote it: gateway, aggregator or
	// indexer.
	Service string  `json:"service"`
	Kind    Kind    `json:"kind"`
	Outcome Outcome `json:"outcome"`
	// Subject and Groups are the principal the request acted for.
	Subject string   `json:"subject,omitempty"`
	Groups  []string `json:"groups,omitempty"`
	// Caller names the service credential that made the request
	// (serviceAuth.credentials[].name) when it is not an edge's: an
	// operator's, such as the console searching as a principal, or a
	// service calling as its own bound identity. Empty for the end user's
	// own requests (through the gateway) and for events no request made.
	Caller string `json:"caller,omitempty"`
	// Server is the virtual server ("" for the whole catalog).
	Server string `json:"server,omitempty"`
	// Tool, Resource and Prompt name the item as the client named it
	// (advertised name, URI).
	Tool     string `json:"tool,omitempty"`
	Resource string `json:"resource,omitempty"`
	Prompt   string `json:"prompt,omitempty"`
	// Backend owns the item (known to the aggregator).
	Backend string `json:"backend,omitempty"`
	// LatencyMS is how long it took in the service that wrote it, in
	// milliseconds.
	LatencyMS float64 `json:"latency_ms,omitempty"`
	// TraceID is the OpenTelemetry trace id of the request (32 hex
	// digits), which links the event to its spans and logs.
	TraceID string `json:"trace_id,omitempty"`
	// Session is the SHA-256 of a Legacy session id (hex), never the id
	// itself, which is a bearer credential.
	Session string `json:"session,omitempty"`
	// ArgumentsSHA256 is the SHA-256 (hex) of the canonical JSON of the
	// arguments as the client sent them (a find_tool's: its query).
	ArgumentsSHA256 string `json:"arguments_sha256,omitempty"`
	// Arguments are the client's arguments, redacted, with
	// audit.arguments: values only.
	Arguments json.RawMessage `json:"arguments,omitempty"`
	// Detail says more in a few words: why a reload was rejected, what
	// changed in a quarantined tool, which error class failed a call.
	Detail string `json:"detail,omitempty"`
	// Via is the request this one was made by, when it is not the
	// client's own: "run_code <run id>" for a code mode program's call.
	Via string `json:"via,omitempty"`

	// RawArguments are the client's arguments as received; the writer
	// digests (and with values, redacts) them off the request path. Never
	// encoded.
	RawArguments string `json:"-"`
	// queuedSize is what the writer counted of it against MaxQueueBytes.
	queuedSize int64
}

// Call starts an event of the request in ctx for principal p: its time,
// trace id, principal, and the credential that made the request when it
// is not an edge's (svcauth.Caller.IsEdge; a request that came over no
// authenticated gRPC call, the gateway's own, names none).
func Call(ctx context.Context, kind Kind, p *commonv1.Principal, start time.Time) Event {
	e := Event{Time: start, Kind: kind, Subject: p.GetSubject(), Groups: p.GetGroups()}
	if c, ok := svcauth.CallerFrom(ctx); ok && !c.IsEdge() {
		e.Caller = c.Name
	}
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		e.TraceID = sc.TraceID().String()
	}
	return e
}

// Since sets the latency as the time since e.Time.
func (e *Event) Since(now time.Time) {
	e.LatencyMS = float64(now.Sub(e.Time).Microseconds()) / 1000
}
