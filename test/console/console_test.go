package console

import (
	"fmt"
	"math"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/demobackend"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/browser"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// sueCalls is how many tools/call sue makes before the pages are read:
// each takes one token of her bucket (leases of one token, at 1/h).
const sueCalls = 3

// TestConsoleInBrowser logs in to the console with the keyboard and
// checks every page against the running system, on a desktop and a
// phone's screen, with a screenshot of each.
func TestConsoleInBrowser(t *testing.T) {
	s := startStack(t)
	// Traffic the pages must show: sue's calls through the support server
	// (audit events, tokens of her bucket).
	sue := connectAs(t, s.c.MCPURL+"/support", sueKey)
	for i := range sueCalls {
		res, err := sue.CallTool(t.Context(), &mcp.CallToolParams{Name: "tickets_echo", Arguments: map[string]any{"q": fmt.Sprintf("order %d", i)}})
		if err != nil || res.IsError {
			t.Fatalf("sue's call %d: %+v, %v", i, res, err)
		}
	}
	b := browser.New(t)

	steps := []struct {
		name  string
		check func(t *testing.T, s *stack, b *browser.Browser)
	}{
		{"login", checkLogin},
		{"backends", checkBackends},
		{"catalog", checkCatalog},
		{"search", checkSearch},
		{"events", checkEvents},
		{"traffic", checkTraffic},
		{"ratelimits", checkRateLimits},
		{"tasks", checkTasks},
		{"logout", checkLogout},
	}
	for _, step := range steps {
		// Every page needs the login; a failed step stops the rest, whose
		// failures would only be its echo.
		if !t.Run(step.name, func(t *testing.T) { step.check(t, s, b.With(t)) }) {
			t.Fatalf("step %s failed; the later steps depend on it", step.name)
		}
	}
}

// checkLogin: a page opened without a session goes to the login form; the
// operator reaches the key field with Tab, types the key and submits it
// with Enter, and lands on the page first asked for. A wrong key is
// refused on the same form.
func checkLogin(t *testing.T, s *stack, b *browser.Browser) {
	b.Navigate(s.console + "/backends")
	b.WaitText("h1", "Log in")
	if loc := b.Location(); !strings.HasPrefix(loc, s.console+"/login") {
		t.Fatalf("without a session at %s, want the login page", loc)
	}
	b.CheckPhone("login")
	b.Screenshot("login")

	b.TabTo("#key", 10)
	b.Type("not-the-operator-key\r")
	b.WaitText("[role=alert]", "not an operator key")
	b.Screenshot("login-refused")

	b.TabTo("#key", 10)
	b.Type(operatorKey + "\r")
	b.WaitText("h1", "Backends")
	if loc := b.Location(); loc != s.console+"/backends" {
		t.Fatalf("after login at %s, want the backends page asked for first", loc)
	}
}

// backendRow is one row of the backends page.
type backendRow struct {
	Name, Health, Era, URL, LastError string
}

// checkBackends: the page lists the backends ListBackends reports, with
// their health, era and URL; the offline backend is unhealthy with its
// last error.
func checkBackends(t *testing.T, s *stack, b *browser.Browser) {
	// The offline backend has been found down (unhealthy, with its last
	// error), the others up, before the page is compared with the API.
	var want *aggregatorv1.ListBackendsResponse
	testkit.Eventually(t, "every backend probed", time.Minute, func() error {
		var err error
		if want, err = s.aggregator.ListBackends(t.Context(), &aggregatorv1.ListBackendsRequest{}); err != nil {
			return err
		}
		for _, bk := range want.GetBackends() {
			wantHealth := aggregatorv1.BackendHealth_BACKEND_HEALTH_HEALTHY
			if bk.GetName() == s.offline {
				wantHealth = aggregatorv1.BackendHealth_BACKEND_HEALTH_UNHEALTHY
			}
			if bk.GetHealth() != wantHealth || (bk.GetName() == s.offline) != (bk.GetLastError() != "") {
				return fmt.Errorf("%s: %v, %q", bk.GetName(), bk.GetHealth(), bk.GetLastError())
			}
		}
		return nil
	})
	b.Navigate(s.console + "/backends")
	b.WaitText("h1", "Backends")
	checkSkipLink(t, b)
	rows := browser.Eval[[]backendRow](b, `Array.from(document.querySelectorAll("#backends tbody tr[data-backend]"), r => ({
		Name: r.dataset.backend, Health: r.cells[1].innerText, Era: r.cells[2].innerText, URL: r.cells[6].innerText, LastError: r.cells[7].innerText}))`)
	if len(rows) != len(want.GetBackends()) {
		t.Fatalf("the page lists %d backends (%+v), ListBackends %d", len(rows), rows, len(want.GetBackends()))
	}
	for i, bk := range want.GetBackends() {
		r := rows[i]
		health := strings.ToLower(strings.TrimPrefix(bk.GetHealth().String(), "BACKEND_HEALTH_"))
		if r.Name != bk.GetName() || r.Health != health || r.URL != bk.GetUrl() {
			t.Errorf("row %d: %+v; ListBackends: %s %s %s", i, r, bk.GetName(), health, bk.GetUrl())
		}
		switch {
		case bk.GetName() == s.offline:
			if health != "unhealthy" || r.Era != "not connected" || r.LastError == "—" || !strings.Contains(r.LastError, firstWords(bk.GetLastError())) {
				t.Errorf("offline backend: %+v; want unhealthy, not connected, its last error %q", r, bk.GetLastError())
			}
		case !strings.HasPrefix(r.Era, "Modern") && !strings.HasPrefix(r.Era, "Legacy") || r.LastError != "—":
			t.Errorf("%s: era %q, last error %q; want an era and no error", r.Name, r.Era, r.LastError)
		}
	}
	if !slices.ContainsFunc(rows, func(r backendRow) bool { return r.Name == "tickets" }) {
		t.Errorf("tickets is not listed: %+v", rows)
	}
	// The catalog version shown is the system's.
	b.WaitText("main", fmt.Sprintf("Catalog version %d", want.GetCatalogVersion()))
	b.CheckPhone("backends")
	b.Screenshot("backends")
}

// checkSkipLink: the first Tab on a page reaches the skip link, shown
// with a focus ring, and Enter on it moves the focus to the page's
// content, past the navigation.
func checkSkipLink(t *testing.T, b *browser.Browser) {
	t.Helper()
	b.TabTo("a.skip", 1)
	b.Press("\r")
	b.WaitFor("focus on the content", `document.activeElement === document.querySelector("main")`)
}

// firstWords is the start of an error text, to find it in a table cell
// that may wrap it.
func firstWords(s string) string {
	f := strings.Fields(s)
	return strings.Join(f[:min(3, len(f))], " ")
}

// checkCatalog: "view as principal" shows what that principal's MCP
// client lists, and no more: tickets_add is visible to erin through the
// support server and not to sue. The form is filled and sent with the
// keyboard.
func checkCatalog(t *testing.T, s *stack, b *browser.Browser) {
	b.Navigate(s.console + "/catalog")
	b.WaitText("h1", "Catalog")
	checkSkipLink(t, b)
	// Choose the support server with the arrow keys, then name sue.
	b.TabTo("#server", 20)
	b.Press(kbArrowDown)
	if v := browser.Eval[string](b, `document.querySelector("#server").value`); v != "support" {
		t.Fatalf("server chosen with the arrow key: %q, want support", v)
	}
	b.TabTo("#subject", 5)
	b.Type("sue")
	b.TabTo("#groups", 5)
	// Groups are one per line (a textarea): Enter is a new line there,
	// so the form is sent from its button.
	b.Type("support")
	b.TabTo("#view-submit", 3)
	b.Press("\r")
	b.WaitText("#viewing", "sue")
	sueSees := itemNames(b)
	viaMCP := harness.ToolNames(t, connectAs(t, s.c.MCPURL+"/support", sueKey))
	if !slices.Equal(sueSees, viaMCP) || !slices.Contains(sueSees, "tickets_echo") || slices.Contains(sueSees, "tickets_add") {
		t.Fatalf("as sue on support the console shows %v; her MCP client lists %v (want tickets_echo, not tickets_add)", sueSees, viaMCP)
	}
	b.CheckPhone("catalog-sue")
	b.Screenshot("catalog-sue")

	b.Navigate(s.console + "/catalog?" + url.Values{"server": {"support"}, "subject": {"erin"}, "groups": {"eng"}}.Encode())
	b.WaitText("#viewing", "erin")
	erinSees := itemNames(b)
	viaMCP = harness.ToolNames(t, connectAs(t, s.c.MCPURL+"/support", erinKey))
	if !slices.Equal(erinSees, viaMCP) || !slices.Contains(erinSees, "tickets_add") {
		t.Fatalf("as erin on support the console shows %v; her MCP client lists %v (want tickets_add)", erinSees, viaMCP)
	}
	b.Screenshot("catalog-erin")
}

// kbArrowDown is the arrow key (chromedp's kb.ArrowDown).
const kbArrowDown = "\u0301"

// itemNames are the names in the catalog page's table, sorted (the MCP
// listing's order).
func itemNames(b *browser.Browser) []string {
	names := browser.Eval[[]string](b, `Array.from(document.querySelectorAll("#items tbody tr th code"), c => c.innerText)`)
	slices.Sort(names)
	return names
}

// hitRow is one hit of the search page.
type hitRow struct {
	Tool, Score string
}

// checkSearch: the playground runs find_tool's search for erin and shows
// the hits and scores the indexer's Search gives for her, a known tool
// first.
func checkSearch(t *testing.T, s *stack, b *browser.Browser) {
	const query = "echo the arguments back"
	b.Navigate(s.console + "/search")
	b.WaitText("h1", "Search")
	checkSkipLink(t, b)
	b.TabTo("#q", 10)
	b.Type(query)
	b.TabTo("#subject", 10)
	b.Type("erin")
	b.TabTo("#groups", 5)
	b.Type("eng")
	b.TabTo("#search-submit", 3)
	b.Press("\r")
	b.WaitFor("hits shown", `document.querySelectorAll("#hits tbody tr[data-tool]").length > 0`)
	rows := browser.Eval[[]hitRow](b, `Array.from(document.querySelectorAll("#hits tbody tr[data-tool]"), r => ({Tool: r.dataset.tool, Score: r.cells[2].innerText}))`)
	want, err := s.indexer.Search(t.Context(), &indexerv1.SearchRequest{
		Principal: &commonv1.Principal{Subject: "erin", Groups: []string{"eng"}}, Query: query, Limit: optimizerLimit, Explain: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(want.GetHits()) {
		t.Fatalf("the page shows %d hits %+v, Search %d", len(rows), rows, len(want.GetHits()))
	}
	for i, h := range want.GetHits() {
		score, err := strconv.ParseFloat(rows[i].Score, 64)
		if rows[i].Tool != h.GetName() || err != nil || math.Abs(score-h.GetScore()) > 0.0001 {
			t.Errorf("hit %d: %+v; Search: %s %.4f", i+1, rows[i], h.GetName(), h.GetScore())
		}
	}
	// And they are what erin's own find_tool answers, at the configured
	// gateway.optimizer.limit.
	found := findTool(t, connectAs(t, s.c.MCPURL+"/optimized", erinKey), query)
	var shown []string
	for _, r := range rows {
		shown = append(shown, r.Tool)
	}
	if !slices.Equal(shown, found) || len(found) > optimizerLimit {
		t.Errorf("the page shows %v, erin's find_tool answers %v (limit %d)", shown, found, optimizerLimit)
	}
	if top := rows[0].Tool; top != "tickets_echo" && top != "docs_echo" {
		t.Errorf("top hit %s for %q, want an echo tool", top, query)
	}
	// The explanation is there: the parts of the top score.
	if parts := b.Text("#hits tbody tr[data-tool] .parts"); !strings.Contains(parts, "echo") {
		t.Errorf("the top hit's parts %q do not name the matched word", parts)
	}
	b.CheckPhone("search")
	b.Screenshot("search")
}

var catalogVersion = regexp.MustCompile(`tools changed \(catalog version (\d+)\)`)

// checkEvents: on the live page, a tool added to a backend appears as a
// list_changed event at the catalog version the aggregator then reports,
// without the operator reloading; the audit tail shows sue's calls.
func checkEvents(t *testing.T, s *stack, b *browser.Browser) {
	b.Navigate(s.console + "/events")
	b.WaitText("h1", "events")
	checkSkipLink(t, b)
	before := len(catalogVersion.FindAllString(b.Text("#events"), -1))
	// Live mode, by the keyboard: follow the link that turns it on.
	b.TabTo(`a[href*="live=1"]`, 20)
	b.Press("\r")
	b.WaitFor("live mode", `location.search.includes("live=1")`)

	s.c.AddTool(t, "docs", demobackend.ToolSpec{Name: "lookup", Description: "Look an order up by its number.", Behaviour: demobackend.BehaviourEcho})
	var version uint64
	testkit.Eventually(t, "the catalog has docs_lookup", time.Minute, func() error {
		resp, err := s.aggregator.ListTools(t.Context(), &aggregatorv1.ListToolsRequest{Principal: &commonv1.Principal{Subject: "erin", Groups: []string{"eng"}}})
		if err != nil {
			return err
		}
		for _, tool := range resp.GetTools() {
			if tool.GetName() == "docs_lookup" {
				version = resp.GetCatalogVersion()
				return nil
			}
		}
		return fmt.Errorf("not listed at version %d", resp.GetCatalogVersion())
	})
	// The page reloads itself (every 10 s): wait for the event there.
	b.WaitFor("a new list_changed event on the live page", fmt.Sprintf(
		`(() => { const e = document.querySelector("#events"); return !!e && (e.innerText.match(/tools changed \(catalog version \d+\)/g) || []).length > %d; })()`, before))
	got := catalogVersion.FindAllStringSubmatch(b.Text("#events"), -1)
	if newest, _ := strconv.ParseUint(got[0][1], 10, 64); newest != version {
		t.Errorf("newest list_changed event at catalog version %d, the aggregator lists docs_lookup at %d (events %v)", newest, version, got)
	}
	if !strings.Contains(b.Text("#events tbody tr"), "list_changed") {
		t.Errorf("the newest event is not a list_changed: %q", b.Text("#events tbody tr"))
	}

	// The audit tail: sue's calls of tickets_echo, as the indexer stores them.
	want, err := s.indexer.QueryAuditEvents(t.Context(), &indexerv1.QueryAuditEventsRequest{Subject: "sue", Tool: "tickets_echo", Kind: "tool_call"})
	if err != nil || len(want.GetEvents()) < sueCalls {
		t.Fatalf("sue's audit events: %d, %v; want %d", len(want.GetEvents()), err, sueCalls)
	}
	audit := b.Texts("#audit-events tbody tr")
	n := 0
	for _, row := range audit {
		if strings.Contains(row, "sue") && strings.Contains(row, "tickets_echo") && strings.Contains(row, "tool_call") && strings.Contains(row, "ok") {
			n++
		}
	}
	if n != len(want.GetEvents()) {
		t.Errorf("the audit tail shows %d of sue's %d tickets_echo calls: %q", n, len(want.GetEvents()), audit)
	}
	b.CheckPhone("events")
	b.Screenshot("events")
}

// checkTraffic: the traffic page charts sue's calls of tickets_echo as
// the aggregator counted them (its own GetTraffic, read as the console's
// credential), with a row for the tool, its server and its backend, and a
// health lane per backend; the audit search narrows the trail to a tool
// and a time range.
func checkTraffic(t *testing.T, s *stack, b *browser.Browser) {
	b.Navigate(s.console + "/traffic")
	b.WaitText("h1", "Traffic")
	checkSkipLink(t, b)
	want, err := s.aggregator.GetTraffic(t.Context(), &aggregatorv1.GetTrafficRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var calls int64
	for _, m := range want.GetMinutes() {
		for _, c := range m.GetCells() {
			if c.GetDimension() == "tool" && c.GetName() == "tickets_echo" {
				calls += c.GetCalls()
			}
		}
	}
	if calls < sueCalls {
		t.Fatalf("the aggregator counted %d calls of tickets_echo, want at least %d", calls, sueCalls)
	}
	row := b.Text("#traffic-tools tbody tr")
	if !strings.HasPrefix(row, "tickets_echo") || !strings.Contains(row, strconv.FormatInt(calls, 10)) {
		t.Errorf("the busiest tool's row: %q, want tickets_echo with %d calls", row, calls)
	}
	if servers := b.Text("#traffic-servers"); !strings.Contains(servers, "support") {
		t.Errorf("no row for the support server: %q", servers)
	}
	for _, sel := range []string{".chart polyline.series.calls", ".chart polyline.series.p95", "#traffic-backends svg.spark polyline", "#traffic-health rect.state"} {
		if n := browser.Eval[int](b, fmt.Sprintf(`document.querySelectorAll(%q).length`, sel)); n == 0 {
			t.Errorf("the page draws no %s", sel)
		}
	}
	b.CheckPhone("traffic")
	b.Screenshot("traffic")

	// The audit search: sue's calls of tickets_echo in the last hour.
	since := time.Now().UTC().Add(-time.Hour).Format("2006-01-02T15:04")
	b.Navigate(s.console + "/events?" + url.Values{"tool": {"tickets_echo"}, "since": {since}}.Encode())
	b.WaitText("h1", "events")
	rows := b.Texts("#audit-events tbody tr")
	if len(rows) < sueCalls {
		t.Errorf("the audit search for tickets_echo found %d events: %q", len(rows), rows)
	}
	for _, r := range rows {
		if !strings.Contains(r, "tickets_echo") {
			t.Errorf("a row of another tool: %q", r)
		}
	}
	b.Screenshot("audit-search")
}

// checkRateLimits: the page shows the configured limit, and sue's bucket
// with the tokens her calls left, as ListRateLimitBuckets reads them.
func checkRateLimits(t *testing.T, s *stack, b *browser.Browser) {
	b.Navigate(s.console + "/ratelimits")
	b.WaitText("h1", "Rate limits")
	checkSkipLink(t, b)
	if limits := b.Text("#limits tbody"); !strings.Contains(limits, limitName) || !strings.Contains(limits, "principal") || !strings.Contains(limits, "1/h") {
		t.Errorf("configured limits %q, want %s per principal at 1/h", limits, limitName)
	}
	key := limitName + "|principal|sue"
	want, err := s.indexer.ListRateLimitBuckets(t.Context(), &indexerv1.ListRateLimitBucketsRequest{Limit: limitName})
	if err != nil {
		t.Fatal(err)
	}
	var bucket *indexerv1.RateLimitBucket
	for _, bk := range want.GetBuckets() {
		if bk.GetKey() == key {
			bucket = bk
		}
	}
	if bucket == nil || math.Abs(bucket.GetTokens()-(limitBurst-sueCalls)) > 0.01 {
		t.Fatalf("ListRateLimitBuckets: %v; want %s with %d tokens left", want, key, limitBurst-sueCalls)
	}
	type row struct{ Key, Tokens, Burst, Rate string }
	rows := browser.Eval[[]row](b, `Array.from(document.querySelectorAll("#buckets tbody tr"), r => ({Key: r.cells[0].innerText, Tokens: r.cells[1].innerText, Burst: (r.cells[2] || {}).innerText, Rate: (r.cells[3] || {}).innerText}))`)
	i := slices.IndexFunc(rows, func(r row) bool { return r.Key == key })
	if i < 0 {
		t.Fatalf("sue's bucket %s is not on the page: %+v (note: %q)", key, rows, b.Texts("#state-note"))
	}
	tokens, err := strconv.ParseFloat(rows[i].Tokens, 64)
	// At 1/h the bucket refills by less than 0.01 token in 30 s.
	if err != nil || math.Abs(tokens-bucket.GetTokensNow()) > 0.02 || rows[i].Burst != strconv.Itoa(limitBurst) || rows[i].Rate != "1/h" {
		t.Errorf("sue's bucket on the page: %+v; ListRateLimitBuckets: %.2f tokens now, burst %d", rows[i], bucket.GetTokensNow(), bucket.GetBurst())
	}
	b.CheckPhone("ratelimits")
	b.Screenshot("ratelimits")
}

// checkLogout: the logout button, reached with Tab and pressed with
// Enter, ends the session: the pages ask for the login again.
func checkLogout(t *testing.T, s *stack, b *browser.Browser) {
	b.Navigate(s.console + "/backends")
	b.WaitText("h1", "Backends")
	b.TabTo(".logout button", 20)
	b.Press("\r")
	b.WaitText("h1", "Log in")
	b.Navigate(s.console + "/catalog")
	b.WaitText("h1", "Log in")
}

// findTool returns the names find_tool answers for query.
func findTool(t *testing.T, cs *mcp.ClientSession, query string) []string {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "find_tool", Arguments: map[string]any{"tool_description": query}})
	if err != nil || res.IsError {
		t.Fatalf("find_tool(%q): %v, %v", query, res, err)
	}
	found, _ := res.StructuredContent.(map[string]any)
	hits, _ := found["tools"].([]any)
	var names []string
	for _, h := range hits {
		names = append(names, h.(map[string]any)["name"].(string))
	}
	return names
}
