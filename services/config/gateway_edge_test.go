package config

import (
	"strings"
	"testing"
)

func TestParseOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"https://app.example":          "https://app.example",
		"HTTPS://App.Example:443":      "https://app.example",
		"http://app.example:80":        "http://app.example",
		"http://app.example:8080":      "http://app.example:8080",
		"https://app.example:80":       "https://app.example:80",
		"http://[::1]:9000":            "http://[::1]:9000",
		"https://app.example/":         "https://app.example",
		"chrome-extension://abcdefghi": "chrome-extension://abcdefghi",
	} {
		if got, err := ParseOrigin(in); err != nil || got != want {
			t.Errorf("ParseOrigin(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "null", "app.example", "https://", "https://app.example/path", "https://app.example?q", "https://u@app.example", "https://app.example:", "*"} {
		if got, err := ParseOrigin(bad); err == nil {
			t.Errorf("ParseOrigin(%q) = %q, want an error", bad, got)
		}
	}
}

func TestValidateEdge(t *testing.T) {
	ok := Gateway{Aggregator: Endpoint{Address: "a:1"}, PublicURL: "https://mcp.example.com/prefix",
		HTTP: GatewayHTTP{AllowedOrigins: []string{"*", "https://app.example"}, AllowedHosts: []string{"gw.internal", "gw:8080"}, MaxBodyBytes: MaxBodyBytesLimit}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid: %v", err)
	}
	for name, g := range map[string]Gateway{
		"relative publicURL": {PublicURL: "mcp.example.com"},
		"publicURL scheme":   {PublicURL: "ftp://mcp.example.com"},
		"publicURL query":    {PublicURL: "https://mcp.example.com/?a=b"},
		"null origin":        {HTTP: GatewayHTTP{AllowedOrigins: []string{"null"}}},
		"origin with a path": {HTTP: GatewayHTTP{AllowedOrigins: []string{"https://app.example/x"}}},
		"empty host":         {HTTP: GatewayHTTP{AllowedHosts: []string{""}}},
		"URL as host":        {HTTP: GatewayHTTP{AllowedHosts: []string{"https://gw"}}},
		// A body the services would refuse whole every time.
		"body past a service message": {HTTP: GatewayHTTP{MaxBodyBytes: MaxBodyBytesLimit + 1}},
	} {
		g.Aggregator.Address = "a:1"
		if err := g.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// find_tool's hits are at most the indexer's bound: a larger
// optimizer.limit is taken as that bound, so that nothing built on it
// (the console's search form, whose field allows at most the bound)
// asks for more than any search answers.
func TestOptimizerLimitIsAtMostTheIndexers(t *testing.T) {
	for _, c := range []struct{ set, want int }{{0, DefaultSearchLimit}, {12, 12}, {MaxIndexerLimit, MaxIndexerLimit}, {100, MaxIndexerLimit}} {
		g := Gateway{Optimizer: Optimizer{Limit: c.set}}.WithDefaults()
		if g.Optimizer.Limit != c.want {
			t.Errorf("optimizer.limit %d became %d, want %d", c.set, g.Optimizer.Limit, c.want)
		}
	}
}

// TestAuthSettingsWithoutTheirModeAreRefused: API keys, or OIDC settings
// no console login uses, written without the mode that reads them (a
// dropped line, a half-written file) served every caller as the
// anonymous principal, the keys ignored. They are refused now, naming
// the key; OIDC settings the console's login uses stand on their own.
func TestAuthSettingsWithoutTheirModeAreRefused(t *testing.T) {
	keys := []APIKey{{Key: "a-key-of-some-length", Subject: "alice"}}
	oidc := OIDC{Issuer: "https://idp.example", JWKSURL: "https://idp.example/keys", Audience: "switchboard"}
	for name, auth := range map[string]GatewayAuth{
		"API keys without a mode":      {APIKeys: keys},
		"API keys in anonymous mode":   {Mode: "anonymous", APIKeys: keys},
		"API keys in oidc mode":        {Mode: "oidc", APIKeys: keys, OIDC: oidc},
		"OIDC without a mode":          {OIDC: oidc},
		"OIDC keys URL alone, no mode": {OIDC: OIDC{JWKSURL: "https://idp.example/keys"}},
	} {
		err := Gateway{Aggregator: Endpoint{Address: "a:1"}, Auth: auth}.Validate()
		if err == nil || !strings.Contains(err.Error(), "gateway.auth.mode") {
			t.Errorf("%s: %v, want a refusal naming gateway.auth.mode", name, err)
		}
	}
	for name, auth := range map[string]GatewayAuth{
		"API keys":             {Mode: "apiKeys", APIKeys: keys},
		"OIDC":                 {Mode: "oidc", OIDC: oidc},
		"OIDC, anonymous MCP":  {Mode: "anonymous", OIDC: oidc},
		"nothing, no mode set": {},
	} {
		if err := (Gateway{Aggregator: Endpoint{Address: "a:1"}, Auth: auth}).Validate(); err != nil {
			t.Errorf("%s: %v, want it taken", name, err)
		}
	}
	console := consoleGateway()
	console.Console.OperatorKeys = nil
	console.Console.OIDC = ConsoleOIDC{ClientID: "console", RedirectURL: "https://ops.example/console/oidc/callback", OperatorGroup: "ops"}
	console.Auth.OIDC = oidc
	if err := console.WithDefaults().Validate(); err != nil {
		t.Errorf("OIDC settings the console's login uses, no mode: %v, want them taken", err)
	}
}

// TestGatewayValidationReportsEveryProblem: check prints every problem
// of the gateway's section, not the first one only.
func TestGatewayValidationReportsEveryProblem(t *testing.T) {
	g := Gateway{Aggregator: Endpoint{Address: "a:1"}, Auth: GatewayAuth{Mode: "keys"}, PublicURL: "ftp://mcp.example.com",
		HTTP: GatewayHTTP{MaxBodyBytes: MaxBodyBytesLimit + 1}, Sessions: Sessions{MaxSubscriptions: MaxSessionSubscriptions + 1}}
	err := g.Validate()
	for _, key := range []string{"gateway.auth.mode", "gateway.http.maxBodyBytes", "gateway.sessions.maxSubscriptions", "publicURL"} {
		if err == nil || !strings.Contains(err.Error(), key) {
			t.Errorf("%v: want %s named", err, key)
		}
	}
}
