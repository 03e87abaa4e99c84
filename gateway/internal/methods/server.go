// Package methods serves the MCP methods, one file per family: discover
// and initialize, the lists, tools, resources, prompts and completion, the
// notification streams, the optimizer's meta-tools and the Legacy session
// methods. A handler gets the parsed request and a Responder and returns a
// result or an error; it never sees the HTTP response, so transport rules
// (status codes, SSE framing, headers) stay in the edge.
package methods

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"time"

	"github.com/switchboard-mcp/switchboard/gateway/internal/session"
	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
)

// View selects the tool surface: the aggregated tools, or the optimizer's
// find_tool and call_tool.
type View int

const (
	ViewRaw View = iota
	ViewOptimized
)

// Request is one MCP request, parsed and validated for its era.
type Request struct {
	Era  mcpspec.Era
	View View
	// Server is the virtual server the request was sent to (/mcp/<server>);
	// "" for the whole catalog (/mcp).
	Server    string
	Principal *commonv1.Principal
	// SubjectToken is the caller's validated OIDC bearer token, for the
	// backends that act as the caller (RequestContext.subject_token); ""
	// in other auth modes. A secret: never logged.
	SubjectToken string
	ID           json.RawMessage
	Method       string
	Params       wire.Object
	// Meta is params._meta (nil when absent).
	Meta wire.Object
	// ClientCaps are the client's declared capabilities as it sent them:
	// per request under Modern, from the sealed session under Legacy.
	ClientCaps json.RawMessage
	Version    string
	// Header is the HTTP request's header (Mcp-Param-* under Modern).
	Header http.Header
	// Session is the digest of the Legacy session id and SessionExpiry its
	// end; empty for Modern.
	Session       string
	SessionExpiry time.Time
	// ViewNow, when set, is the view the endpoint serves now, which a
	// reload may change while a notification stream is open (View is the
	// one it opened on), signalling ViewChanged.
	ViewNow     func() View
	ViewChanged <-chan struct{}
	// Reconnected marks a Legacy GET stream the client opens again after
	// losing one (it names the last event id it saw).
	Reconnected bool
	// Trail is what the handler tells the edge for the audit trail.
	Trail Trail
}

// viewNow is the view the request's endpoint serves now (ViewNow, else
// View).
func (r *Request) viewNow() View {
	if r.ViewNow != nil {
		return r.ViewNow()
	}
	return r.View
}

// Trail is what a handler of a method the audit trail records
// (tools/call, resources/read, prompts/get, completion/complete,
// resources/subscribe) tells the edge. The services record such a request
// where they are asked: the aggregator a call, read, prompt get or
// completion (and a subscription when a watch opens it), the indexer a
// find_tool's search. One the gateway refuses without asking them is the
// edge's to record (edge/audit.go).
type Trail struct {
	// Asked is set once the request goes to the aggregator (a find_tool:
	// its search to the indexer), whose event it then is, whatever the
	// outcome.
	Asked bool
	// Tool is the tool a call_tool names, once read: the trail names the
	// tool called, as the aggregator's event of the call would.
	Tool string
	// Denied says why a retry's requestState was refused (not this
	// request's, or used before): the client is told invalid params, the
	// trail says denied.
	Denied string
	// Refused is the refusal behind an error result the optimizer's
	// meta-tools answer themselves (a tool result with isError, for the
	// model to read, and no error).
	Refused *wire.Error
}

// Responder carries what a method sends before its result: notifications
// and input requests on the request's response stream. The first call
// turns the response into an SSE stream; the result then goes on it too.
type Responder interface {
	// Send writes one JSON-RPC message (a notification or a
	// server-to-client request) and flushes it.
	Send(msg []byte) error
	// Comment writes an SSE comment (a keep-alive) and flushes it.
	Comment(text string) error
	// Prime writes a Legacy GET stream's priming event, id and no data,
	// asking the client to wait retry before it reconnects if positive.
	Prime(id string, retry time.Duration) error
}

// Config are the settings of the methods, defaults applied.
type Config struct {
	ServerInfo json.RawMessage
	// Instructions are the gateway's own, used when the aggregator has
	// none.
	Instructions string
	CacheTTL     time.Duration
	// RequestTimeout bounds each call to the services.
	RequestTimeout time.Duration
	// ClientInput bounds a Legacy request's wait for its client's answers
	// to input requests.
	ClientInput time.Duration
	// KeepAlive is the interval of SSE comments on streams that wait.
	KeepAlive   time.Duration
	SearchLimit uint32
	// StreamsPerPrincipal and MaxStreams bound the open listen and GET
	// streams (see streamLimits).
	StreamsPerPrincipal, MaxStreams int
	// MaxURIBytes bounds each resource URI a listen subscribes to, and
	// MaxSubscriptions their number (at most session.MaxSubscriptions).
	MaxURIBytes, MaxSubscriptions int
}

// Server serves the methods by calling the aggregator and the indexer.
type Server struct {
	cfg     Config
	agg     aggregatorv1.AggregatorServiceClient
	idx     indexerv1.IndexerServiceClient // nil: find_tool unavailable
	sealer  *session.Sealer
	uses    *session.StateUses
	local   *session.Local
	shared  *session.Shared
	revoked func(digest string) bool
	log     *slog.Logger
	streams func(kind string) (done func())
	limits  *streamLimits
	closing <-chan struct{}
}

// Deps are the Server's collaborators.
type Deps struct {
	Aggregator aggregatorv1.AggregatorServiceClient
	Indexer    indexerv1.IndexerServiceClient
	Sealer     *session.Sealer
	// StateUses makes each sealed request state good for one retry.
	StateUses *session.StateUses
	Local     *session.Local
	// Shared changes the Legacy sessions' state on every replica; it
	// holds it in Local.
	Shared *session.Shared
	// Revoked reports whether a Legacy session (by id digest) was deleted;
	// an open GET stream of a deleted session ends. Nil: none is.
	Revoked func(digest string) bool
	Log     *slog.Logger
	// Streams counts an open notification stream of kind until done.
	Streams func(kind string) (done func())
	// Closing is closed at shutdown and ends every notification stream.
	Closing <-chan struct{}
}

// New returns a Server.
func New(cfg Config, d Deps) *Server {
	if d.Streams == nil {
		d.Streams = func(string) func() { return func() {} }
	}
	if d.Revoked == nil {
		d.Revoked = func(string) bool { return false }
	}
	return &Server{cfg: cfg, agg: d.Aggregator, idx: d.Indexer, sealer: d.Sealer, uses: d.StateUses, local: d.Local, shared: d.Shared, revoked: d.Revoked, log: d.Log,
		streams: d.Streams, limits: newStreamLimits(cfg.StreamsPerPrincipal, cfg.MaxStreams), closing: d.Closing}
}

type handler func(s *Server, ctx context.Context, req *Request, resp Responder) (json.RawMessage, *wire.Error)

// handlers serve every method of mcpspec.Methods but initialize (which
// mints the session, see Initialize); which era may call which is decided
// by mcpspec before a handler runs.
var handlers = map[string]handler{
	"server/discover":          (*Server).discover,
	"subscriptions/listen":     (*Server).listen,
	"ping":                     (*Server).ping,
	"logging/setLevel":         (*Server).setLogLevel,
	"resources/subscribe":      (*Server).subscribe,
	"resources/unsubscribe":    (*Server).unsubscribe,
	"tools/list":               (*Server).listTools,
	"tools/call":               (*Server).callTool,
	"resources/list":           listOf(resourcesList),
	"resources/templates/list": listOf(templatesList),
	"resources/read":           (*Server).readResource,
	"prompts/list":             listOf(promptsList),
	"prompts/get":              (*Server).getPrompt,
	"completion/complete":      (*Server).complete,
	"tasks/get":                (*Server).getTask,
	"tasks/update":             (*Server).updateTask,
	"tasks/cancel":             (*Server).cancelTask,
	"tasks/list":               (*Server).listTasks,
	"tasks/result":             (*Server).taskResult,
}

// Serve runs the handler of req.Method, which the caller checked the era
// defines. A handler returns (nil, nil) only for a stream that ended
// without a final response.
func (s *Server) Serve(ctx context.Context, req *Request, resp Responder) (json.RawMessage, *wire.Error) {
	h, ok := handlers[req.Method]
	if !ok || !mcpspec.Defined(req.Era, req.Method) {
		return nil, wire.MethodNotFound(req.Method)
	}
	if !mcpspec.Methods[req.Method].Streams && !asksClient[req.Method] {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.cfg.RequestTimeout)
		defer cancel()
	}
	result, rerr := h(s, ctx, req, resp)
	if rerr != nil && ctx.Err() != nil && req.Session != "" && s.revoked(req.Session) {
		// Its session's deletion ended it (session.Local.EndSession).
		rerr = sessionDeleted()
	}
	return result, rerr
}

// sessionDeleted answers a Legacy request whose session was deleted while
// it ran.
func sessionDeleted() *wire.Error {
	return wire.NewError(wire.CodeInternalError, "request cancelled: its session was deleted")
}

// asksClient are the methods whose handlers may wait for a Legacy client's
// answers to input requests (roundTrips), or for a task to end
// (tasks/result), which the request timeout must not cut while the client
// is there; they bound each of their calls to the services themselves
// (serviceCall).
var asksClient = map[string]bool{"tools/call": true, "resources/read": true, "prompts/get": true, "tasks/result": true}

// serviceCall bounds one call to the services by the request timeout.
func (s *Server) serviceCall(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.cfg.RequestTimeout)
}

// shape adds what the era requires to a result (see wire.Shape).
func (s *Server) shape(req *Request, result []byte, cacheable bool) (json.RawMessage, *wire.Error) {
	out, err := wire.Shape(result, s.shaping(req, cacheable))
	if err != nil {
		return nil, wire.NewError(wire.CodeInternalError, "internal error: malformed result from the server")
	}
	return out, nil
}

func (s *Server) shaping(req *Request, cacheable bool) wire.Shaping {
	return wire.Shaping{Era: req.Era, ServerInfo: s.cfg.ServerInfo, Cacheable: cacheable, TTLms: s.cfg.CacheTTL.Milliseconds()}
}

func (s *Server) ping(context.Context, *Request, Responder) (json.RawMessage, *wire.Error) {
	return json.RawMessage(`{}`), nil
}
