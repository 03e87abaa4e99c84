package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/engine"
	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/callerid"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
	"github.com/switchboard-mcp/switchboard/services/ratelimit"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// Admission is declared here once. Every request the aggregator sends to a
// backend on a caller's behalf (tools/call on every route, the retry of a
// held call, resources/read, resources/subscribe, prompts/get and
// completion/complete) is an admission that passes, in this order:
//
//  1. find: the item in the caller's server (its catalog snapshot); a
//     call on a model's word finds no tool its app alone may call;
//  2. filter: the server's filters on the concrete item asked for (the URI
//     read, not only the listing a template came from);
//  3. authorize: Cedar, then the owning backend's health (denied is
//     engine.ErrDenied, answered exactly like missing; a request to a
//     backend that is down is refused after step 5 counted it);
//  4. prepare: the method's own checks of the request against the item
//     (arguments, headers);
//  5. limit: the rate limits (ratelimit.go). A request refused by steps
//     1–4 takes its token from the limits per principal only (refused);
//  6. credentials: the caller's credentials for that backend, made only
//     from a token that belongs to the principal asserted with it
//     (callerid.Bound);
//
// then the method runs, and 7. audit records one event of the outcome,
// whatever it was (audit.go). A handler names what it asks for and what it
// does with the admitted item; it never calls a step itself.
// TestEveryRPCIsAdmitted (admission_test.go) places every RPC of the
// service: admitted here, or reaching no backend; a new RPC fails it until
// it is placed.

// admission is one request to a backend on a caller's behalf.
type admission struct {
	// method is the rate limits' name of the request
	// (config.RateMethod*).
	method string
	// trail is the audit event's kind.
	trail  audit.Kind
	server string
	kind   catalog.Kind
	// key is the advertised name of a tool or prompt, the URI of a
	// resource, or the URI template of a template.
	key string
	// subjectToken is the caller's own token, for backends that act with
	// the caller's credentials.
	subjectToken string
	// args are the client's arguments as it sent them, for the trail.
	args string
	// refusal, if set, refuses the request before any step: it is wrong
	// on its own terms (malformed), or names a task that is not the
	// caller's, whatever else it names.
	refusal error
	// prepare, if set, checks the request against the found item.
	prepare func(*admitted) error
	// shared marks a request made on the backend's shared session for
	// every caller alike (a subscription, reference counted across
	// watchers): it carries no caller's credentials.
	shared bool
	// accounted marks a request whose tokens were taken, and whose event
	// is recorded, elsewhere: a held call's retry that a peer forwarded
	// here (the replica that received it does both), a subscription
	// renewed on a watch that replaces the one it was first made on, or
	// a polled read of a task (GetTaskRequest.polled).
	// Every other step is taken again.
	accounted bool
	// ending marks the end of a call held for input that will not come
	// (release_held): it takes no rate-limit token, since refusing it
	// would only keep the call held.
	ending bool
	// forModel marks a call made on a model's word (call_tool, code
	// mode): a tool of its app alone (mcpspec.ModelVisible) is missing
	// to it, whatever else holds of the tool (denied, its backend down).
	forModel bool
	// taskState marks a request that reads or changes a task's state
	// (tasks/get, tasks/cancel) and sends the backend nothing: a backend
	// that is down does not refuse it, and it carries no credentials.
	taskState bool
}

// admitted is what an admission found: the item and its owner, and once
// it passed, the owner's client and the context that carries the
// caller's credentials for that backend.
type admitted struct {
	ctx  context.Context
	snap *catalog.Snapshot
	// owner is the backend that owns the item in the caller's server,
	// "" for none: a refused request's backend, for the trail.
	owner  string
	b      *backend.Client
	tool   *catalog.Item[*aggregatorv1.Tool]
	prompt *catalog.Item[*aggregatorv1.Prompt]
	// key is what the item was admitted under: a resource the listing
	// holds by the URI it is listed by, any other by its canonical form.
	key string
}

// serve admits r and runs do with what was admitted, then records the
// outcome in the audit trail. It is the only way a handler reaches a
// backend for a caller.
func serve[T any](ctx context.Context, s *Server, r admission, do func(*admitted) (T, error)) (T, error) {
	start := time.Now()
	// a holds what was found even when the admission refused it.
	a, err := s.admit(ctx, r)
	var res T
	if err == nil {
		res, err = do(a)
	}
	if !r.accounted {
		outcome, detail := admissionOutcome(res, err)
		backend := admissionBackend(a, res, err)
		s.auditAdmission(ctx, r, start, backend, outcome, detail)
		s.recordTraffic(r, a, start, backend, outcome)
	}
	return res, err
}

// admit runs the steps of an admission up to the request itself. A
// refused admission still returns what it found (nil when it found
// nothing to look at), for the trail.
func (s *Server) admit(ctx context.Context, r admission) (*admitted, error) {
	if r.refusal == nil && len(r.subjectToken) > callerid.MaxToken {
		// No JWT the gateway takes is longer (its own bound); Bound would
		// refuse it later, after the lookup, as no caller's.
		r.refusal = invalidArgument(fmt.Sprintf("subject_token is over %d KiB", callerid.MaxToken>>10))
	}
	if r.refusal != nil {
		return nil, s.refused(ctx, r, r.refusal)
	}
	a, err := s.route(ctx, r.server, r.kind, r.key)
	if r.forModel && a != nil && a.tool != nil && !mcpspec.ModelVisible([]byte(a.tool.Msg.GetDefinitionJson())) {
		// Found: its app's alone. Missing, as a name never listed is,
		// before its backend's health could tell it apart.
		err = engine.ErrNotFound
	}
	if errors.Is(err, engine.ErrBackendDown) {
		if !r.taskState {
			// Found, kept and allowed: the request is counted as the one
			// it would have been, as one its backend refuses (a 503) is,
			// so that a client cannot send requests to a backend that is
			// down, and fill the trail with them, faster than its limits.
			if lerr := s.limitAdmitted(ctx, r, a); lerr != nil {
				return a, lerr
			}
			return a, err
		}
		err = nil
	}
	if err != nil {
		return a, s.refused(ctx, r, err)
	}
	if r.prepare != nil {
		if err := r.prepare(a); err != nil {
			// Found and allowed: counted under the name the policy knows
			// the tool by, as its calls are, not the server's rename.
			return a, s.refusedAs(ctx, r, a.snap.PolicyName(r.kind, r.toolName()), err)
		}
	}
	if err := s.limitAdmitted(ctx, r, a); err != nil {
		return a, err
	}
	a.ctx = ctx
	if !r.shared && !r.taskState {
		p := svcauth.PrincipalFrom(ctx)
		// A service credential may act for many principals, so the token
		// it presents must be the asserted principal's own: else Cedar,
		// the limits and the trail would see one user while the backend
		// acts as another.
		if a.b.NeedsCaller() && r.subjectToken != "" && !callerid.Bound(r.subjectToken, p, s.GroupsClaim()) {
			return a, backend.ErrCallerCredential
		}
		if a.ctx, err = a.b.WithCaller(ctx, p.GetSubject(), r.subjectToken); err != nil {
			return a, err
		}
	}
	return a, nil
}

// limitAdmitted takes the tokens of r, found in a, from every limit that
// matches it (step 5).
func (s *Server) limitAdmitted(ctx context.Context, r admission, a *admitted) error {
	if r.accounted || r.ending || s.limiter == nil || operatorRead(ctx, r) {
		return nil
	}
	// A tool is counted by the name the policy knows it by, so a server's
	// rename does not give it a bucket of its own.
	tool := a.snap.PolicyName(r.kind, r.toolName())
	return s.limit(ctx, ratelimit.Request{Method: r.method, Server: r.server, Tool: tool, Backend: a.owner})
}

// refused is err, the refusal of r before its item was known, after it
// took its token from the limits per principal (ratelimit.Request.Refused):
// refusals cost the aggregator a lookup and the trail an event, so a
// client sending names that do not exist is limited like one calling
// tools that do. When the limit is reached the refusal is the limit's.
// An operator's read takes no token of the principal it reads for, found
// or not (operatorRead).
func (s *Server) refused(ctx context.Context, r admission, err error) error {
	// Not found or denied, a tool is counted by the name the client gave:
	// its name at /mcp would tell a denied rename from a missing name.
	return s.refusedAs(ctx, r, r.toolName(), err)
}

// refusedAs is refused, the request counted as a call of tool.
func (s *Server) refusedAs(ctx context.Context, r admission, tool string, err error) error {
	if r.accounted || !refusal(err) || operatorRead(ctx, r) {
		return err
	}
	if lerr := s.limit(ctx, ratelimit.Request{Method: r.method, Server: r.server, Tool: tool, Refused: true}); lerr != nil {
		return lerr
	}
	return err
}

// refusal reports whether err refuses a request on what the client asked
// (missing, denied, invalid), rather than on the state of a backend.
func refusal(err error) bool {
	outcome, _ := auditOutcome(err)
	return outcome == audit.OutcomeNotFound || outcome == audit.OutcomeDenied || outcome == audit.OutcomeInvalid
}

// toolName is what a rate limit matches as the tool: tools/call names
// one, nothing else does.
func (r admission) toolName() string {
	if r.kind == catalog.KindTools {
		return r.key
	}
	return ""
}

// route finds, filters and authorizes the item of kind k under key in the
// caller's server: the first three steps of an admission, which a watch
// also takes again for each subscription when the catalog changes. Refused,
// it still returns what it found (nil for an unknown server).
func (s *Server) route(ctx context.Context, server string, k catalog.Kind, key string) (*admitted, error) {
	if k == catalog.KindResources {
		// Every spelling of a URI is routed, filtered and authorized as
		// its one canonical form, whatever the method that names it.
		key = catalog.CanonicalURI(key)
	}
	snap, _, err := s.e.ServerSnapshot(server)
	if err != nil {
		return nil, err
	}
	a := &admitted{snap: snap}
	decoded := ""
	switch k {
	case catalog.KindTools:
		a.tool, _ = snap.Tool(key)
		a.owner = a.tool.Owner()
	case catalog.KindPrompts:
		a.prompt, _ = snap.Prompt(key)
		a.owner = a.prompt.Owner()
	case catalog.KindResourceTemplates:
		t, _ := snap.Template(key)
		a.owner = t.Owner()
	case catalog.KindResources:
		a.owner = s.resourceOwner(snap, key)
		if r, ok := snap.Resource(key); ok && r.Backend == a.owner {
			// A resource the listing holds is filtered and authorized
			// under the URI it is listed by, as the listing did, whatever
			// spelling named it: a policy written for the listed URI
			// holds for every spelling of it. The backend is asked for
			// it as it lists it too.
			key = r.Key
		} else {
			// Read through a template, the URI may name another path on
			// a backend that decodes escaped slashes before it resolves
			// dot segments: that path must be kept and allowed too.
			decoded = catalog.DecodedPathURI(key)
		}
	}
	a.key = key
	// The listing applied the server's filters to what it listed; a
	// resource read through a template is a URI the listing never held,
	// so the filter is applied to the concrete key here, for every kind.
	owner := a.owner
	if owner != "" && (!snap.Keeps(k, key) || decoded != "" && !snap.Keeps(k, decoded)) {
		owner = ""
	}
	p := svcauth.PrincipalFrom(ctx)
	a.b, err = s.e.Owner(snap, p, k, key, owner)
	if err != nil && !errors.Is(err, engine.ErrBackendDown) || decoded == "" {
		return a, err
	}
	// Read through a template: the decoded path, and every template of
	// the owner that may serve the read, are authorized too, whatever the
	// backend's health (a URI denied is missing, never "unavailable"): a
	// policy that forbids a template forbids what is read through it, as
	// a server filter that leaves the template out does.
	type item struct {
		k   catalog.Kind
		key string
	}
	var also []item
	if decoded != key {
		also = append(also, item{k, decoded})
	}
	for _, t := range snap.TemplatesServing(key, owner) {
		also = append(also, item{catalog.KindResourceTemplates, t})
	}
	for _, it := range also {
		if _, derr := s.e.Owner(snap, p, it.k, it.key, owner); derr != nil && !errors.Is(derr, engine.ErrBackendDown) {
			a.b = nil
			return a, derr
		}
	}
	return a, err
}

// resourceOwner routes a URI as a read does (catalog.Snapshot.ResourceOwner):
// "" for none. A conflict between backends the read meets is reported.
func (s *Server) resourceOwner(snap *catalog.Snapshot, uri string) string {
	owner, found := snap.ResourceOwner(uri)
	if found != nil {
		s.e.ReportConflict(*found)
	}
	return owner
}

// operatorRead reports a read of a task's state or of the task list by
// an operator's credential (the console viewing as a principal): it is
// not the principal's request, so it takes none of the principal's
// tokens. Its audit event still names the credential.
func operatorRead(ctx context.Context, r admission) bool {
	caller, _ := svcauth.CallerFrom(ctx)
	return (r.method == config.RateMethodTasksGet || r.method == config.RateMethodTasksList) && caller.Operator
}
