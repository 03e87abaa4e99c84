package edge

import (
	"context"
	"net/http"
	"time"

	"github.com/switchboard-mcp/switchboard/gateway/internal/session"
	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	"github.com/switchboard-mcp/switchboard/services/audit"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// The gateway's part of the audit trail: Legacy sessions, which only the
// gateway sees start (initialize) and end (DELETE). A session that
// expires ends without a request, on no replica in particular (its id is
// sealed, and simply stops opening): no event marks it. Calls, reads and
// prompts are recorded by the aggregator, find_tool by the indexer.

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
	case rerr != nil && (rerr.Code == wire.CodeInvalidParams || rerr.Code == wire.CodeInvalidRequest || rerr.Code == wire.CodeUnsupportedVer):
		e.Outcome, e.Detail = audit.OutcomeInvalid, rerr.Message
	case rerr != nil:
		e.Outcome, e.Detail = audit.OutcomeError, rerr.Message
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
