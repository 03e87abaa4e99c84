package config

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func hexSHA256(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

// A credential's token may be given as its SHA-256 (tokenSHA256, 64 hex
// digits) so that a server need not hold the secret: one of token and
// tokenSHA256, never both, and a digest that is another credential's
// token (or digest) is a duplicate like a shared token.
func TestServiceAuthTokenSHA256(t *testing.T) {
	listTools := []string{"switchboard.aggregator.v1.AggregatorService/ListTools"}
	ok := ServiceAuth{Credentials: []ServiceCredential{
		{Name: "gateway", TokenSHA256: hexSHA256("gw"), URISAN: "spiffe://x/gateway", Allow: listTools},
		{Name: "indexer", TokenSHA256: strings.ToUpper(hexSHA256("idx")), Allow: listTools},
		{Name: "console", Token: "console-token", HostedBy: "gateway", Allow: listTools},
		{Name: "absent", TokenSHA256: "", Allow: listTools}, // a digest this pod does not get
	}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid configuration refused: %v", err)
	}
	for _, tc := range []struct {
		name  string
		creds []ServiceCredential
		want  string
	}{
		{"short digest", []ServiceCredential{{Name: "a", TokenSHA256: hexSHA256("t")[:63], Allow: listTools}},
			"serviceAuth.credentials[0].tokenSHA256: want the token's SHA-256 as 64 hexadecimal digits"},
		{"long digest", []ServiceCredential{{Name: "a", TokenSHA256: hexSHA256("t") + "00", Allow: listTools}},
			"serviceAuth.credentials[0].tokenSHA256: want the token's SHA-256 as 64 hexadecimal digits"},
		{"not hex", []ServiceCredential{{Name: "a", TokenSHA256: strings.Repeat("g", 64), Allow: listTools}},
			"serviceAuth.credentials[0].tokenSHA256: want the token's SHA-256 as 64 hexadecimal digits"},
		{"the token itself", []ServiceCredential{{Name: "a", TokenSHA256: "a-plain-token", Allow: listTools}},
			"serviceAuth.credentials[0].tokenSHA256: want the token's SHA-256"},
		{"token and digest", []ServiceCredential{{Name: "a", Token: "t", TokenSHA256: hexSHA256("t"), Allow: listTools}},
			"serviceAuth.credentials[0] (a): token and tokenSHA256 are two forms of one token: set one"},
		{"shared digest", []ServiceCredential{{Name: "a", TokenSHA256: hexSHA256("t"), Allow: listTools}, {Name: "b", TokenSHA256: hexSHA256("t"), Allow: listTools}},
			"serviceAuth.credentials[1].tokenSHA256: is also a's"},
		{"digest of another's token", []ServiceCredential{{Name: "a", Token: "t", Allow: listTools}, {Name: "b", TokenSHA256: hexSHA256("t"), Allow: listTools}},
			"serviceAuth.credentials[1].tokenSHA256: is also a's"},
		{"token of another's digest", []ServiceCredential{{Name: "a", TokenSHA256: strings.ToUpper(hexSHA256("t")), Allow: listTools}, {Name: "b", Token: "t", Allow: listTools}},
			"serviceAuth.credentials[1].token: is also a's"},
		{"hosted by nobody", []ServiceCredential{{Name: "a", Token: "t", HostedBy: "gateway", Allow: listTools}},
			"serviceAuth.credentials[0].hostedBy: names no credential"},
		{"hosted by itself", []ServiceCredential{{Name: "a", Token: "t", URISAN: "spiffe://x/a", HostedBy: "a", Allow: listTools}},
			"serviceAuth.credentials[0].hostedBy: names the credential itself"},
	} {
		err := ServiceAuth{Credentials: tc.creds}.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// A hostedBy that names no credential is refused by its key: the value,
// which may come from ${VAR}, is not shown.
func TestServiceAuthHostedByNotShown(t *testing.T) {
	err := ServiceAuth{Credentials: []ServiceCredential{{Name: "a", Token: "t", HostedBy: "s3cr3t-host", Allow: []string{"switchboard.aggregator.v1.AggregatorService/ListTools"}}}}.Validate()
	if err == nil || !strings.Contains(err.Error(), "serviceAuth.credentials[0].hostedBy") || strings.Contains(err.Error(), "s3cr3t") {
		t.Fatalf("got %v, want an error naming serviceAuth.credentials[0].hostedBy without its value", err)
	}
}

// TokenDigest is the one form svcauth compares: the SHA-256 of token, or
// tokenSHA256 decoded; none without either.
func TestServiceCredentialTokenDigest(t *testing.T) {
	want := sha256.Sum256([]byte("secret"))
	for _, c := range []ServiceCredential{
		{Token: "secret"},
		{TokenSHA256: hexSHA256("secret")},
		{TokenSHA256: strings.ToUpper(hexSHA256("secret"))},
	} {
		if d, ok := c.TokenDigest(); !ok || d != want {
			t.Errorf("%+v: %x %v, want %x", c, d, ok, want)
		}
	}
	for _, c := range []ServiceCredential{{}, {URISAN: "spiffe://x/a"}, {TokenSHA256: "zz"}} {
		if _, ok := c.TokenDigest(); ok {
			t.Errorf("%+v has a token digest", c)
		}
	}
}

// The console may present one token to each server (aggregatorToken,
// indexerToken), replacing serviceToken toward that server; neither may be
// a token of the gateway.
func TestConsolePerServerTokens(t *testing.T) {
	g := consoleGateway()
	g.Console.ServiceToken = ""
	g.Console.AggregatorToken, g.Console.IndexerToken = "console-to-aggregator", "console-to-indexer"
	if err := g.WithDefaults().Validate(); err != nil {
		t.Fatalf("per-server console tokens refused: %v", err)
	}
	if got := g.Console.AggregatorServiceToken(); got != "console-to-aggregator" {
		t.Errorf("token to the aggregator %q", got)
	}
	if got := g.Console.IndexerServiceToken(); got != "console-to-indexer" {
		t.Errorf("token to the indexer %q", got)
	}
	shared := consoleGateway()
	if shared.Console.AggregatorServiceToken() != "console-token" || shared.Console.IndexerServiceToken() != "console-token" {
		t.Errorf("serviceToken alone: %q, %q", shared.Console.AggregatorServiceToken(), shared.Console.IndexerServiceToken())
	}
	for name, tc := range map[string]struct {
		change func(*Gateway)
		want   string
	}{
		"indexer token missing": {func(g *Gateway) { g.Console.IndexerToken = "" },
			"gateway.console.indexerToken (or serviceToken) is required"},
		"aggregator token missing": {func(g *Gateway) { g.Console.AggregatorToken = "" },
			"gateway.console.aggregatorToken (or serviceToken) is required"},
		"gateway's aggregator token": {func(g *Gateway) { g.Console.AggregatorToken = "gateway-token" }, "the gateway's own token"},
		"gateway's indexer token": {func(g *Gateway) {
			g.Indexer.Token = "gateway-to-indexer"
			g.Console.IndexerToken = "gateway-to-indexer"
		}, "the gateway's own token"},
	} {
		g := consoleGateway()
		g.Console.ServiceToken = ""
		g.Console.AggregatorToken, g.Console.IndexerToken = "console-to-aggregator", "console-to-indexer"
		tc.change(&g)
		err := g.WithDefaults().Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", name, err, tc.want)
		}
	}
}

// A gateway without an indexer (gateway.indexer.address unset) runs a
// console that skips the indexer's pages: it needs no token to the indexer.
func TestConsoleWithoutIndexer(t *testing.T) {
	g := consoleGateway()
	g.Indexer = Endpoint{}
	g.Console.ServiceToken = ""
	g.Console.AggregatorToken = "console-to-aggregator"
	if err := g.WithDefaults().Validate(); err != nil {
		t.Fatalf("a console without an indexer refused for want of an indexer token: %v", err)
	}
	g.Console.AggregatorToken = ""
	if err := g.WithDefaults().Validate(); err == nil || !strings.Contains(err.Error(), "serviceToken is required") {
		t.Fatalf("a console without any token: %v", err)
	}
}

// A service token is required where a service calls another, unless a
// client certificate authenticates the service instead. The shipped
// manifests write tokens as ${NAME:-}, so a variable the pod lacks (a
// rotation's new one, which a running pod never gains) expands to
// nothing: such a file is refused, naming the key and the variable, or
// every call would be refused as unauthenticated. A token that a
// credential's role gives an endpoint left unset is a token.
func TestEmptyServiceTokenRefusedWithoutAClientCertificate(t *testing.T) {
	const file = `
gateway:
  aggregator: {address: "127.0.0.1:9090", token: "${GW_AGG_TOKEN_NEXT:-}"}
  indexer: {address: "127.0.0.1:9091", token: "${GW_IDX_TOKEN_NEXT:-}"}
indexer:
  database: postgres://x@127.0.0.1/x
  aggregator: {address: "127.0.0.1:9090", token: "${IDX_AGG_TOKEN_NEXT:-}"}
`
	unset := func(string) (string, bool) { return "", false }
	cfg, err := Parse([]byte(file), unset)
	if err != nil {
		t.Fatal(err)
	}
	refused := fmt.Sprint(cfg.ValidateGateway(), cfg.ValidateIndexer())
	for _, want := range []string{"gateway.aggregator.token", "GW_AGG_TOKEN_NEXT", "gateway.indexer.token", "GW_IDX_TOKEN_NEXT",
		"indexer.aggregator.token", "IDX_AGG_TOKEN_NEXT"} {
		if !strings.Contains(refused, want) {
			t.Errorf("the validations say %q, want them to name %s", refused, want)
		}
	}

	withCert, err := Parse([]byte(file+"serviceAuth:\n  tls: {certFile: tls.crt, keyFile: tls.key, caFile: ca.crt}\n"), unset)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(withCert.ValidateGateway(), withCert.ValidateIndexer()); err != nil {
		t.Errorf("with a client certificate and no tokens: %v", err)
	}

	byRole, err := Parse([]byte(`
serviceAuth:
  credentials:
    - {name: gateway, token: gw, role: gateway}
    - {name: indexer, token: idx, role: indexer}
indexer: {database: postgres://x@127.0.0.1/x}
`), unset)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(byRole.ValidateGateway(), byRole.ValidateIndexer()); err != nil {
		t.Errorf("endpoints that take their tokens from the credentials' roles: %v", err)
	}
}

// TestTokenWithoutAddressRefused: a token written for a service with no
// address to call it at was taken, and the service never called: a
// gateway.indexer with a token and no address served no find_tool and
// kept its session deletions to itself, without a word. Refused now,
// naming the address's key.
func TestTokenWithoutAddressRefused(t *testing.T) {
	const file = `
gateway:
  aggregator: {address: "127.0.0.1:9090", token: gw-agg-token}
  indexer: {token: gw-idx-token}
indexer:
  database: postgres://x@127.0.0.1/x
  aggregator: {token: idx-agg-token}
`
	cfg, err := Parse([]byte(file), env(nil))
	if err != nil {
		t.Fatal(err)
	}
	refused := fmt.Sprint(cfg.ValidateGateway(), cfg.ValidateIndexer())
	for _, want := range []string{"gateway.indexer.address", "indexer.aggregator.address"} {
		if !strings.Contains(refused, want) {
			t.Errorf("the validations say %q, want them to name %s", refused, want)
		}
	}
}
