package edge

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/switchboard-mcp/switchboard/gateway/internal/auth"
	"github.com/switchboard-mcp/switchboard/gateway/internal/methods"
	"github.com/switchboard-mcp/switchboard/gateway/internal/session"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// credentialStreams holds the notification streams open on this replica
// (a Legacy session's GET stream, a Modern subscriptions/listen) with the
// credential that opened each. A request answered at once is
// authenticated when it comes; a stream would otherwise outlive its
// credential by as long as it stays open. So a stream ends when a reload
// of gateway.auth or of the servers no longer authenticates its
// credential as the same principal at its endpoint (a key removed, an
// issuer changed, its server's audience changed or the server removed),
// and one an OIDC token opened ends at the token's expiry.
type credentialStreams struct {
	mu   sync.Mutex
	open map[*credentialStream]struct{}
}

// streamCredential is how a request was authenticated, for the stream it
// may open: its endpoint, and the authentication and servers in force
// then.
type streamCredential struct {
	at      endpointAt
	state   *authState
	servers *serverTable
}

// credentialStream is one open stream: the request that opened it (its
// headers carry the credential, its path the endpoint whose audience it
// authenticates for, looked up in the servers in force at each check),
// its principal, and how to end it.
type credentialStream struct {
	r         *http.Request
	at        endpointAt
	principal string
	end       context.CancelCauseFunc
	// lists: a stream of list_changed, whose tools are those of the view
	// its endpoint serves: view is that view now, which a reload of its
	// server's optimizer setting changes, signalling viewChanged.
	lists       bool
	view        atomic.Int32
	viewChanged chan struct{}
}

// viewNow is the view s's endpoint serves now (methods.Request.ViewNow).
func (s *credentialStream) viewNow() methods.View { return methods.View(s.view.Load()) }

var (
	errCredentialRevoked = errors.New("the credential that opened this stream no longer authenticates")
	errCredentialExpired = errors.New("the token that opened this stream expired")
)

// holdStream keeps r's stream, which authenticated as p under cred, until
// release: ctx ends when the credential stops authenticating. A stream of
// list_changed (lists) gets req's ViewNow and ViewChanged: a reload may
// change the view its endpoint serves (ep.view when it opened), and with
// it the tools. A reload of gateway.auth or of the servers between the
// request's authentication and now, which the reload's recheck did not
// see the stream for, is caught up with here.
func (g *Gateway) holdStream(ctx context.Context, r *http.Request, p *commonv1.Principal, cred streamCredential, ep endpoint, lists bool, req *methods.Request) (context.Context, func()) {
	ctx, held, release := g.credStreams.hold(ctx, r, cred.at, p, cred.state.cfg.Mode == "oidc", lists, ep.view)
	if lists {
		req.ViewNow, req.ViewChanged = held.viewNow, held.viewChanged
	}
	if now, servers := g.auth.Load(), g.servers.Load(); now != cred.state || servers != cred.servers {
		held.recheck(now.authn, servers)
	}
	return ctx, release
}

// hold keeps r's stream, authenticated as p at endpoint at, until release,
// and returns it; ctx ends when the credential stops authenticating, or expires (oidc:
// the token's exp, and the leeway its check allows).
func (c *credentialStreams) hold(ctx context.Context, r *http.Request, at endpointAt, p *commonv1.Principal, oidc, lists bool, view methods.View) (context.Context, *credentialStream, func()) {
	ctx, end := context.WithCancelCause(ctx)
	stopExpiry := func() bool { return false }
	if exp, ok := auth.TokenExpiry(r); ok && oidc {
		stopExpiry = time.AfterFunc(time.Until(exp), func() { end(errCredentialExpired) }).Stop
	}
	s := &credentialStream{r: r, at: at, principal: session.PrincipalDigest(p), end: end, lists: lists, viewChanged: make(chan struct{}, 1)}
	s.view.Store(int32(view))
	c.mu.Lock()
	if c.open == nil {
		c.open = map[*credentialStream]struct{}{}
	}
	c.open[s] = struct{}{}
	c.mu.Unlock()
	return ctx, s, func() {
		stopExpiry()
		c.mu.Lock()
		delete(c.open, s)
		c.mu.Unlock()
		end(nil)
	}
}

// recheck ends every open stream whose credential a no longer
// authenticates as the principal that opened it at its endpoint, as
// servers has it.
func (c *credentialStreams) recheck(a auth.Authenticator, servers *serverTable) {
	c.mu.Lock()
	open := make([]*credentialStream, 0, len(c.open))
	for s := range c.open {
		open = append(open, s)
	}
	c.mu.Unlock()
	for _, s := range open {
		s.recheck(a, servers)
	}
}

// recheck ends s when a refuses its credential for its endpoint's
// audience in servers, or takes it for another principal, or its server
// is gone. A stream of list_changed whose server's optimizer setting
// changed is told (viewChanged). An issuer whose keys cannot be fetched
// now refuses nothing for good: the stream goes on (it ends at its
// token's expiry anyway).
func (s *credentialStream) recheck(a auth.Authenticator, servers *serverTable) {
	route, ok := servers.routes[s.r.PathValue("server")]
	if s.at.ofServer && !ok {
		// A listen then ends with its final result (methods.listenEnded).
		s.end(fmt.Errorf("%w: %w", errCredentialRevoked, methods.ErrServerRemoved))
		return
	}
	if s.lists && s.at.ofServer && s.at.variant == variantMain {
		view := methods.ViewRaw
		if route.optimizer {
			view = methods.ViewOptimized
		}
		if methods.View(s.view.Swap(int32(view))) != view {
			select {
			case s.viewChanged <- struct{}{}:
			default:
			}
		}
	}
	p, err := a.Authenticate(s.r, servers.audience(s.r, s.at))
	if errors.Is(err, auth.ErrKeysUnavailable) {
		return
	}
	if err != nil || session.PrincipalDigest(p) != s.principal {
		s.end(errCredentialRevoked)
	}
}
