// Package console is the operator console: server-rendered pages on the
// gateway's ops port, under /console/, that show what the gateway is
// doing (backends, the catalog of each virtual server as any principal
// sees it, a search playground with the ranking explained, a principal's
// tasks, live events, rate limits). Operators log in with an operator key or through the
// OpenID provider; the pages read the aggregator and the indexer through
// their documented gRPC APIs with the console's own service credential
// (gateway.console.serviceToken), never the gateway's.
//
// Everything is plain HTML rendered by html/template (every value
// escaped), with one stylesheet and no script; every response carries a
// strict Content-Security-Policy and is never cached.
package console

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

// Deps are the console's connections, all made with the console's own
// credential.
type Deps struct {
	Aggregator aggregatorv1.AggregatorServiceClient
	// Indexer is nil when gateway.indexer is not configured: the pages
	// that need it say so.
	Indexer indexerv1.IndexerServiceClient
	// RateLimits reads the state of the rate-limit buckets; nil, or one
	// that answers Unimplemented, shows the state as not available.
	RateLimits RateLimitState
	// OIDC logs operators in through the OpenID provider; nil when
	// gateway.console.oidc is not configured.
	OIDC *OIDCLogin
	Log  *slog.Logger
}

// callTimeout bounds each RPC a page makes.
const callTimeout = 10 * time.Second

// Console serves the pages.
type Console struct {
	deps Deps
	// sealer is replaced (everyone logs in again) when revoked is full.
	sealer     atomic.Pointer[sealer]
	revoked    *revocations
	sessionTTL time.Duration
	// optimizer is gateway.optimizer as the gateway serves it: as at
	// start, which a reload does not change (it needs a restart).
	optimizer config.Optimizer
	// live is the part of the configuration a reload replaces.
	live atomic.Pointer[liveConfig]
	// oidc is the OIDC login in force (nil: none), Deps.OIDC at first,
	// replaced by SetOIDC.
	oidc atomic.Pointer[oidcInForce]
	// admissions numbers each coming into force of an operator key or an
	// OIDC login. A session opens only under the number its key or login
	// had when it was made, which a reload that keeps the key (or a login
	// that admits the same) keeps, and which is never given again: a key
	// or login that a reload removes and a later one restores comes back
	// under a new number, so the sessions its removal ended stay ended
	// (an operator who removes a key, or turns the console off, to end a
	// cookie's session need not also rotate the key). Only the numbers of
	// what is in force are held, so nothing grows.
	admissions atomic.Uint64
	fails      *failureLimiter
	events     *eventLog
	// catalogChanged wakes the quarantine poll (capacity 1: a change
	// pending is enough).
	catalogChanged chan struct{}
	stopped        context.CancelFunc
	done           chan struct{}
}

// liveConfig is what the pages read from the configuration.
type liveConfig struct {
	operatorKeys [][]byte
	// keyAdmissions are the operator keys' admissions, in their order.
	keyAdmissions []uint64
	servers       []serverView
	// rootOptimizer: /mcp serves the optimizer view
	// (gateway.optimizer.enabled).
	rootOptimizer bool
	// searchLimit is find_tool's number of hits (gateway.optimizer.limit).
	searchLimit int
	rateLimits  config.RateLimits
}

// New builds the console from the whole configuration (gateway.console
// enabled and validated) and starts its event watchers, which run until
// Close.
func New(cfg *config.Config, deps Deps) (*Console, error) {
	if deps.Aggregator == nil {
		return nil, errors.New("console: no aggregator connection")
	}
	if deps.Log == nil {
		deps.Log = slog.Default()
	}
	s, err := newSealer()
	if err != nil {
		return nil, err
	}
	c := &Console{
		deps:           deps,
		revoked:        newRevocations(maxRevoked),
		sessionTTL:     time.Duration(cfg.Gateway.Console.WithDefaults().SessionTTL),
		optimizer:      cfg.Gateway.WithDefaults().Optimizer,
		fails:          newFailureLimiter(),
		events:         newEventLog(maxEvents),
		catalogChanged: make(chan struct{}, 1),
		done:           make(chan struct{}),
	}
	c.sealer.Store(s)
	c.SetOIDC(deps.OIDC)
	c.Update(cfg)
	ctx, cancel := context.WithCancel(context.Background())
	c.stopped = cancel
	go func() { c.watch(ctx); close(c.done) }()
	return c, nil
}

// Update applies a reloaded configuration: operator keys, servers, rate
// limits (gateway.optimizer stays as the gateway serves it, as at start). A session made with an operator key the new configuration no
// longer has ends at once (its next request goes to the login page),
// and stays ended if a later reload lists the key again; others stay
// open until they expire.
func (c *Console) Update(cfg *config.Config) {
	l := &liveConfig{rateLimits: cfg.RateLimits, rootOptimizer: c.optimizer.Enabled, searchLimit: c.optimizer.Limit}
	prev := c.live.Load()
	for _, k := range cfg.Gateway.Console.OperatorKeys {
		l.operatorKeys = append(l.operatorKeys, []byte(k))
		l.keyAdmissions = append(l.keyAdmissions, c.keyAdmission(prev, []byte(k)))
	}
	for _, s := range cfg.Servers {
		opt := c.optimizer.Enabled
		if s.Optimizer != nil {
			opt = *s.Optimizer
		}
		l.servers = append(l.servers, serverView{Name: s.Name, Optimizer: opt, CodeMode: cfg.CodeModeIn(s.Name)})
	}
	c.live.Store(l)
}

// SetOIDC puts o in force as the OIDC login (nil: none), as a reload of
// gateway.auth.oidc or gateway.console.oidc built it: the next login
// goes through it. An OIDC session that the login in force would not
// have admitted (another provider, client, groups claim or operator
// group) ends at once, and stays ended if a later login admits as it
// did; one it would have stays open.
func (c *Console) SetOIDC(o *OIDCLogin) {
	if o == nil {
		c.oidc.Store(nil)
		return
	}
	in := &oidcInForce{OIDCLogin: o}
	if prev := c.oidc.Load(); prev != nil && bytes.Equal(prev.admits, o.admits) {
		in.admission = prev.admission
	} else {
		in.admission = c.admissions.Add(1)
	}
	c.oidc.Store(in)
}

// Close stops the event watchers.
func (c *Console) Close() {
	c.stopped()
	<-c.done
}

// Handler serves the console under /console/ (mount it at that path on
// the ops port's mux).
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /console/static/console.css", serveCSS)
	mux.HandleFunc("GET /console/login", c.loginPage)
	mux.HandleFunc("POST /console/login", c.loginKey)
	mux.HandleFunc("GET /console/oidc/start", c.oidcStart)
	mux.HandleFunc("GET /console/oidc/callback", c.oidcCallback)
	mux.Handle("POST /console/logout", c.authed(c.logout))
	mux.Handle("GET /console/{$}", c.authed(func(w http.ResponseWriter, r *http.Request, _ session) {
		http.Redirect(w, r, "/console/backends", http.StatusSeeOther)
	}))
	mux.Handle("GET /console/backends", c.authed(c.backendsPage))
	mux.Handle("GET /console/catalog", c.authed(c.catalogPage))
	mux.Handle("GET /console/search", c.authed(c.searchPage))
	mux.Handle("GET /console/tasks", c.authed(c.tasksPage))
	mux.Handle("GET /console/task", c.authed(c.taskPage))
	mux.Handle("GET /console/events", c.authed(c.eventsPage))
	mux.Handle("GET /console/traffic", c.authed(c.trafficPage))
	mux.Handle("GET /console/ratelimits", c.authed(c.rateLimitsPage))
	mux.Handle("/console/", c.authed(func(w http.ResponseWriter, r *http.Request, s session) {
		c.render(w, r, http.StatusNotFound, "notfound", page{Title: "Not found", Session: &s})
	}))
	return securityHeaders(sameOriginPosts(mux))
}

// sameOriginPosts refuses (403) a POST a browser says came from another
// site: an Origin that is present and not the console's own (its Host,
// under the scheme the request came by; over plain HTTP https too, for a
// proxy that ended TLS before the ops port; "null" included), or
// Sec-Fetch-Site cross-site. Forms carry CSRF tokens as well; this stops
// a cross-site form before any of its fields are read. The Host itself is
// checked against DNS rebinding before the console (hostguard, on a
// loopback ops port).
func sameOriginPosts(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && !sameOrigin(r) {
			http.Error(w, "Forbidden: the form did not come from this console", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func sameOrigin(r *http.Request) bool {
	if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
		return false
	}
	origins, sent := r.Header["Origin"]
	if !sent {
		return true
	}
	if len(origins) != 1 {
		return false
	}
	// A page on https://<Host> is this console's, through a proxy that
	// ended TLS (an ingress named in ops.hosts): no other site can serve
	// one there. Over TLS, a page on plain http:// is not.
	return strings.EqualFold(origins[0], "https://"+r.Host) || r.TLS == nil && strings.EqualFold(origins[0], "http://"+r.Host)
}

// authed admits requests with a valid session; any other is sent to the
// login page, and learns nothing else. A query value that is not UTF-8
// (which no browser's form sends) is a bad form value for every page: the
// services could not be asked with it (a protobuf string is UTF-8).
func (c *Console) authed(h func(http.ResponseWriter, *http.Request, session)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s, ok := c.sessionFrom(r)
		if !ok {
			target := "/console/login"
			if r.Method == http.MethodGet && safeNext(r.URL.RequestURI()) != "" {
				target += "?next=" + urlQueryEscape(r.URL.RequestURI())
			}
			http.Redirect(w, r, target, http.StatusSeeOther)
			return
		}
		for _, values := range r.URL.Query() {
			if slices.ContainsFunc(values, func(v string) bool { return !utf8.ValidString(v) }) {
				http.Error(w, "Bad Request: a form value is not UTF-8", http.StatusBadRequest)
				return
			}
		}
		h(w, r, s)
	})
}

// securityHeaders sets what every console response carries: no script,
// no framing, no referrer to another site, no sniffing, no caching. The
// referrer policy is same-origin, not no-referrer: under no-referrer a
// browser sends "Origin: null" with the console's own forms, which
// sameOriginPosts could not tell from a sandboxed attacker's.
func securityHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'self'; script-src 'none'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "same-origin")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	})
}

// rpcContext bounds one page's calls.
func rpcContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), callTimeout)
}
