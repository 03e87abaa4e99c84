package edge

import (
	"context"
	"errors"
	"strconv"

	"github.com/switchboard-mcp/switchboard/gateway/internal/mcperr"
	"github.com/switchboard-mcp/switchboard/gateway/internal/methods"
	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/ratelimit"
)

// The gateway's part of the rate limits (configuration.md, rateLimits): a
// request refused before its item is known takes its token from the
// principal's limits, and is refused as rate limited once they are empty,
// wherever it is refused, so that a client filling the trail with
// refusals is held to its limit. The aggregator and the indexer do so for
// the refusals they make; a refusal the gateway makes itself, which only
// its trail records (auditRefusal), takes its token here, from the same
// shared buckets, through the one limiter every service uses
// (ratelimit.Request.Refused: the limits per principal only). A request
// the gateway sends on takes no token here: the service that serves it
// takes its tokens, so an accepted request costs no RPC more.

// rateMethods are the rate limits' names (config.RateMethod*) of the
// trail's kinds of request; a kind not here (a session's start) is
// counted by no limit.
var rateMethods = map[audit.Kind]string{
	audit.KindToolCall:          config.RateMethodToolsCall,
	audit.KindFindTool:          config.RateMethodFindTool,
	audit.KindResourceRead:      config.RateMethodResourceRead,
	audit.KindResourceSubscribe: config.RateMethodResourceSubscribe,
	audit.KindPromptGet:         config.RateMethodPromptsGet,
	audit.KindCompletion:        config.RateMethodCompletion,
	audit.KindTaskGet:           config.RateMethodTasksGet,
	audit.KindTaskUpdate:        config.RateMethodTasksUpdate,
	audit.KindTaskCancel:        config.RateMethodTasksCancel,
	audit.KindTaskList:          config.RateMethodTasksList,
}

// heldToLimit takes the token of refusal, the gateway's own answer to
// req, from the principal's limits when the trail records it as the
// client's fault (invalid, or denied: a refused requestState). It returns
// the rate limit's refusal (HTTP 429 with Retry-After, in both eras) that
// replaces refusal once a bucket is empty, which the trail then records
// as rate_limited, as the aggregator records a request it limits; nil
// while the refusal stands.
func (g *Gateway) heldToLimit(ctx context.Context, req *methods.Request, refusal *wire.Error) *wire.Error {
	if g.limiter == nil || req == nil || refusal == nil || req.Trail.Asked {
		return nil
	}
	if req.Trail.Denied == "" && refusalOutcome(refusal) != audit.OutcomeInvalid {
		// What the gateway cannot do now is not the client's doing, and
		// a limit's refusal has been counted by its limit.
		return nil
	}
	item, recorded := auditedItem(req)
	method, counted := rateMethods[item.kind]
	if !recorded || !counted {
		return nil
	}
	tool := item.tool
	if method != config.RateMethodToolsCall {
		// Only a call names a tool to the limits (the indexer counts a
		// search by none).
		tool = ""
	}
	err := g.limiter.Allow(ctx, ratelimit.Request{Method: method, Subject: req.Principal.GetSubject(), Groups: req.Principal.GetGroups(),
		Server: req.Server, Tool: tool, Refused: true})
	var limited *ratelimit.LimitedError
	if errors.As(err, &limited) {
		return mcperr.RateLimited(strconv.Itoa(limited.RetryAfterSeconds()))
	}
	// Admitted, or not decided (the client went away; the buckets refused
	// the token request as malformed, which the limiter logs): the
	// refusal stands.
	return nil
}
