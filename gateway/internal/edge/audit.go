package edge

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/switchboard-mcp/switchboard/gateway/internal/methods"
	"github.com/switchboard-mcp/switchboard/gateway/internal/session"
	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	"github.com/switchboard-mcp/switchboard/services/audit"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// The gateway's part of the audit trail: Legacy sessions, which only the
// gateway sees start (initialize) and end (DELETE), and the requests of
// the trail's that it refuses itself, which never reach the service that
// records the others. A session that expires ends without a request, on
// no replica in particular (its id is sealed, and simply stops opening):
// no event marks it. Calls, reads, prompt gets, completions and
// subscriptions that reach the aggregator are recorded by the aggregator,
// find_tool searches by the indexer.

// auditSession records a session's start or end for principal at server.
// id is the session id, recorded as its digest only: the id itself is a
// bearer credential.
func (g *Gateway) auditSession(ctx context.Context, kind audit.Kind, start time.Time, p *commonv1.Principal, server, id string, rerr *wire.Error, status int) {
	if g.audit == nil {
		return
	}
	e := audit.Call(ctx, kind, p, start)
	e.Server = server
	if id != "" {
		e.Session = session.IDDigest(id)
	}
	switch {
	case rerr != nil:
		e.Outcome, e.Detail = refusalOutcome(rerr), rerr.Message
	case status == http.StatusNotFound:
		e.Outcome = audit.OutcomeNotFound
	case status == http.StatusTooManyRequests || status == http.StatusServiceUnavailable:
		e.Outcome, e.Detail = audit.OutcomeRejected, "deletion refused: the session stays open until it expires"
	default:
		e.Outcome = audit.OutcomeOK
	}
	e.Since(time.Now())
	g.audit.Record(e)
}

// auditRefusal records a request of the trail's (tools/call, and the
// optimizer's call_tool and find_tool; resources/read; prompts/get;
// completion/complete; resources/subscribe) that the gateway refused
// without asking the aggregator, or for find_tool the indexer: a refusal
// of its own, wherever on the request's path it was made (the edge's
// checks of the message, its headers and its session, or the method's of
// its params, its requestState or its session's bounds). It is the one
// place such a refusal is recorded: servePOST calls it as every request
// ends. A request the gateway sent on is that service's event
// (methods.Trail.Asked), so none is recorded twice; a request that fails
// authentication is no principal's and never gets this far.
//
// The event names what the client named; the writer cuts it to the
// trail's bounds before it is queued (audit.Writer.Record), so a client's
// megabyte of tool name reaches no sink, and no queued event holds it.
func (g *Gateway) auditRefusal(ctx context.Context, rec *requestRecord) {
	req := rec.req
	if g.audit == nil || req == nil || req.Trail.Asked {
		return
	}
	item, ok := auditedItem(req)
	if !ok {
		return
	}
	refusal := rec.err
	if refusal == nil {
		refusal = req.Trail.Refused
	}
	if refusal == nil && rec.outcome != "cancelled" {
		// Answered without an error and without asking: a subscription
		// the session keeps (the aggregator records it when a watch
		// opens it). Nothing was refused.
		return
	}
	e := audit.Call(ctx, item.kind, req.Principal, rec.start)
	e.Server, e.Session = req.Server, req.Session
	e.Tool, e.Resource, e.Prompt = item.tool, item.resource, item.prompt
	switch {
	case rec.outcome == "cancelled":
		e.Outcome, e.Detail = audit.OutcomeCancelled, "cancelled by the client"
	case req.Trail.Denied != "" && refusal.Code != wire.CodeRateLimited:
		// Past the principal's limit (heldToLimit) the client is told
		// the limit's refusal, and the event says rate_limited.
		e.Outcome, e.Detail = audit.OutcomeDenied, req.Trail.Denied
	default:
		e.Outcome, e.Detail = refusalOutcome(refusal), refusal.Message
	}
	e.Since(time.Now())
	g.audit.Record(e)
}

// auditItem is the kind of event the trail has for a request, and the
// item it names as the client sent it ("" where it sent none that is a
// string), in the field the services' events name it in.
type auditItem struct {
	kind                   audit.Kind
	tool, resource, prompt string
}

// auditedItem is req's auditItem; ok is false for a method the trail does
// not record.
func auditedItem(req *methods.Request) (item auditItem, ok bool) {
	str := func(params wire.Object, member string) string {
		s, _ := params.String(member)
		return s
	}
	switch req.Method {
	case "initialize":
		// One the edge refuses before it is served (its headers); one
		// served is recorded with its session (auditSession).
		item = auditItem{kind: audit.KindSessionStart}
	case "tools/call":
		item = auditItem{kind: audit.KindToolCall, tool: str(req.Params, "name")}
		if req.View == methods.ViewOptimized {
			switch item.tool {
			case methods.FindToolName:
				item.kind = audit.KindFindTool
			case methods.CallToolName:
				if req.Trail.Tool != "" {
					item.tool = req.Trail.Tool
				}
			}
		}
	case "resources/read":
		item = auditItem{kind: audit.KindResourceRead, resource: str(req.Params, "uri")}
	case "resources/subscribe":
		item = auditItem{kind: audit.KindResourceSubscribe, resource: str(req.Params, "uri")}
	case "prompts/get":
		item = auditItem{kind: audit.KindPromptGet, prompt: str(req.Params, "name")}
	case "completion/complete":
		// As the aggregator's event: the prompt or the resource (or
		// template) whose argument is completed.
		item = auditItem{kind: audit.KindCompletion}
		var ref wire.Object
		if json.Unmarshal(req.Params["ref"], &ref) == nil {
			switch str(ref, "type") {
			case "ref/prompt":
				item.prompt = str(ref, "name")
			case "ref/resource":
				item.resource = str(ref, "uri")
			}
		}
	case "tasks/get", "tasks/result":
		// tasks/result reads the task as tasks/get does, until it ends.
		item = auditItem{kind: audit.KindTaskGet}
	case "tasks/update":
		item = auditItem{kind: audit.KindTaskUpdate}
	case "tasks/cancel":
		item = auditItem{kind: audit.KindTaskCancel}
	case "tasks/list":
		item = auditItem{kind: audit.KindTaskList}
	default:
		return auditItem{}, false
	}
	return item, true
}

// refusalOutcome is the trail's outcome of an error the gateway answered
// itself, read from the error's one classification (wire.Error's
// ModernStatus and ClientFault), which its metrics read too: rate_limited
// for a limit's refusal (HTTP 429: the rate limits', a principal's open
// streams), invalid for any other fault of the client's (its JSON-RPC,
// params, headers, protocol version, session or capabilities), and error
// for a failure or a bound of the gateway's own (a requestState it cannot
// check now, a tool search it does not offer, session state it cannot
// hold). A second list of codes here would drift from it: a code added to
// the client's faults would be audited as the gateway's failure.
func refusalOutcome(rerr *wire.Error) audit.Outcome {
	switch {
	case rerr.Code == wire.CodeRateLimited || rerr.ModernStatus() == http.StatusTooManyRequests:
		return audit.OutcomeRateLimited
	case rerr.ClientFault():
		return audit.OutcomeInvalid
	default:
		return audit.OutcomeError
	}
}
