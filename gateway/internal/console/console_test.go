package console

import (
	"context"
	"fmt"
	"html"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

var consolePages = []string{"/console/", "/console/backends", "/console/catalog", "/console/search?q=weather", "/console/tasks", "/console/task?id=t1.x", "/console/events", "/console/ratelimits", "/console/nowhere"}

func checkSecurityHeaders(t *testing.T, what string, h http.Header) {
	t.Helper()
	for k, want := range map[string]string{
		"Content-Security-Policy": "default-src 'self'",
		"X-Frame-Options":         "DENY",
		"Referrer-Policy":         "same-origin",
		"X-Content-Type-Options":  "nosniff",
		"Cache-Control":           "no-store",
	} {
		if !strings.Contains(h.Get(k), want) {
			t.Errorf("%s: %s is %q, want %q", what, k, h.Get(k), want)
		}
	}
	if !strings.Contains(h.Get("Content-Security-Policy"), "frame-ancestors 'none'") {
		t.Errorf("%s: CSP %q allows framing", what, h.Get("Content-Security-Policy"))
	}
}

func TestUnauthenticatedRequestsGoToLogin(t *testing.T) {
	tc := startConsole(t, nil, nil)
	c := tc.client(t)
	for _, p := range consolePages {
		code, body, h := get(t, c, tc.srv.URL+p)
		if code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/console/login") {
			t.Errorf("GET %s without a session: %d to %q", p, code, h.Get("Location"))
		}
		if strings.Contains(body, "alpha") {
			t.Errorf("GET %s without a session shows data: %s", p, body)
		}
		checkSecurityHeaders(t, p, h)
	}
	if _, _, h := get(t, c, tc.srv.URL+"/console/backends"); h.Get("Location") != "/console/login?next=%2Fconsole%2Fbackends" {
		t.Errorf("the login redirect does not come back: %q", h.Get("Location"))
	}
	if code, _, h := post(t, c, tc.srv.URL+"/console/logout", url.Values{}); code != http.StatusSeeOther || h.Get("Location") != "/console/login" {
		t.Errorf("POST logout without a session: %d %q", code, h.Get("Location"))
	}
	code, body, h := get(t, c, tc.srv.URL+"/console/login")
	if code != http.StatusOK || !strings.Contains(body, `name="key"`) || !strings.Contains(body, `<label for="key">`) || !strings.Contains(body, `href="#main"`) ||
		!strings.Contains(body, `name="viewport"`) || strings.Contains(body, "<script") {
		t.Errorf("login page %d:\n%s", code, body)
	}
	checkSecurityHeaders(t, "login", h)
	if code, _, h := get(t, c, tc.srv.URL+"/console/static/console.css"); code != http.StatusOK || !strings.HasPrefix(h.Get("Content-Type"), "text/css") {
		t.Errorf("stylesheet %d %q", code, h.Get("Content-Type"))
	}
}

func TestLoginWithOperatorKey(t *testing.T) {
	tc := startConsole(t, nil, nil)
	c := tc.client(t)
	if code, loc := tc.login(t, c, "not-an-operator-key"); code != http.StatusUnauthorized || loc != "" {
		t.Fatalf("a wrong key: %d to %q", code, loc)
	}
	if code, _, _ := get(t, c, tc.srv.URL+"/console/backends"); code != http.StatusSeeOther {
		t.Fatalf("a wrong key opened a session: %d", code)
	}
	_, body, _ := get(t, c, tc.srv.URL+"/console/login?next=/console/catalog%3Fkind%3Dprompts")
	code, _, h := post(t, c, tc.srv.URL+"/console/login", url.Values{"csrf": {formValue(t, body, "csrf")}, "key": {testOperatorKey}, "next": {formValue(t, body, "next")}})
	if code != http.StatusSeeOther || h.Get("Location") != "/console/catalog?kind=prompts" {
		t.Fatalf("the operator key: %d to %q", code, h.Get("Location"))
	}
	var sc *http.Cookie
	for _, ck := range (&http.Response{Header: h}).Cookies() {
		if ck.Name == sessionCookie {
			sc = ck
		}
	}
	if sc == nil || !sc.HttpOnly || sc.SameSite != http.SameSiteStrictMode || sc.Path != "/console/" || sc.MaxAge <= 0 || sc.MaxAge > int(8*time.Hour/time.Second) {
		t.Fatalf("session cookie %+v", sc)
	}
	if strings.Contains(sc.Value, testOperatorKey) || strings.Contains(sc.Value, "operator") {
		t.Fatalf("the session cookie is not sealed: %s", sc.Value)
	}
	code, body, _ = get(t, c, tc.srv.URL+"/console/backends")
	if code != http.StatusOK || !strings.Contains(body, "operator key 2") {
		t.Fatalf("backends after login: %d\n%s", code, body)
	}
	// A next that leaves the console is not followed.
	for _, next := range []string{"//evil.example/console/", "https://evil.example/", "/console/login", "/elsewhere"} {
		c2 := tc.client(t)
		_, body, _ := get(t, c2, tc.srv.URL+"/console/login")
		_, _, h := post(t, c2, tc.srv.URL+"/console/login", url.Values{"csrf": {formValue(t, body, "csrf")}, "key": {testOperatorKey}, "next": {next}})
		if h.Get("Location") != "/console/backends" {
			t.Errorf("next %q sent the operator to %q", next, h.Get("Location"))
		}
	}
}

func TestLoginNeedsTheFormsCSRFToken(t *testing.T) {
	tc := startConsole(t, nil, nil)
	other := startConsole(t, nil, nil)
	c := tc.client(t)
	get(t, c, tc.srv.URL+"/console/login")
	for name, csrf := range map[string]string{"none": "", "wrong": randomToken()} {
		if code, _, _ := post(t, c, tc.srv.URL+"/console/login", url.Values{"csrf": {csrf}, "key": {testOperatorKey}}); code != http.StatusForbidden {
			t.Errorf("%s CSRF token: %d", name, code)
		}
	}
	// A form (and its cookie) from another console process does not open
	// here: each process seals with its own key.
	oc := other.client(t)
	_, body, _ := get(t, oc, other.srv.URL+"/console/login")
	u, _ := url.Parse(other.srv.URL + "/console/")
	stolen := oc.Jar.Cookies(u)
	fresh := tc.client(t)
	fresh.Jar.SetCookies(mustURL(t, tc.srv.URL+"/console/"), stolen)
	if code, _, _ := post(t, fresh, tc.srv.URL+"/console/login", url.Values{"csrf": {formValue(t, body, "csrf")}, "key": {testOperatorKey}}); code != http.StatusForbidden {
		t.Errorf("another process's login form: %d", code)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestTamperedCookiesAreRefused(t *testing.T) {
	tc := startConsole(t, nil, nil)
	base := mustURL(t, tc.srv.URL+"/console/")
	try := func(name, value string) int {
		c := tc.client(t)
		c.Jar.SetCookies(base, []*http.Cookie{{Name: name, Value: value, Path: "/console/"}})
		code, _, _ := get(t, c, tc.srv.URL+"/console/backends")
		return code
	}
	// A key session: an OIDC one needs an OIDC login in force
	// (TestOIDCSessionsFollowTheLogin). It is made under its key's
	// admission (TestSessionEndedByAReloadStaysEnded).
	live, digest := tc.live.Load(), keyDigest([]byte(testOperatorKey))
	good, _ := tc.sealer.Load().seal(purposeSession, session{Operator: "x", Method: "key", Key: digest, Admission: live.keyAdmissions[keyPosition(digest, live.operatorKeys)-1],
		ID: "z", CSRF: "y", Expires: time.Now().Add(time.Hour).Unix()})
	if try(sessionCookie, good) != http.StatusOK {
		t.Fatal("a good session is refused")
	}
	raw := []byte(good)
	raw[len(raw)/2] ^= 1
	expired, _ := tc.sealer.Load().seal(purposeSession, session{Operator: "x", Method: "oidc", ID: "z", CSRF: "y", Expires: time.Now().Add(-time.Second).Unix()})
	asLogin, _ := tc.sealer.Load().seal(purposeLogin, session{Operator: "x", Method: "oidc", ID: "z", CSRF: "y", Expires: time.Now().Add(time.Hour).Unix()})
	for name, v := range map[string]string{
		"flipped": string(raw), "expired": expired, "login cookie as session": asLogin, "garbage": "not-base64!", "empty": "",
		"huge": strings.Repeat("A", maxCookieBytes+1),
	} {
		if code := try(sessionCookie, v); code != http.StatusSeeOther {
			t.Errorf("%s session cookie: %d", name, code)
		}
	}
}

func TestFailedLoginsAreLimited(t *testing.T) {
	tc := startConsole(t, nil, nil)
	c := tc.client(t)
	for i := range maxFailures {
		if code, _ := tc.login(t, c, "wrong-key"); code != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d", i, code)
		}
	}
	_, body, _ := get(t, c, tc.srv.URL+"/console/login")
	code, _, h := post(t, c, tc.srv.URL+"/console/login", url.Values{"csrf": {formValue(t, body, "csrf")}, "key": {testOperatorKey}})
	if code != http.StatusTooManyRequests || h.Get("Retry-After") == "" {
		t.Fatalf("after %d failures the right key got %d (Retry-After %q)", maxFailures, code, h.Get("Retry-After"))
	}
}

// TestRequestsWithoutALoginDoNotUseUpAttempts: posts of the login form
// without its token (which any page can make) and bare OIDC callbacks
// (which any page or peer can send) are refused without counting as the
// address's login attempts, so they cannot lock the operators out; they
// once did, before the token or the login was looked at.
func TestRequestsWithoutALoginDoNotUseUpAttempts(t *testing.T) {
	tc, _ := startOIDCConsole(t, "console", "")
	stranger := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	for range 2 * maxFailures {
		for _, send := range []func() (*http.Response, error){
			func() (*http.Response, error) {
				return stranger.Get(tc.srv.URL + "/console/oidc/callback?state=x&code=y")
			},
			func() (*http.Response, error) {
				return stranger.PostForm(tc.srv.URL+"/console/login", url.Values{"key": {"guess"}})
			},
		} {
			resp, err := send()
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode == http.StatusTooManyRequests {
				t.Fatalf("a request without a login was limited: %s", resp.Request.URL.Path)
			}
		}
	}
	c := tc.client(t)
	_, body, _ := get(t, c, tc.srv.URL+"/console/login")
	if code, _, _ := post(t, c, tc.srv.URL+"/console/login", url.Values{"csrf": {formValue(t, body, "csrf")}, "key": {testOperatorKey}}); code == http.StatusTooManyRequests {
		t.Fatalf("the operator key was refused %d after requests without a login", code)
	}
}

func TestFailureLimiterIsBounded(t *testing.T) {
	now := time.Unix(1000, 0)
	l := newFailureLimiter()
	l.now = func() time.Time { return now }
	for i := range maxFailureClients + 100 {
		l.attempt("10.0." + string(rune('a'+i%26)) + "." + time.Duration(i).String())
	}
	if n := len(l.clients); n > maxFailureClients+1 {
		t.Fatalf("%d clients held, bound %d", n, maxFailureClients)
	}
	// The overflow shares one entry: 100 failures there block every
	// address not in the table.
	if _, blocked := l.attempt("192.0.2.1"); !blocked {
		t.Fatal("an unknown address is not limited while the table is full")
	}
	now = now.Add(failureWindow)
	if _, blocked := l.attempt("192.0.2.1"); blocked {
		t.Fatal("still blocked after the window")
	}
	if len(l.clients) != 1 {
		t.Fatalf("expired entries are not pruned: %d held", len(l.clients))
	}
}

func loggedIn(t *testing.T, tc *testConsole) *http.Client {
	t.Helper()
	c := tc.client(t)
	if code, _ := tc.login(t, c, testOperatorKey); code != http.StatusSeeOther {
		t.Fatalf("login: %d", code)
	}
	return c
}

func TestLogout(t *testing.T) {
	tc := startConsole(t, nil, nil)
	c := loggedIn(t, tc)
	copied := copyCookies(t, tc, c)
	_, body, _ := get(t, c, tc.srv.URL+"/console/backends")
	if code, _, _ := post(t, c, tc.srv.URL+"/console/logout", url.Values{"csrf": {"forged"}}); code != http.StatusForbidden {
		t.Fatalf("logout with a forged token: %d", code)
	}
	code, _, h := post(t, c, tc.srv.URL+"/console/logout", url.Values{"csrf": {formValue(t, body, "csrf")}})
	if code != http.StatusSeeOther || h.Get("Location") != "/console/login" {
		t.Fatalf("logout: %d %q", code, h.Get("Location"))
	}
	if code, _, _ := get(t, c, tc.srv.URL+"/console/backends"); code != http.StatusSeeOther {
		t.Fatalf("after logout: %d", code)
	}
	// A copy of the cookie taken before the logout no longer opens.
	if code, _, _ := get(t, copied, tc.srv.URL+"/console/backends"); code != http.StatusSeeOther {
		t.Fatalf("a copy of the logged-out session's cookie: %d", code)
	}
}

func TestLogoutWithTheRevocationsFullEndsEverySession(t *testing.T) {
	tc := startConsole(t, nil, nil)
	tc.revoked.limit = 2
	logOut := func(c *http.Client) *http.Client {
		t.Helper()
		copied := copyCookies(t, tc, c)
		_, body, _ := get(t, c, tc.srv.URL+"/console/backends")
		if code, _, _ := post(t, c, tc.srv.URL+"/console/logout", url.Values{"csrf": {formValue(t, body, "csrf")}}); code != http.StatusSeeOther {
			t.Fatalf("logout: %d", code)
		}
		return copied
	}
	bystander := loggedIn(t, tc)
	var copies []*http.Client
	for range 2 {
		copies = append(copies, logOut(loggedIn(t, tc)))
	}
	if code, _, _ := get(t, bystander, tc.srv.URL+"/console/backends"); code != http.StatusOK {
		t.Fatalf("a session not logged out, while the set has room: %d", code)
	}
	copies = append(copies, logOut(loggedIn(t, tc)))
	for i, c := range copies {
		if code, _, _ := get(t, c, tc.srv.URL+"/console/backends"); code != http.StatusSeeOther {
			t.Errorf("logged-out session %d opens after the set filled: %d", i, code)
		}
	}
	if code, _, _ := get(t, bystander, tc.srv.URL+"/console/backends"); code != http.StatusSeeOther {
		t.Fatalf("the sealing key was not rotated when the set filled: %d", code)
	}
	if n := len(tc.revoked.ids); n != 0 {
		t.Fatalf("%d revocations kept after the rotation", n)
	}
	if code, _ := tc.login(t, tc.client(t), testOperatorKey); code != http.StatusSeeOther {
		t.Fatalf("no login after the rotation: %d", code)
	}
}

// copyCookies is a second client holding c's console cookies.
func copyCookies(t *testing.T, tc *testConsole, c *http.Client) *http.Client {
	t.Helper()
	base := mustURL(t, tc.srv.URL+"/console/")
	copied := tc.client(t)
	copied.Jar.SetCookies(base, c.Jar.Cookies(base))
	return copied
}

func TestBackendsPageEscapesWhatItShows(t *testing.T) {
	tc := startConsole(t, nil, nil)
	code, body, h := get(t, loggedIn(t, tc), tc.srv.URL+"/console/backends")
	if code != http.StatusOK {
		t.Fatalf("backends %d\n%s", code, body)
	}
	checkSecurityHeaders(t, "backends", h)
	for _, want := range []string{
		`data-backend="alpha"`, "healthy", "Modern", "2026-07-28", "3ms", "http://alpha.internal/mcp",
		"&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;", "unhealthy", "Legacy", "connection refused &lt;b&gt;",
		"7 tool documents", `aria-current="page"`, `class="scroll"`,
		// Conflicts between backends: who got each, or that none did.
		`<code>notes://{id}</code> overlaps <code>notes://{&#43;id}</code>`, "<td>alpha</td>",
		"<code>shared://&lt;i&gt;x&lt;/i&gt;</code>", "no backend (the strategy cannot decide)",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("backends page lacks %q", want)
		}
	}
	if strings.Contains(body, hostileName) || strings.Contains(body, "refused <b>") {
		t.Errorf("a hostile name is not escaped:\n%s", body)
	}
}

func TestCatalogViewAsPrincipal(t *testing.T) {
	tc := startConsole(t, nil, nil)
	c := loggedIn(t, tc)
	code, body, _ := get(t, c, tc.srv.URL+"/console/catalog")
	if code != http.StatusOK || !strings.Contains(body, "alpha_echo") || strings.Contains(body, "admin_reset") || !strings.Contains(body, "the anonymous principal") {
		t.Fatalf("catalog as anonymous %d:\n%s", code, body)
	}
	// The test aggregator pages one tool at a time: follow the pager.
	seen := map[string]bool{}
	next := "/console/catalog?subject=bob&groups=admins"
	for range 10 {
		_, body, _ = get(t, c, tc.srv.URL+next)
		for _, n := range testToolNames {
			if strings.Contains(body, "<code>"+n+"</code>") {
				seen[n] = true
			}
		}
		i := strings.Index(body, `rel="next" href="`)
		if i < 0 {
			break
		}
		rest := body[i+len(`rel="next" href="`):]
		next = strings.ReplaceAll(rest[:strings.IndexByte(rest, '"')], "&amp;", "&")
	}
	if len(seen) != len(testToolNames) || !strings.Contains(body, "bob (groups admins)") {
		t.Fatalf("bob of admins paged through %v", seen)
	}
	_, body, _ = get(t, c, tc.srv.URL+"/console/catalog?server=forecast&subject=bob&groups=admins")
	if !strings.Contains(body, "/mcp/forecast") || !strings.Contains(body, "alpha_echo") || strings.Contains(body, "admin_reset") {
		t.Fatalf("the forecast server as bob:\n%s", body)
	}
	// The kind tabs keep the server and the principal.
	if !strings.Contains(body, `href="/console/catalog?groups=admins&amp;kind=prompts&amp;server=forecast&amp;subject=bob"`) {
		t.Fatalf("the prompts tab loses the view:\n%s", body)
	}
	if code, body, _ := get(t, c, tc.srv.URL+"/console/catalog?server=nowhere"); code != http.StatusBadRequest || !strings.Contains(body, "no virtual server") {
		t.Fatalf("an unknown server: %d\n%s", code, body)
	}
	if code, _, _ := get(t, c, tc.srv.URL+"/console/catalog?subject="+strings.Repeat("x", maxSubjectBytes+1)); code != http.StatusBadRequest {
		t.Fatalf("an overlong subject: %d", code)
	}
	if code, body, _ := get(t, c, tc.srv.URL+"/console/catalog?kind=prompts"); code != http.StatusOK || !strings.Contains(body, "says &lt;i&gt;hi&lt;/i&gt;") {
		t.Fatalf("prompts %d:\n%s", code, body)
	}
	if code, body, _ := get(t, c, tc.srv.URL+"/console/catalog?kind=nonsense"); code != http.StatusBadRequest || !strings.Contains(body, "no such list") {
		t.Fatalf("an unknown kind: %d\n%s", code, body)
	}
	if code, _, _ := get(t, c, tc.srv.URL+"/console/catalog?kind=resources"); code != http.StatusBadGateway {
		t.Fatalf("a failing list (the test aggregator has no ListResources): %d", code)
	}
}

// TestCatalogShowsAResourcesTitle: the catalog page's Title column shows
// each item's title. A resource (and a resource template) has a name and
// an optional human title, as MCP lists them: the page must show the
// title under that heading, and the name (MCP's display name without
// one) only when there is none. It showed the name whatever the title.
func TestCatalogShowsAResourcesTitle(t *testing.T) {
	tc := startConsoleServing(t, nil, nil, nil, func(agg *testkit.FakeAggregator) {
		agg.Resources = []*aggregatorv1.Resource{{Uri: "notes://today", Name: "today_notes", Title: "Today's notes", Backend: "alpha"},
			{Uri: "notes://plain", Name: "plain_notes", Backend: "alpha"}}
		agg.ResourceTemplates = []*aggregatorv1.ResourceTemplate{{UriTemplate: "notes://{day}", Name: "day_notes", Title: "Notes of a day", Backend: "alpha"}}
	})
	c := loggedIn(t, tc)
	for kind, want := range map[string]string{"resources": "<td>Today&#39;s notes</td>", "templates": "<td>Notes of a day</td>"} {
		code, body, _ := get(t, c, tc.srv.URL+"/console/catalog?kind="+kind)
		if code != http.StatusOK || !strings.Contains(body, want) || strings.Contains(body, "today_notes") || strings.Contains(body, "day_notes") {
			t.Errorf("%s: %d, the title is not shown, or the name is:\n%s", kind, code, body[strings.Index(body, `<table id="items">`):])
		}
	}
	// The test aggregator pages one item at a time: the second resource.
	_, body, _ := get(t, c, tc.srv.URL+"/console/catalog?kind=resources")
	next := regexp.MustCompile(`rel="next" href="([^"]+)"`).FindStringSubmatch(body)
	if next == nil {
		t.Fatalf("no second page of resources:\n%s", body)
	}
	if _, body, _ = get(t, c, tc.srv.URL+html.UnescapeString(next[1])); !strings.Contains(body, "<td>plain_notes</td>") {
		t.Errorf("a resource without a title is not shown by its name:\n%s", body[strings.Index(body, `<table id="items">`):])
	}
}

func TestSearchPlaygroundExplains(t *testing.T) {
	tc := startConsole(t, nil, nil)
	c := loggedIn(t, tc)
	code, body, _ := get(t, c, tc.srv.URL+"/console/search?q=alpha")
	if code != http.StatusOK {
		t.Fatalf("search %d\n%s", code, body)
	}
	for _, want := range []string{`data-tool="alpha_echo"`, `data-tool="alpha_time"`, "0.7500", "exact <code>alpha</code>: +0.5000", "trigram <code>alphaecho</code>: +0.2500", "among 3 tools in scope"} {
		if !strings.Contains(body, want) {
			t.Errorf("search page lacks %q", want)
		}
	}
	_, body, _ = get(t, c, tc.srv.URL+"/console/search?q=admin")
	if strings.Contains(body, `data-tool="admin_reset"`) || !strings.Contains(body, "No tool matched") {
		t.Errorf("the anonymous principal found admin_reset:\n%s", body)
	}
	_, body, _ = get(t, c, tc.srv.URL+"/console/search?q=admin&subject=bob&groups=admins")
	if !strings.Contains(body, `data-tool="admin_reset"`) {
		t.Errorf("bob of admins does not find admin_reset:\n%s", body)
	}
	if code, body, _ := get(t, c, tc.srv.URL+"/console/search"); code != http.StatusOK || strings.Contains(body, "hits for") {
		t.Errorf("an empty search ran: %d", code)
	}
}

func TestEventsPage(t *testing.T) {
	tc := startConsole(t, nil, nil)
	c := loggedIn(t, tc)
	tc.agg.Notify(aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS) // catalog version 43
	var body string
	testkit.Eventually(t, "the events page to show the change and the approval", 10*time.Second, func() error {
		_, body, _ = get(t, c, tc.srv.URL+"/console/events")
		if strings.Contains(body, "tools changed (catalog version 43)") && strings.Contains(body, "alpha/time approved at digest cccc") &&
			strings.Contains(body, "alpha/echo is waiting for approval: seen digest bbbb, approved aaaa") {
			return nil
		}
		return fmt.Errorf("the page:\n%s", body)
	})
	for _, want := range []string{"<th scope=\"row\">echo</th>", "bbbb", "alice", "mallory", "Reload every 10 seconds",
		"<td>aggregator (uriSAN spiffe://switchboard/aggregator)</td>"} {
		if !strings.Contains(body, want) {
			t.Errorf("events page lacks %q", want)
		}
	}
	if strings.Contains(body, `http-equiv="refresh"`) {
		t.Error("the page reloads itself without being asked to")
	}
	_, body, _ = get(t, c, tc.srv.URL+"/console/events?outcome=denied&live=1")
	if strings.Contains(body, "alice") || !strings.Contains(body, "mallory") || !strings.Contains(body, `http-equiv="refresh" content="10"`) {
		t.Errorf("filtered live events:\n%s", body)
	}
}

func TestEventLogIsARing(t *testing.T) {
	l := newEventLog(3)
	for _, d := range []string{"a", "b", "c", "d", "e"} {
		l.add("x", d)
	}
	var got []string
	for _, e := range l.recent() {
		got = append(got, e.Detail)
	}
	if strings.Join(got, "") != "edc" {
		t.Fatalf("recent %v, want e d c", got)
	}
}

type stateFunc func(context.Context, BucketQuery) ([]RateLimitBucket, string, error)

func (f stateFunc) RateLimitBuckets(ctx context.Context, q BucketQuery) ([]RateLimitBucket, string, error) {
	return f(ctx, q)
}

func TestRateLimitsPage(t *testing.T) {
	for name, tc := range map[string]struct {
		state RateLimitState
		want  []string
	}{
		"no RPC": {nil, []string{"not available"}},
		"unimplemented": {stateFunc(func(context.Context, BucketQuery) ([]RateLimitBucket, string, error) {
			return nil, "", status.Error(codes.Unimplemented, "unknown method")
		}), []string{"not available"}},
		"failing": {stateFunc(func(context.Context, BucketQuery) ([]RateLimitBucket, string, error) {
			return nil, "", status.Error(codes.Unavailable, "indexer down")
		}), []string{"indexer down"}},
		"state": {stateFunc(func(context.Context, BucketQuery) ([]RateLimitBucket, string, error) {
			return []RateLimitBucket{{Key: "per-user|principal|<alice>", Tokens: 3.5, Burst: 20, RatePerSecond: 10, Updated: time.Now(), Configured: true}}, "", nil
		}), []string{"per-user|principal|&lt;alice&gt;", "3.50", "<td>20</td><td>10/s</td>"}},
		"slow and unconfigured": {stateFunc(func(context.Context, BucketQuery) ([]RateLimitBucket, string, error) {
			return []RateLimitBucket{
				{Key: "hourly|principal|bob", Tokens: 0.5, Burst: 2, RatePerSecond: 1.0 / 3600, Updated: time.Now(), Configured: true},
				{Key: "per-minute|principal|bob", Tokens: 1, Burst: 2, RatePerSecond: 0.5, Updated: time.Now(), Configured: true},
				{Key: "removed|principal|carol", Tokens: 4.25, Updated: time.Now()},
			}, "", nil
		}), []string{"<td>2</td><td>1/h</td>", "<td>2</td><td>30/m</td>", "4.25", `<td colspan="2" class="unconfigured">limit no longer configured</td>`}},
	} {
		t.Run(name, func(t *testing.T) {
			con := startConsole(t, tc.state, nil)
			code, body, _ := get(t, loggedIn(t, con), con.srv.URL+"/console/ratelimits")
			if code != http.StatusOK {
				t.Fatalf("%d\n%s", code, body)
			}
			// A limit per tool counts tools/call alone unless it names
			// methods (config.RateLimit.EffectiveMethods).
			for _, want := range append(tc.want, "per-user", "10/s", "groups &lt;users&gt;", "let through", `<th scope="row">slow-tool</th><td>tool</td><td>1/s</td><td>default</td><td>tools/call</td>`) {
				if !strings.Contains(body, want) {
					t.Errorf("rate limits page lacks %q:\n%s", want, body)
				}
			}
			if strings.Contains(body, "0.000") || strings.Contains(body, "<td>0</td>") {
				t.Errorf("a rate or burst is shown as zero:\n%s", body)
			}
		})
	}
}

// More buckets than a page shows: the page says so and links to the next
// ones, and a limit's link shows that limit's buckets alone. The page
// once showed the first 500 and said nothing of the rest, so a
// principal beyond them looked as if it had never taken a token.
func TestRateLimitsPageLeadsToEveryBucket(t *testing.T) {
	const exist = 600
	var asked []BucketQuery
	state := stateFunc(func(_ context.Context, q BucketQuery) ([]RateLimitBucket, string, error) {
		asked = append(asked, q)
		first := 0
		if q.After != "" {
			first, _ = strconv.Atoi(q.After)
		}
		var out []RateLimitBucket
		for i := first; i < exist && len(out) < q.Size; i++ {
			out = append(out, RateLimitBucket{Key: fmt.Sprintf("per-user|principal|user-%04d", i), Tokens: 1, Burst: 20, RatePerSecond: 10, Updated: time.Now(), Configured: true})
		}
		next := ""
		if first+len(out) < exist {
			next = strconv.Itoa(first + len(out))
		}
		return out, next, nil
	})
	con := startConsole(t, state, nil)
	c := loggedIn(t, con)
	_, body, _ := get(t, c, con.srv.URL+"/console/ratelimits")
	if !strings.Contains(body, "user-0499") || strings.Contains(body, "user-0500") || !strings.Contains(body, `<a href="/console/ratelimits?after=500">the next ones</a>`) {
		t.Fatalf("the first page does not lead to the buckets after it:\n%s", body)
	}
	code, body, _ := get(t, c, con.srv.URL+"/console/ratelimits?after=500&limit=per-user")
	if code != http.StatusOK || !strings.Contains(body, "user-0599") || strings.Contains(body, "user-0499") || strings.Contains(body, "the next ones") {
		t.Fatalf("the second page (%d):\n%s", code, body)
	}
	if q := asked[len(asked)-1]; q.Limit != "per-user" || q.After != "500" || q.Size != maxBuckets {
		t.Fatalf("asked %+v", q)
	}
	for _, bad := range []string{"?limit=nosuch", "?after=" + strings.Repeat("x", maxBucketTokenBytes+1)} {
		n := len(asked)
		if code, _, _ := get(t, c, con.srv.URL+"/console/ratelimits"+bad); code != http.StatusBadRequest || len(asked) != n {
			t.Errorf("%s: %d after asking the indexer %d times; want 400 without asking", bad[:min(len(bad), 20)], code, len(asked)-n)
		}
	}
}

func TestReloadReplacesOperatorKeys(t *testing.T) {
	tc := startConsole(t, nil, nil)
	removed := loggedIn(t, tc)
	kept := tc.client(t)
	if code, _ := tc.login(t, kept, "another-operator-key"); code != http.StatusSeeOther {
		t.Fatalf("login with the other key: %d", code)
	}
	cfg := &config.Config{}
	cfg.Gateway.Console.OperatorKeys = []string{"a-new-operator-key-after-reload", "another-operator-key"}
	tc.Update(cfg)
	if code, _ := tc.login(t, tc.client(t), testOperatorKey); code != http.StatusUnauthorized {
		t.Fatalf("a removed key still logs in: %d", code)
	}
	if code, _ := tc.login(t, tc.client(t), "a-new-operator-key-after-reload"); code != http.StatusSeeOther {
		t.Fatalf("the new key does not log in: %d", code)
	}
	// A session made with a removed key ends at once.
	if code, _, h := get(t, removed, tc.srv.URL+"/console/backends"); code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/console/login") {
		t.Fatalf("a session of a removed key after the reload: %d to %q", code, h.Get("Location"))
	}
	// One made with a kept key stays open; the
	// servers are the new file's.
	code, body, _ := get(t, kept, tc.srv.URL+"/console/catalog?server=forecast")
	if code != http.StatusBadRequest || !strings.Contains(body, "no virtual server") {
		t.Fatalf("a server removed by the reload: %d\n%s", code, body)
	}
	// It is named by its key's place in the new list (second): a session
	// once kept the place its key had at login (first), which now names
	// another operator's key, on every page and log line.
	if !strings.Contains(body, `<span class="who">operator key 2</span>`) || strings.Contains(body, "operator key 1") {
		t.Errorf("the kept key's session is not named operator key 2:\n%s", body)
	}
	if _, body, _ = get(t, kept, tc.srv.URL+"/console/catalog"); !strings.Contains(tc.log.String(), `msg="console: catalog viewed as" operator="operator key 2"`) {
		t.Errorf("the view is not logged as operator key 2:\n%s", tc.log.String())
	}
}

// TestSessionEndedByAReloadStaysEnded: docs/console.md, "Ending a
// session": a key removed by a reload ends its sessions at once. A
// session so ended must not open again when a later reload lists the key
// once more: a cookie an operator meant to end by removing the key comes
// back to life with it. A new login with the key opens a session.
func TestSessionEndedByAReloadStaysEnded(t *testing.T) {
	tc := startConsole(t, nil, nil)
	c := loggedIn(t, tc)
	if code, _, _ := get(t, c, tc.srv.URL+"/console/backends"); code != http.StatusOK {
		t.Fatalf("before the reload: %d", code)
	}
	without := &config.Config{}
	without.Gateway.Console = config.Console{Enabled: true, OperatorKeys: []string{"another-operator-key"}, ServiceToken: testServiceToken}
	tc.Update(without)
	if code, _, _ := get(t, c, tc.srv.URL+"/console/backends"); code != http.StatusSeeOther {
		t.Fatalf("a session of a removed key after the reload: %d, want 303 to the login", code)
	}
	with := &config.Config{}
	with.Gateway.Console = config.Console{Enabled: true, OperatorKeys: []string{"another-operator-key", testOperatorKey}, ServiceToken: testServiceToken}
	tc.Update(with)
	if code, _, _ := get(t, c, tc.srv.URL+"/console/backends"); code != http.StatusSeeOther {
		t.Fatalf("the session its key's removal ended opens again once the key is back: %d, want 303 to the login", code)
	}
	again := loggedIn(t, tc)
	tc.Update(with)
	if code, _, _ := get(t, again, tc.srv.URL+"/console/backends"); code != http.StatusOK {
		t.Fatalf("a new login with the key back, after a reload that keeps it: %d", code)
	}
}

// TestReloadKeepsTheOptimizerInForce: gateway.optimizer takes a restart
// in the gateway, so a reload that changes it leaves the console showing
// what the gateway serves: /mcp and a server without an optimizer setting
// of its own as they are. The console once showed the new file's, and
// called /mcp the optimizer view while clients still got every tool.
func TestReloadKeepsTheOptimizerInForce(t *testing.T) {
	tc := startConsole(t, nil, nil)
	c := loggedIn(t, tc)
	next := &config.Config{Servers: []config.Server{{Name: "forecast", Backends: []string{"alpha"}}}}
	next.Gateway.Console = config.Console{Enabled: true, OperatorKeys: []string{"another-operator-key", testOperatorKey}, ServiceToken: testServiceToken}
	next.Gateway.Optimizer.Enabled = true
	tc.Update(next)
	for _, page := range []string{"/console/catalog", "/console/catalog?server=forecast"} {
		code, body, _ := get(t, c, tc.srv.URL+page)
		if code != http.StatusOK || strings.Contains(body, `id="optimizer-view"`) {
			t.Errorf("%s after a reload of gateway.optimizer.enabled (restart-only): %d, shown as the optimizer view", page, code)
		}
	}
}

// TestConcurrentWrongGuessesStopAtTheLimit holds every guess's form body
// back until each request has either been answered or been let through
// to read its body (the server's 100 Continue): a check that does not
// reserve the attempt lets them all through, then all of them fail.
func TestConcurrentWrongGuessesStopAtTheLimit(t *testing.T) {
	tc := startConsole(t, nil, nil)
	const guesses = 40
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.ExpectContinueTimeout = time.Minute
	t.Cleanup(transport.CloseIdleConnections)
	type prepared struct {
		c    *http.Client
		csrf string
	}
	var forms []prepared
	for range guesses {
		c := tc.client(t)
		c.Transport = transport
		_, body, _ := get(t, c, tc.srv.URL+"/console/login")
		forms = append(forms, prepared{c, formValue(t, body, "csrf")})
	}
	release := make(chan struct{})
	arrived := make(chan struct{}, 2*guesses)
	codes := make(chan int, guesses)
	var wg sync.WaitGroup
	for _, f := range forms {
		form := url.Values{"csrf": {f.csrf}, "key": {"wrong-key"}}.Encode()
		wg.Go(func() {
			pr, pw := io.Pipe()
			go func() { <-release; _, _ = pw.Write([]byte(form)); pw.Close() }()
			ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{Got100Continue: func() { arrived <- struct{}{} }})
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, tc.srv.URL+"/console/login", pr)
			if err != nil {
				t.Error(err)
				return
			}
			req.ContentLength = int64(len(form))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Expect", "100-continue")
			resp, err := f.c.Do(req)
			if err != nil {
				t.Error(err)
				arrived <- struct{}{}
				return
			}
			if resp.StatusCode != http.StatusContinue {
				arrived <- struct{}{}
			}
			resp.Body.Close()
			codes <- resp.StatusCode
		})
	}
	// Every request is either answered or reading its body: let the
	// bodies go.
	for range guesses {
		<-arrived
	}
	close(release)
	wg.Wait()
	close(codes)
	tried := 0
	for code := range codes {
		switch code {
		case http.StatusUnauthorized:
			tried++
		case http.StatusTooManyRequests:
		default:
			t.Errorf("a wrong guess got %d", code)
		}
	}
	if tried > maxFailures {
		t.Fatalf("%d concurrent wrong guesses were checked, the limit is %d", tried, maxFailures)
	}
}

func TestRPCFailuresMapToHTTP(t *testing.T) {
	tc := startConsole(t, nil, nil)
	c := loggedIn(t, tc)
	code, body, h := get(t, c, tc.srv.URL+"/console/search?q=limited")
	if code != http.StatusTooManyRequests || h.Get("Retry-After") != "7" || !strings.Contains(body, "ResourceExhausted") {
		t.Errorf("a rate-limited search: %d, Retry-After %q\n%s", code, h.Get("Retry-After"), body)
	}
	code, body, h = get(t, c, tc.srv.URL+"/console/search?q=forbidden")
	if code != http.StatusForbidden || h.Get("Retry-After") != "" || !strings.Contains(body, "PermissionDenied") {
		t.Errorf("a refused search: %d, Retry-After %q\n%s", code, h.Get("Retry-After"), body)
	}
}

// TestQueryValuesMustBeUTF8: a form value that is not UTF-8 (a browser's
// form never sends one; a crafted link can) is a bad form value, 400,
// whichever field holds it. Such a value used to reach the services'
// client, whose protobuf encoding refuses it: the search, catalog and
// tasks pages answered 502 with a marshalling error, the events page 200
// with that error in place of the audit trail.
func TestQueryValuesMustBeUTF8(t *testing.T) {
	tc := startConsole(t, nil, nil)
	c := loggedIn(t, tc)
	for _, path := range []string{
		"/console/search?q=%ff", "/console/search?q=x&keywords=%ff", "/console/search?q=x&subject=%ff",
		"/console/catalog?cursor=%ff", "/console/tasks?cursor=%ff", "/console/task?id=t1.%ff",
		"/console/events?kind=%ff", "/console/events?subject=%ff", "/console/events?tool=%ff", "/console/events?outcome=%ff",
	} {
		if code, body, _ := get(t, c, tc.srv.URL+path); code != http.StatusBadRequest || strings.Contains(body, "marshaling") {
			t.Errorf("GET %s: %d, want 400\n%s", path, code, body)
		}
	}
}

func TestCrossSitePostsAreRefused(t *testing.T) {
	tc := startConsole(t, nil, nil)
	c := tc.client(t)
	_, body, _ := get(t, c, tc.srv.URL+"/console/login")
	form := url.Values{"csrf": {formValue(t, body, "csrf")}, "key": {testOperatorKey}}
	postWith := func(header map[string]string) int {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, tc.srv.URL+"/console/login", strings.NewReader(form.Encode()))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		for k, v := range header {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for name, h := range map[string]map[string]string{
		"another origin":   {"Origin": "http://evil.example"},
		"an opaque origin": {"Origin": "null"},
		"another port":     {"Origin": tc.srv.URL + "1"},
		"cross-site fetch": {"Sec-Fetch-Site": "cross-site"},
	} {
		if code := postWith(h); code != http.StatusForbidden {
			t.Errorf("a login POST with %s (%v): %d", name, h, code)
		}
	}
	if code := postWith(map[string]string{"Origin": tc.srv.URL, "Sec-Fetch-Site": "same-origin"}); code != http.StatusSeeOther {
		t.Fatalf("the console's own login form: %d", code)
	}
	// Through a proxy that ends TLS (an ingress) the page's origin is
	// https of the same host, which no other site can serve.
	_, body, _ = get(t, c, tc.srv.URL+"/console/login")
	form.Set("csrf", formValue(t, body, "csrf"))
	if code := postWith(map[string]string{"Origin": strings.Replace(tc.srv.URL, "http://", "https://", 1), "Sec-Fetch-Site": "same-origin"}); code != http.StatusSeeOther {
		t.Fatalf("the login form through a proxy that ended TLS: %d", code)
	}
	_, body, _ = get(t, c, tc.srv.URL+"/console/backends")
	req, _ := http.NewRequest(http.MethodPost, tc.srv.URL+"/console/logout", strings.NewReader(url.Values{"csrf": {formValue(t, body, "csrf")}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "http://evil.example")
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if code, _, _ := get(t, c, tc.srv.URL+"/console/backends"); resp.StatusCode != http.StatusForbidden || code != http.StatusOK {
		t.Fatalf("a cross-site logout: %d, then backends %d", resp.StatusCode, code)
	}
}

// eventsShow polls the events page until it shows want, and returns it.
func eventsShow(t *testing.T, tc *testConsole, c *http.Client, want string) string {
	t.Helper()
	var body string
	testkit.Eventually(t, fmt.Sprintf("the events page to show %q", want), 10*time.Second, func() error {
		_, body, _ = get(t, c, tc.srv.URL+"/console/events")
		if !strings.Contains(body, want) {
			return fmt.Errorf("the page:\n%s", body)
		}
		return nil
	})
	return body
}

func TestQuarantineIsALiveEvent(t *testing.T) {
	tc := startConsole(t, nil, nil)
	c := loggedIn(t, tc)
	eventsShow(t, tc, c, "alpha/echo is waiting for approval")
	tc.idx.setPending(false,
		&indexerv1.ToolDefinition{Backend: "alpha", Tool: "echo", ApprovedDigest: "aaaa", SeenDigest: "bbbb", Pending: true},
		&indexerv1.ToolDefinition{Backend: "alpha", Tool: "time", ApprovedDigest: "cccc", SeenDigest: "dddd", Pending: true})
	// The catalog change a quarantine makes wakes the poll.
	tc.agg.Notify(aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS)
	body := eventsShow(t, tc, c, "alpha/time is waiting for approval: seen digest dddd, approved cccc")
	if n := strings.Count(body, "alpha/echo is waiting for approval"); n != 1 {
		t.Fatalf("a quarantine already told of is told again (%d times):\n%s", n, body)
	}
	if !strings.Contains(body, `class="event-quarantine"`) || strings.Contains(body, `id="pending-cut"`) {
		t.Fatalf("the quarantine event or the pending table:\n%s", body)
	}
	tc.idx.setPending(true, &indexerv1.ToolDefinition{Backend: "alpha", Tool: "echo", ApprovedDigest: "aaaa", SeenDigest: "bbbb", Pending: true})
	if _, body, _ := get(t, c, tc.srv.URL+"/console/events"); !strings.Contains(body, "Only the first 100 pending definitions are shown") {
		t.Fatalf("a cut pending table does not say so:\n%s", body)
	}
	// A new tool of a pinned backend (pinning.newTools review) has no
	// approved digest: the event and the table say it is new.
	tc.idx.setPending(false, &indexerv1.ToolDefinition{Backend: "alpha", Tool: "refund_all", SeenDigest: "ffff", Pending: true})
	tc.agg.Notify(aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS)
	body = eventsShow(t, tc, c, "alpha/refund_all is a new tool waiting for approval: seen digest ffff")
	if !strings.Contains(body, "none: a new tool") {
		t.Fatalf("the pending table does not mark the new tool:\n%s", body)
	}
}

func TestApprovalsOfOneMessageAreOneEvent(t *testing.T) {
	tc := startConsole(t, nil, nil)
	c := loggedIn(t, tc)
	eventsShow(t, tc, c, "alpha/time approved at digest cccc")
	m := &indexerv1.WatchToolDefinitionsResponse{}
	for i := range 1000 {
		m.Approvals = append(m.Approvals, &indexerv1.ToolDefinitionDigest{Backend: "beta", Tool: "t" + strconv.Itoa(i), Digest: "eeee"})
	}
	tc.idx.SendToolDefinitions(m)
	eventsShow(t, tc, c, "1000 tool definitions approved: beta/t0, beta/t1")
	n := 0
	for _, e := range tc.events.recent() {
		if e.Kind == "approval" {
			n++
		}
	}
	if n != 2 {
		t.Fatalf("%d approval events, want 2 (one per message)", n)
	}
}

func TestViewAsGroupsAreLinesNotCommas(t *testing.T) {
	tc := startConsole(t, nil, func(cfg *config.Config) {
		yes := true
		cfg.Servers = append(cfg.Servers, config.Server{Name: "lean", Backends: []string{"alpha"}, Optimizer: &yes})
	})
	c := loggedIn(t, tc)
	dn := "cn=admins,ou=groups,dc=example,dc=org"
	// A DN with commas is one group, from the textarea (one per line) or
	// repeated parameters.
	for name, q := range map[string]url.Values{
		"textarea": {"subject": {"bob"}, "groups": {dn + "\r\n  admins \n\n"}},
		"repeated": {"subject": {"bob"}, "groups": {dn, "admins"}},
	} {
		code, body, _ := get(t, c, tc.srv.URL+"/console/catalog?"+q.Encode())
		if code != http.StatusOK || !strings.Contains(body, "bob (groups "+dn+"; admins)") || !strings.Contains(body, "admin_reset") {
			t.Errorf("%s: %d\n%s", name, code, body)
		}
		if !strings.Contains(body, ">"+dn+"\nadmins</textarea>") {
			t.Errorf("%s: the textarea does not show the groups one per line:\n%s", name, body)
		}
		if !strings.Contains(body, "groups=cn%3Dadmins%2Cou%3Dgroups%2Cdc%3Dexample%2Cdc%3Dorg&amp;groups=admins") {
			t.Errorf("%s: the tab links do not repeat the groups:\n%s", name, body)
		}
	}
	many := url.Values{}
	for i := range maxGroups {
		many.Add("groups", "g"+strconv.Itoa(i))
	}
	if code, _, _ := get(t, c, tc.srv.URL+"/console/catalog?"+many.Encode()); code != http.StatusOK {
		t.Errorf("%d groups (more than the old 64): %d", maxGroups, code)
	}
	many.Add("groups", "one-too-many")
	if code, body, _ := get(t, c, tc.srv.URL+"/console/catalog?"+many.Encode()); code != http.StatusBadRequest || !strings.Contains(body, "more than") {
		t.Errorf("%d groups: %d", maxGroups+1, code)
	}
	// A server with the optimizer on: the page says what its MCP clients
	// see, and labels the listing as its raw tools.
	_, body, _ := get(t, c, tc.srv.URL+"/console/catalog?server=lean")
	if !strings.Contains(body, "Showing <strong>/mcp/lean/raw</strong>") || !strings.Contains(body, `id="optimizer-view"`) ||
		!strings.Contains(body, "see only <code>find_tool</code> and <code>call_tool</code>") {
		t.Errorf("the optimizer server's view:\n%s", body)
	}
	_, body, _ = get(t, c, tc.srv.URL+"/console/catalog?server=forecast")
	if !strings.Contains(body, "Showing <strong>/mcp/forecast</strong>") || strings.Contains(body, `id="optimizer-view"`) {
		t.Errorf("a raw server's view:\n%s", body)
	}
	if !strings.Contains(tc.log.String(), `msg="console: catalog viewed as" operator="operator key 2" subject=bob groups="[`+dn+` admins]" server=/mcp`) {
		t.Errorf("no log line names the operator and the principal:\n%s", tc.log.String())
	}
}

func TestSearchKeywordsAndLog(t *testing.T) {
	tc := startConsole(t, nil, nil)
	c := loggedIn(t, tc)
	q := url.Values{"q": {"alpha"}, "keywords": {"time, zones\necho"}, "subject": {"carol"}, "server": {"forecast"}}
	code, body, _ := get(t, c, tc.srv.URL+"/console/search?"+q.Encode())
	if code != http.StatusOK || !strings.Contains(body, ">time, zones\necho</textarea>") {
		t.Fatalf("keywords one per line: %d\n%s", code, body)
	}
	if got := tc.idx.lastKeywords(); !slices.Equal(got, []string{"time, zones", "echo"}) {
		t.Fatalf("Search got keywords %q", got)
	}
	if !strings.Contains(tc.log.String(), `msg="console: search as" operator="operator key 2" subject=carol groups=[] server=/mcp/forecast`) {
		t.Errorf("no log line names the operator and the principal:\n%s", tc.log.String())
	}
}

// TestTrafficPage draws the hour: charts as SVG with a polyline per
// series, a row per backend, server and tool with its figures, the health
// timeline with its segments and marks, markup in names escaped, and
// live reloading only when asked.
func TestTrafficPage(t *testing.T) {
	tc := startConsole(t, nil, nil)
	c := loggedIn(t, tc)
	status, body, _ := get(t, c, tc.srv.URL+"/console/traffic")
	if status != http.StatusOK {
		t.Fatalf("status %d:\n%s", status, body)
	}
	for _, want := range []string{
		// Two replicas, summed: the second adds 5 calls of alpha_echo in
		// the last minute, and its sight of the reload is the same one.
		"summed over 2 aggregator replicas: <code>aggregator-0</code>, <code>aggregator-1</code>",
		// 595 calls of alpha_echo, 3 of the hostile tool, 1 error, 1
		// limited; p50 and p95 at most 4 ms; a minute without calls
		// leaves the latency lines a gap, their points marked.
		`<p id="summary">Calls: 595; failed: 1 (0.2%); refused by rate limits: 0;`,
		`<polyline class="series calls"`, `<polyline class="series p95"`, `<circle class="dot p95"`,
		`<th scope="row">alpha_echo</th>`, "<td>595</td><td>9.9</td><td>15</td>",
		"≤ 4 ms",
		`<rect class="state unhealthy"`, `<rect class="mark reload"`,
		"&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the traffic page lacks %q", want)
		}
	}
	if strings.Contains(body, hostileName) || strings.Contains(body, `http-equiv="refresh"`) {
		t.Error("the page shows unescaped markup, or reloads unasked")
	}
	// A mark in each of the two backends' lanes and one row: once.
	if n := strings.Count(body, "the configuration was reloaded"); n != 3 {
		t.Errorf("the reload both replicas saw appears %d times, want once in each lane and once as a row", n)
	}
	if _, body, _ = get(t, c, tc.srv.URL+"/console/traffic?live=1"); !strings.Contains(body, `http-equiv="refresh" content="10"`) {
		t.Error("live traffic does not reload")
	}
}

// TestTrafficShowsCallsLongerThanTheLastBucket: p50 and p95 are the bound
// of the latency bucket holding them, and the last bucket of an
// aggregator's histogram counts every longer call too (latency_overflow
// says how many). A quantile among those longer calls is shown as longer
// than the last bound, not as at most it; summed over the replicas.
func TestTrafficShowsCallsLongerThanTheLastBucket(t *testing.T) {
	bounds := []float64{1, 2, 65536}
	start := timestamppb.New(time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC))
	replica := func(name string, hist []int64, overflow int64) *aggregatorv1.GetTrafficResponse {
		return &aggregatorv1.GetTrafficResponse{Replica: name, LatencyBucketMs: bounds, Minutes: []*aggregatorv1.TrafficMinute{{Start: start,
			Cells: []*aggregatorv1.TrafficCell{{Dimension: "total", Calls: hist[0] + hist[1] + hist[2], LatencyHistogram: hist, LatencyOverflow: overflow}}}}}
	}
	for _, tc := range []struct {
		name     string
		replicas []*aggregatorv1.GetTrafficResponse
		p50, p95 string
	}{
		{"most calls longer", []*aggregatorv1.GetTrafficResponse{replica("a", []int64{0, 0, 3}, 2)}, "> 65536 ms", "> 65536 ms"},
		{"the slowest longer", []*aggregatorv1.GetTrafficResponse{replica("a", []int64{18, 0, 2}, 2)}, "≤ 1 ms", "> 65536 ms"},
		{"none longer", []*aggregatorv1.GetTrafficResponse{replica("a", []int64{0, 0, 2}, 0)}, "≤ 65536 ms", "≤ 65536 ms"},
		{"summed", []*aggregatorv1.GetTrafficResponse{replica("a", []int64{1, 0, 0}, 0), replica("b", []int64{0, 0, 2}, 2)}, "> 65536 ms", "> 65536 ms"},
	} {
		merged := mergeTraffic(tc.replicas)
		r := row("total", perName(merged.GetMinutes())[key{"total", ""}], merged.GetLatencyBucketMs())
		if r.P50 != tc.p50 || r.P95 != tc.p95 {
			t.Errorf("%s: p50 %q, p95 %q; want %q, %q", tc.name, r.P50, r.P95, tc.p50, tc.p95)
		}
	}
}

// TestHealthLanesStartFromThePreviousState draws a lane whose first change
// names the state it left in previous_state: the hour starts in that
// state, whatever the change's text says, and a lane without changes is
// in its backend's state now. The timeline once read the state out of
// the text ("was healthy").
func TestHealthLanesStartFromThePreviousState(t *testing.T) {
	from := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	at := func(m int) *timestamppb.Timestamp { return timestamppb.New(from.Add(time.Duration(m) * time.Minute)) }
	backends := []*aggregatorv1.Backend{
		{Name: "alpha", Health: aggregatorv1.BackendHealth_BACKEND_HEALTH_HEALTHY},
		{Name: "beta", Health: aggregatorv1.BackendHealth_BACKEND_HEALTH_DEGRADED},
	}
	events := []*aggregatorv1.HealthEvent{
		{Time: at(20), Backend: "alpha", State: "unhealthy", PreviousState: "degraded", Detail: "probe failed"},
		{Time: at(40), Backend: "alpha", State: "healthy", PreviousState: "unhealthy"},
	}
	lanes := healthLanes(backends, events, from, from.Add(time.Hour))
	if len(lanes) != 2 {
		t.Fatalf("%d lanes", len(lanes))
	}
	var got []string
	for _, s := range lanes[0].Segments {
		got = append(got, s.State)
	}
	if want := []string{"degraded", "unhealthy", "healthy"}; !slices.Equal(got, want) {
		t.Errorf("alpha's segments %v, want %v", got, want)
	}
	if s := lanes[1].Segments; len(s) != 1 || s[0].State != "degraded" {
		t.Errorf("beta's segments %+v, want one, degraded", s)
	}
}

// TestMergeKeepsEachReplicasOwnChanges merges two replicas that each saw
// a backend fail, recover and fail again within a minute, and two
// reloads half a minute apart: every change appears once, the second
// failure and the second reload included. The merge once took any
// repeat of a change within a minute for another replica's report of it,
// so the lane ended healthy.
func TestMergeKeepsEachReplicasOwnChanges(t *testing.T) {
	from := time.Date(2026, 12, 6, 10, 0, 0, 0, time.UTC)
	at := func(s int) *timestamppb.Timestamp {
		return timestamppb.New(from.Add(30*time.Minute + time.Duration(s)*time.Second))
	}
	seen := func(skew int) []*aggregatorv1.HealthEvent {
		return []*aggregatorv1.HealthEvent{
			{Time: at(skew), Backend: "alpha", State: "unhealthy", PreviousState: "healthy", Detail: "was healthy"},
			{Time: at(5 + skew), State: "reload", Detail: "the configuration was reloaded"},
			{Time: at(10 + skew), Backend: "alpha", State: "healthy", PreviousState: "unhealthy", Detail: "was unhealthy"},
			{Time: at(20 + skew), Backend: "alpha", State: "unhealthy", PreviousState: "healthy", Detail: "was healthy"},
			{Time: at(35 + skew), State: "reload", Detail: "the configuration was reloaded"},
		}
	}
	merged := mergeTraffic([]*aggregatorv1.GetTrafficResponse{
		{Replica: "aggregator-0", HealthEvents: seen(0)},
		{Replica: "aggregator-1", HealthEvents: seen(1)},
	})
	var got []string
	for _, e := range merged.GetHealthEvents() {
		got = append(got, e.GetState())
	}
	if want := []string{"unhealthy", "reload", "healthy", "unhealthy", "reload"}; !slices.Equal(got, want) {
		t.Fatalf("merged changes %v, want %v", got, want)
	}
	lanes := healthLanes([]*aggregatorv1.Backend{{Name: "alpha", Health: aggregatorv1.BackendHealth_BACKEND_HEALTH_UNHEALTHY}},
		merged.GetHealthEvents(), from, from.Add(time.Hour))
	if segs := lanes[0].Segments; segs[len(segs)-1].State != "unhealthy" {
		t.Errorf("the lane ends %q although the backend failed again", segs[len(segs)-1].State)
	}
}

// TestOptimizerViewNamesRunCode: with code mode on (Discover's
// code_mode; aggregator.codeMode.enabled or the server's codeMode), MCP
// clients of an optimizer view list run_code beside find_tool and
// call_tool. The catalog page and the server picker must say so, not
// that they see "only find_tool and call_tool" (which the page still
// says where code mode is off: TestViewAsGroupsAreLinesNotCommas).
func TestOptimizerViewNamesRunCode(t *testing.T) {
	yes, no := true, false
	tc := startConsoleServing(t, nil, func(cfg *config.Config) {
		cfg.Aggregator.CodeMode.Enabled = true
		cfg.Servers[0].Optimizer = &yes // forecast
		cfg.Servers = append(cfg.Servers, config.Server{Name: "plain", Backends: []string{"alpha"}, Optimizer: &yes, CodeMode: &no})
	}, nil, func(agg *testkit.FakeAggregator) { agg.Discovery = &aggregatorv1.DiscoverResponse{CodeMode: true} })
	c := loggedIn(t, tc)
	_, body, _ := get(t, c, tc.srv.URL+"/console/catalog?server=forecast")
	note := regexp.MustCompile(`(?s)<p id="optimizer-view">.*?</p>`).FindString(body)
	if !strings.Contains(note, "<code>run_code</code>") || strings.Contains(note, "only <code>find_tool</code> and <code>call_tool</code>") {
		t.Errorf("code mode on: the optimizer note does not name run_code: %s", note)
	}
	if !strings.Contains(body, "forecast (/mcp/forecast: find_tool, call_tool and run_code)") || !strings.Contains(body, "plain (/mcp/plain: find_tool and call_tool)") {
		t.Errorf("the server picker does not say which servers offer run_code:\n%s", body)
	}
}
