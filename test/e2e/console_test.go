package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

const (
	consoleOperatorKey = "console-operator-" + "5f6a5f6a5f6a"
	consoleToken       = "console-" + "7b8c7b8c7b8c7b8c"
	// consolePolicy hides shop_refund from mallory only.
	consolePolicy = `
permit (principal, action, resource);
forbid (principal == User::"mallory", action, resource == Tool::"shop_refund");
`
)

// consoleBrowser is an operator's browser: a cookie jar, redirects not
// followed (the test checks them).
type consoleBrowser struct {
	t    *testing.T
	base string
	http *http.Client
}

func (b *consoleBrowser) do(method, path string, form url.Values) (int, string, http.Header) {
	b.t.Helper()
	var resp *http.Response
	var err error
	if method == http.MethodPost {
		resp, err = b.http.PostForm(b.base+path, form)
	} else {
		resp, err = b.http.Get(b.base + path)
	}
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		b.t.Fatal(err)
	}
	return resp.StatusCode, string(body), resp.Header
}

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// login posts key through the login form.
func (b *consoleBrowser) login(key string) (int, string) {
	b.t.Helper()
	_, page, _ := b.do(http.MethodGet, "/console/login", nil)
	m := csrfField.FindStringSubmatch(page)
	if m == nil {
		b.t.Fatalf("the login page has no CSRF field:\n%s", page)
	}
	code, _, h := b.do(http.MethodPost, "/console/login", url.Values{"csrf": {m[1]}, "key": {key}})
	return code, h.Get("Location")
}

// page fetches a console page that must answer 200.
func (b *consoleBrowser) page(path string) string {
	b.t.Helper()
	code, body, _ := b.do(http.MethodGet, path, nil)
	if code != http.StatusOK {
		b.t.Fatalf("GET %s: %d\n%s", path, code, body)
	}
	return body
}

// TestConsoleAgainstTheRunningSystem: the real processes with the console
// on the gateway's ops port. An operator logs in with an operator key over
// HTTP (a wrong key does not), and every page shows the running system:
// the backends with their health, era and URL; the catalog of a virtual
// server as two principals, one of whom the Cedar policy hides a tool
// from; the search playground's explained hits for each; a tool call in
// the audit tail; the configured rate limit. The console is not served
// on the MCP port.
func TestConsoleAgainstTheRunningSystem(t *testing.T) {
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.cedar")
	if err := os.WriteFile(policy, []byte(consolePolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	aggregatorToken := "aggregator-" + strings.Repeat("c9", 16)
	c := harness.Start(t, harness.Options{
		Backends: []harness.Backend{{Name: "shop", Spec: pinnedSpec}, {Name: "notes"}},
		Configure: func(cfg *config.Config) {
			cfg.ServiceAuth.Credentials = append(cfg.ServiceAuth.Credentials,
				config.ServiceCredential{Name: "aggregator", Token: aggregatorToken, AssertPrincipals: true, Allow: config.AggregatorMethods},
				config.ServiceCredential{Name: "console", Token: consoleToken, Operator: true, AssertPrincipals: true, Allow: config.ConsoleMethods})
			cfg.Aggregator.Pinning.Indexer = config.Endpoint{Address: cfg.Indexer.Listen, Token: aggregatorToken}
			cfg.Aggregator.Authz.PolicyFile = policy
			cfg.Audit = config.Audit{Database: config.AuditDatabase{Enabled: true}}
			cfg.Servers = []config.Server{{Name: "shop-only", Backends: []string{"shop"}}}
			cfg.RateLimits = config.RateLimits{Limits: []config.RateLimit{{Name: "console-lookups", Per: "principal", Rate: "100/s",
				Match: config.RateLimitMatch{Tools: []string{"shop_lookup"}}, Methods: []string{"tools/call"}}}}
			cfg.Gateway.OpsListen = harness.FreeAddr(t)
			cfg.Gateway.Console = config.Console{Enabled: true, OperatorKeys: []string{consoleOperatorKey}, ServiceToken: consoleToken}
		},
	})
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	b := &consoleBrowser{t: t, base: "http://" + c.Config.Gateway.OpsListen,
		http: &http.Client{Jar: jar, Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}

	// Not on the MCP port.
	mcpPort := &consoleBrowser{t: t, base: "http://" + c.Config.Gateway.Listen, http: b.http}
	if code, body, _ := mcpPort.do(http.MethodGet, "/console/login", nil); code == http.StatusOK || strings.Contains(body, "Operator key") {
		t.Fatalf("the MCP port serves the console: %d\n%s", code, body)
	}
	// Nothing without logging in; a wrong key does not log in.
	if code, _, h := b.do(http.MethodGet, "/console/backends", nil); code != http.StatusSeeOther || !strings.HasPrefix(h.Get("Location"), "/console/login") {
		t.Fatalf("backends without a session: %d to %q", code, h.Get("Location"))
	}
	if code, _ := b.login("not-" + consoleOperatorKey); code != http.StatusUnauthorized {
		t.Fatalf("a wrong key: %d", code)
	}
	if code, loc := b.login(consoleOperatorKey); code != http.StatusSeeOther || loc != "/console/backends" {
		t.Fatalf("the operator key: %d to %q", code, loc)
	}

	// Backends: both, healthy, in their era, with the URL an operator sees.
	harness.Eventually(t, "the backends page shows both backends healthy", 30*time.Second, func() error {
		body := b.page("/console/backends")
		for _, name := range []string{"shop", "notes"} {
			row := regexp.MustCompile(`(?s)<tr data-backend="` + name + `"[^>]*>.*?</tr>`).FindString(body)
			if !strings.Contains(row, ">healthy<") || !strings.Contains(row, "Modern") || !strings.Contains(row, c.BackendURLs[name]) {
				return fmt.Errorf("backend %s: %q", name, row)
			}
		}
		return nil
	})

	// Catalog: the virtual server as alice and as mallory.
	asAlice := b.page("/console/catalog?server=shop-only&subject=alice")
	asMallory := b.page("/console/catalog?server=shop-only&subject=mallory")
	if !strings.Contains(asAlice, "<code>shop_refund</code>") || !strings.Contains(asAlice, "<code>shop_lookup</code>") || strings.Contains(asAlice, "notes_echo") {
		t.Fatalf("shop-only as alice:\n%s", asAlice)
	}
	if strings.Contains(asMallory, "shop_refund") || !strings.Contains(asMallory, "<code>shop_lookup</code>") {
		t.Fatalf("shop-only as mallory shows what the policy hides from her:\n%s", asMallory)
	}
	if whole := b.page("/console/catalog?subject=alice"); !strings.Contains(whole, "<code>notes_echo</code>") {
		t.Fatalf("/mcp as alice lacks notes_echo:\n%s", whole)
	}

	// Search: alice finds shop_refund, with its score's parts; mallory
	// does not.
	harness.Eventually(t, "the search playground finds shop_refund for alice", 60*time.Second, func() error {
		body := b.page("/console/search?q=refund+an+order&subject=alice")
		if !strings.Contains(body, `data-tool="shop_refund"`) || !strings.Contains(body, "exact <code>refund</code>") {
			return fmt.Errorf("no explained shop_refund hit")
		}
		return nil
	})
	if body := b.page("/console/search?q=refund+an+order&subject=mallory"); strings.Contains(body, `data-tool="shop_refund"`) {
		t.Fatalf("mallory finds shop_refund:\n%s", body)
	}

	// Events: the catalog watch is open, and a tool call reaches the
	// audit tail.
	cs := harness.Connect(t, c.MCPURL, harness.Modern)
	if res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "shop_lookup", Arguments: map[string]any{"order": "console-1"}}); err != nil || res.IsError {
		t.Fatalf("shop_lookup: %v %v", res, err)
	}
	harness.Eventually(t, "the events page shows the call", 30*time.Second, func() error {
		body := b.page("/console/events?kind=tool_call")
		if !strings.Contains(body, "catalog watch open at version") {
			return fmt.Errorf("no catalog watch event")
		}
		if !strings.Contains(body, "<td>shop_lookup</td>") {
			return fmt.Errorf("no shop_lookup call in the audit tail")
		}
		return nil
	})

	// Rate limits: the configured limit, and its state (or why there is
	// none).
	limits := b.page("/console/ratelimits")
	if !strings.Contains(limits, "console-lookups") || !strings.Contains(limits, "tools shop_lookup") ||
		!(strings.Contains(limits, `id="state-note"`) || strings.Contains(limits, `id="buckets"`)) {
		t.Fatalf("rate limits page:\n%s", limits)
	}

	// Logout ends the session.
	m := csrfField.FindStringSubmatch(limits)
	if code, _, _ := b.do(http.MethodPost, "/console/logout", url.Values{"csrf": {m[1]}}); code != http.StatusSeeOther {
		t.Fatalf("logout: %d", code)
	}
	if code, _, _ := b.do(http.MethodGet, "/console/backends", nil); code != http.StatusSeeOther {
		t.Fatalf("backends after logout: %d", code)
	}
}
