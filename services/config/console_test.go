package config

import (
	"os"
	"slices"
	"strings"
	"testing"
	"time"
)

func consoleGateway() Gateway {
	return Gateway{
		Aggregator: Endpoint{Address: "a:1", Token: "gateway-token"},
		Indexer:    Endpoint{Address: "i:1", Token: "gateway-token"},
		OpsListen:  "127.0.0.1:9000",
		Console: Console{
			Enabled:      true,
			OperatorKeys: []string{"an-operator-key-of-some-length"},
			ServiceToken: "console-token",
		},
	}
}

func TestConsoleValidates(t *testing.T) {
	g := consoleGateway()
	if err := g.WithDefaults().Validate(); err != nil {
		t.Fatalf("valid console refused: %v", err)
	}
	if got := g.WithDefaults().Console.SessionTTL; time.Duration(got) != DefaultConsoleSessionTTL {
		t.Errorf("sessionTTL default %v, want %v", time.Duration(got), DefaultConsoleSessionTTL)
	}
	withOIDC := consoleGateway()
	withOIDC.Console.OperatorKeys = nil
	withOIDC.Console.OIDC = ConsoleOIDC{ClientID: "console", RedirectURL: "https://ops.example/console/oidc/callback", OperatorGroup: "ops"}
	withOIDC.Auth.OIDC = OIDC{Issuer: "https://idp.example", JWKSURL: "https://idp.example/keys"}
	if err := withOIDC.WithDefaults().Validate(); err != nil {
		t.Fatalf("console with OIDC login refused: %v", err)
	}
	if got := withOIDC.Console.OIDC.EffectiveScopes(); strings.Join(got, " ") != "openid profile" {
		t.Errorf("default scopes %v, want openid profile", got)
	}
	withOIDC.Console.OIDC.Scopes = []string{"openid", "groups"}
	if err := withOIDC.WithDefaults().Validate(); err != nil || strings.Join(withOIDC.Console.OIDC.EffectiveScopes(), " ") != "openid groups" {
		t.Fatalf("console with scopes openid groups: %v, %v", err, withOIDC.Console.OIDC.EffectiveScopes())
	}
	disabled := Gateway{Aggregator: Endpoint{Address: "a:1"}, Console: Console{ServiceToken: ""}}
	if err := disabled.WithDefaults().Validate(); err != nil {
		t.Fatalf("a disabled console is not checked: %v", err)
	}
}

func TestConsoleRefusals(t *testing.T) {
	for name, tc := range map[string]struct {
		change func(*Gateway)
		want   string
	}{
		"no ops port":          {func(g *Gateway) { g.OpsListen = "" }, "needs gateway.opsListen"},
		"no login method":      {func(g *Gateway) { g.Console.OperatorKeys = nil }, "no login method"},
		"short key":            {func(g *Gateway) { g.Console.OperatorKeys = []string{"short"} }, "operatorKeys[0]: shorter than"},
		"no service token":     {func(g *Gateway) { g.Console.ServiceToken = "" }, "serviceToken is required"},
		"gateway's token":      {func(g *Gateway) { g.Console.ServiceToken = "gateway-token" }, "the gateway's own token"},
		"session TTL too long": {func(g *Gateway) { g.Console.SessionTTL = Duration(30 * 24 * time.Hour) }, "sessionTTL"},
		"oidc without group": {func(g *Gateway) {
			g.Console.OIDC = ConsoleOIDC{ClientID: "c", RedirectURL: "https://x.example/cb"}
			g.Auth.OIDC = OIDC{Issuer: "https://idp.example", JWKSURL: "https://idp.example/keys"}
		}, "operatorGroup is required"},
		"oidc without issuer": {func(g *Gateway) {
			g.Console.OIDC = ConsoleOIDC{ClientID: "c", RedirectURL: "https://x.example/cb", OperatorGroup: "ops"}
		}, "needs gateway.auth.oidc.issuer"},
		"oidc relative redirect": {func(g *Gateway) {
			g.Console.OIDC = ConsoleOIDC{ClientID: "c", RedirectURL: "/cb", OperatorGroup: "ops"}
			g.Auth.OIDC = OIDC{Issuer: "https://idp.example", JWKSURL: "https://idp.example/keys"}
		}, "redirectURL"},
		"oidc without client": {func(g *Gateway) { g.Console.OIDC = ConsoleOIDC{OperatorGroup: "ops"} }, "clientID is required"},
		"oidc scopes without openid": {func(g *Gateway) {
			g.Console.OIDC = ConsoleOIDC{ClientID: "c", RedirectURL: "https://x.example/cb", OperatorGroup: "ops", Scopes: []string{"profile", "groups"}}
			g.Auth.OIDC = OIDC{Issuer: "https://idp.example", JWKSURL: "https://idp.example/keys"}
		}, "must hold openid"},
		"oidc scope with a space": {func(g *Gateway) {
			g.Console.OIDC = ConsoleOIDC{ClientID: "c", RedirectURL: "https://x.example/cb", OperatorGroup: "ops", Scopes: []string{"openid", "a b"}}
			g.Auth.OIDC = OIDC{Issuer: "https://idp.example", JWKSURL: "https://idp.example/keys"}
		}, "scopes[1]"},
	} {
		t.Run(name, func(t *testing.T) {
			g := consoleGateway()
			tc.change(&g)
			err := g.WithDefaults().Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want an error naming %q", err, tc.want)
			}
		})
	}
}

func TestConsoleMethodsParse(t *testing.T) {
	for _, m := range ConsoleMethods {
		if _, _, err := ParseMethodPattern(m); err != nil {
			t.Error(err)
		}
	}
	set := NewMethodSet(ConsoleMethods)
	// The console reads tasks and never acts on one in a user's name.
	for _, forbidden := range []string{"/switchboard.aggregator.v1.AggregatorService/CallTool", "/switchboard.indexer.v1.IndexerService/ApproveToolDefinition",
		"/switchboard.aggregator.v1.AggregatorService/CancelTask", "/switchboard.aggregator.v1.AggregatorService/UpdateTask"} {
		if set.Permits(forbidden) {
			t.Errorf("the console's methods include %s", forbidden)
		}
	}
	for _, read := range []string{"/switchboard.aggregator.v1.AggregatorService/ListTasks", "/switchboard.aggregator.v1.AggregatorService/GetTask"} {
		if !set.Permits(read) {
			t.Errorf("the console's methods lack %s, which the tasks pages call", read)
		}
	}
}

// The credential docs/console.md shows allows exactly ConsoleMethods, the
// reads the pages make: a page the example leaves out answers 403.
func TestConsoleDocAllowsTheConsoleMethods(t *testing.T) {
	raw, err := os.ReadFile("../../docs/console.md")
	if err != nil {
		t.Fatal(err)
	}
	var allowed []string
	for _, line := range strings.Split(string(raw), "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(line), "- switchboard."); ok && strings.Contains(m, "Service/") {
			allowed = append(allowed, "switchboard."+m)
		}
	}
	if !slices.Equal(allowed, ConsoleMethods) {
		t.Fatalf("docs/console.md allows %v, want config.ConsoleMethods %v", allowed, ConsoleMethods)
	}
}
