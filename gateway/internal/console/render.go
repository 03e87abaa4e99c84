package console

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static/console.css
var css []byte

// pages are the page templates, each parsed with the layout.
var pages = map[string]*template.Template{}

var funcs = template.FuncMap{
	"ts": func(t *timestamppb.Timestamp) string {
		if t == nil {
			return "—"
		}
		return t.AsTime().UTC().Format("2006-01-02 15:04:05Z")
	},
	"dur": func(d *durationpb.Duration) string {
		if d == nil {
			return "—"
		}
		return d.AsDuration().Round(time.Microsecond).String()
	},
	"join":       strings.Join,
	"f4":         func(v float64) string { return fmt.Sprintf("%.4f", v) },
	"add1":       func(i int) int { return i + 1 },
	"add":        func(a, b float64) float64 { return a + b },
	"partKind":   func(k indexerv1.ScorePartKind) string { return partKinds[k] },
	"termSource": func(s indexerv1.TermSource) string { return termSources[s] },
}

func init() {
	for _, name := range []string{"login", "backends", "catalog", "search", "tasks", "task", "events", "ratelimits", "traffic", "notfound", "continue"} {
		pages[name] = template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/partials.html", "templates/"+name+".html"))
	}
}

// page is what the layout renders around a page's content.
type page struct {
	Title string
	// Active names the navigation entry of the page.
	Active string
	// Session is nil on the login page (no navigation then).
	Session *session
	// Refresh, when positive, reloads the page every so many seconds.
	Refresh int
	// Continue, when set, moves the browser on to this console path at
	// once (a meta refresh: the console has no script).
	Continue string
	// Error is a failure to show above the content.
	Error string
	Data  any
}

// render writes a page; a template failure is a 500 without details.
func (c *Console) render(w http.ResponseWriter, r *http.Request, code int, name string, p page) {
	var buf bytes.Buffer
	if err := pages[name].Execute(&buf, p); err != nil {
		c.deps.Log.Error("console: render", "page", name, "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// rpcFailure turns a failed RPC into the HTTP status of the page, the
// text shown on it and, for a rate limit, its Retry-After (seconds, ""
// when the service did not say). The console's credential is an
// operator's, so the services' texts are full (and already free of
// secrets). It is the console's one mapping of gRPC status to HTTP.
func rpcFailure(what string, err error) (code int, msg, retryAfter string) {
	st := status.Convert(err)
	code = http.StatusBadGateway
	switch st.Code() {
	case codes.InvalidArgument:
		code = http.StatusBadRequest
	case codes.NotFound:
		code = http.StatusNotFound
	case codes.DeadlineExceeded:
		code = http.StatusGatewayTimeout
	case codes.PermissionDenied:
		code = http.StatusForbidden
	case codes.ResourceExhausted:
		code = http.StatusTooManyRequests
		if reason, meta := apierr.Info(err); reason == commonv1.ErrorReason_ERROR_REASON_RATE_LIMITED {
			if n, convErr := strconv.Atoi(meta["retryAfterSeconds"]); convErr == nil && n > 0 {
				retryAfter = strconv.Itoa(n)
			}
		}
	}
	return code, fmt.Sprintf("%s failed (%s): %s", what, st.Code(), st.Message()), retryAfter
}

// renderFailure renders page name with the failed RPC's text, in the
// status rpcFailure maps it to (with its Retry-After).
func (c *Console) renderFailure(w http.ResponseWriter, r *http.Request, name string, p page, what string, err error) {
	code, msg, retryAfter := rpcFailure(what, err)
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	p.Error = msg
	c.render(w, r, code, name, p)
}

// safeNext returns next when it is a path of the console to return to
// after login, and "" otherwise (no other site, no scheme-relative URL).
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/console/") || strings.ContainsAny(next, "\\\r\n") || strings.HasPrefix(next, "/console/login") ||
		strings.Contains(next, "//") || len(next) > 2048 {
		return ""
	}
	return next
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

func serveCSS(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/css; charset=utf-8")
	_, _ = w.Write(css)
}
