package config

import (
	"errors"
	"fmt"
	"net/url"
	"slices"
	"time"
)

// Console configures the operator console (gateway.console): web pages on
// the gateway's ops port (gateway.opsListen), under /console/, never on the
// MCP port. Operators log in with one of OperatorKeys or through the
// OpenID provider of gateway.auth.oidc (OIDC); the pages read the
// aggregator and the indexer with the console's own service credential
// (ServiceToken), never the gateway's.
type Console struct {
	// Enabled serves the console (default false).
	Enabled bool `yaml:"enabled"`
	// OperatorKeys are the keys an operator may log in with, typed into the
	// login form (use ${ENV}: they are secrets). At least one login method
	// (these or OIDC) is required.
	OperatorKeys []string `yaml:"operatorKeys"`
	// ServiceToken is the console's gRPC credential to gateway.aggregator
	// and gateway.indexer (${ENV}): a serviceAuth credential with operator
	// and assertPrincipals set, allowed only the read RPCs the console
	// calls (ConsoleMethods). It must not be the gateway's own token.
	ServiceToken string `yaml:"serviceToken"`
	// AggregatorToken and IndexerToken are the console's credential to
	// gateway.aggregator and to gateway.indexer, one token per server
	// (${ENV}), so that neither server holds a token the other accepts;
	// each replaces ServiceToken toward its server. A gateway without
	// gateway.indexer needs no token to it: the console skips the
	// indexer's pages.
	AggregatorToken string `yaml:"aggregatorToken"`
	IndexerToken    string `yaml:"indexerToken"`
	// SessionTTL bounds a login session (default 8h); the operator then
	// logs in again.
	SessionTTL Duration    `yaml:"sessionTTL"`
	OIDC       ConsoleOIDC `yaml:"oidc"`
}

// ServerToken is the token the console presents to server ("aggregator"
// or "indexer") and the key it comes from: gateway.console.<server>Token,
// else gateway.console.serviceToken.
func (c Console) ServerToken(server string) (key, token string) {
	own := c.AggregatorToken
	if server == "indexer" {
		own = c.IndexerToken
	}
	if own != "" {
		return "gateway.console." + server + "Token", own
	}
	return "gateway.console.serviceToken", c.ServiceToken
}

// AggregatorServiceToken is the token the console presents to the
// aggregator (ServerToken).
func (c Console) AggregatorServiceToken() string {
	_, token := c.ServerToken("aggregator")
	return token
}

// IndexerServiceToken is the token the console presents to the indexer
// (ServerToken).
func (c Console) IndexerServiceToken() string {
	_, token := c.ServerToken("indexer")
	return token
}

// ConsoleOIDC is operator login through the OpenID provider's
// authorization-code flow (with PKCE, state and nonce). The issuer, its
// signing keys (jwksURL) and the groups claim are those of
// gateway.auth.oidc; the ID token's audience is ClientID.
type ConsoleOIDC struct {
	// ClientID and ClientSecret are the console's client at the provider
	// (the secret as ${ENV}; empty for a public client, PKCE only).
	ClientID     string `yaml:"clientID"`
	ClientSecret string `yaml:"clientSecret"`
	// RedirectURL is where the provider sends the operator back: the
	// console's /console/oidc/callback as the operator's browser reaches it.
	RedirectURL string `yaml:"redirectURL"`
	// OperatorGroup is the group the ID token's groups claim must hold;
	// anyone else is refused.
	OperatorGroup string `yaml:"operatorGroup"`
	// Scopes are asked for in the authorization request; unset,
	// DefaultConsoleOIDCScopes. A provider that issues the groups claim
	// only for a scope of its own (often "groups") needs it named here.
	Scopes []string `yaml:"scopes"`
}

// Enabled reports whether OIDC login is configured.
func (o ConsoleOIDC) Enabled() bool { return o.ClientID != "" }

// DefaultConsoleOIDCScopes are the scopes asked for unless
// gateway.console.oidc.scopes says otherwise.
var DefaultConsoleOIDCScopes = []string{"openid", "profile"}

// MaxConsoleOIDCScopes bounds gateway.console.oidc.scopes.
const MaxConsoleOIDCScopes = 32

// EffectiveScopes are Scopes, or DefaultConsoleOIDCScopes.
func (o ConsoleOIDC) EffectiveScopes() []string {
	if len(o.Scopes) == 0 {
		return DefaultConsoleOIDCScopes
	}
	return o.Scopes
}

// validScope reports whether s is a scope token (RFC 6749 3.3: printable
// ASCII but space, the double quote and the backslash).
func validScope(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < 0x21 || r > 0x7e || r == '"' || r == '\\' {
			return false
		}
	}
	return true
}

// DefaultConsoleSessionTTL is a login session's lifetime unless
// gateway.console.sessionTTL says otherwise: a working day.
const DefaultConsoleSessionTTL = 8 * time.Hour

// MaxConsoleSessionTTL bounds gateway.console.sessionTTL.
const MaxConsoleSessionTTL = 7 * 24 * time.Hour

// MaxConsoleOperatorKeys bounds gateway.console.operatorKeys.
const MaxConsoleOperatorKeys = 64

// minOperatorKeyBytes is the shortest operator key accepted: it is a
// password typed into a form, so a short one could be guessed.
const minOperatorKeyBytes = 16

// ConsoleMethods are the RPCs the console calls: catalog, backend and
// task reads of the aggregator (never UpdateTask or CancelTask: the
// console only reads), the indexer's search, statistics, pinned tool
// definitions, audit trail and rate-limit buckets. The console's
// serviceAuth credential should allow exactly these.
var ConsoleMethods = []string{
	"switchboard.aggregator.v1.AggregatorService/ListBackends",
	"switchboard.aggregator.v1.AggregatorService/Discover",
	"switchboard.aggregator.v1.AggregatorService/ListTools",
	"switchboard.aggregator.v1.AggregatorService/ListResources",
	"switchboard.aggregator.v1.AggregatorService/ListResourceTemplates",
	"switchboard.aggregator.v1.AggregatorService/ListPrompts",
	"switchboard.aggregator.v1.AggregatorService/WatchCatalog",
	"switchboard.aggregator.v1.AggregatorService/ListTasks",
	"switchboard.aggregator.v1.AggregatorService/GetTask",
	"switchboard.aggregator.v1.AggregatorService/GetTraffic",
	"switchboard.indexer.v1.IndexerService/Search",
	"switchboard.indexer.v1.IndexerService/Stats",
	"switchboard.indexer.v1.IndexerService/ListToolDefinitions",
	"switchboard.indexer.v1.IndexerService/WatchToolDefinitions",
	"switchboard.indexer.v1.IndexerService/QueryAuditEvents",
	"switchboard.indexer.v1.IndexerService/ListRateLimitBuckets",
}

// WithDefaults returns c with every unset value at its default.
func (c Console) WithDefaults() Console {
	c.SessionTTL = Duration(c.SessionTTL.Or(DefaultConsoleSessionTTL))
	return c
}

// validateConsole checks gateway.console, when enabled, against the rest
// of the gateway section: the one place its rules live.
func (g Gateway) validateConsole() error {
	if !g.Console.Enabled {
		return nil
	}
	if g.OpsListen == "" {
		return errors.Join(errors.New("gateway.console.enabled needs gateway.opsListen: the console is served on the ops port only, never on the MCP port"),
			g.ValidateConsole())
	}
	return g.ValidateConsole()
}

// ValidateConsole checks the keys of gateway.console that a running
// console takes, whatever gateway.console.enabled says: enabled takes a
// restart, so a console started enabled keeps running after a reload
// that turns it off, and takes that file's operator keys, tokens and OIDC
// settings as a start would. Such a file need not name a login method or
// the console's tokens (a start accepts it without): the running console
// then lets no one in, until the restart ends it.
func (g Gateway) ValidateConsole() error {
	c := g.Console
	var errs []error
	if c.Enabled && len(c.OperatorKeys) == 0 && !c.OIDC.Enabled() {
		errs = append(errs, errors.New("gateway.console: no login method: set operatorKeys or oidc.clientID"))
	}
	if len(c.OperatorKeys) > MaxConsoleOperatorKeys {
		errs = append(errs, fmt.Errorf("gateway.console.operatorKeys: at most %d keys", MaxConsoleOperatorKeys))
	}
	for i, k := range c.OperatorKeys {
		if len(k) < minOperatorKeyBytes {
			errs = append(errs, keyErr(fmt.Sprintf("gateway.console.operatorKeys[%d]", i), "shorter than %d bytes", minOperatorKeyBytes))
		}
	}
	switch {
	case !c.Enabled:
	case c.ServiceToken == "" && c.AggregatorToken == "" && c.IndexerToken == "":
		errs = append(errs, errors.New("gateway.console.serviceToken is required: the console reads the services with a credential of its own"))
	case c.AggregatorServiceToken() == "":
		errs = append(errs, errors.New("gateway.console.aggregatorToken (or serviceToken) is required: the console's token to the aggregator"))
	case c.IndexerServiceToken() == "" && g.Indexer.Address != "":
		// Without gateway.indexer the console skips the indexer's pages,
		// and needs no token to it.
		errs = append(errs, errors.New("gateway.console.indexerToken (or serviceToken) is required: the console's token to the indexer"))
	}
	for key, tok := range map[string]string{"serviceToken": c.ServiceToken, "aggregatorToken": c.AggregatorToken, "indexerToken": c.IndexerToken} {
		if tok != "" && (tok == g.Aggregator.Token || tok == g.Indexer.Token) {
			errs = append(errs, fmt.Errorf("gateway.console.%s is the gateway's own token: give the console a serviceAuth credential of its own", key))
		}
	}
	if c.SessionTTL < 0 || time.Duration(c.SessionTTL) > MaxConsoleSessionTTL {
		errs = append(errs, keyErr("gateway.console.sessionTTL", "want up to %v (unset: %v)", MaxConsoleSessionTTL, DefaultConsoleSessionTTL))
	}
	if o := c.OIDC; o.Enabled() || o.ClientSecret != "" || o.RedirectURL != "" || o.OperatorGroup != "" {
		if !o.Enabled() {
			errs = append(errs, errors.New("gateway.console.oidc: clientID is required"))
		}
		if o.OperatorGroup == "" {
			errs = append(errs, errors.New("gateway.console.oidc.operatorGroup is required: who is an operator"))
		}
		if u, err := url.Parse(o.RedirectURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, keyErr("gateway.console.oidc.redirectURL", "want an absolute http or https URL"))
		}
		if len(o.Scopes) > MaxConsoleOIDCScopes {
			errs = append(errs, fmt.Errorf("gateway.console.oidc.scopes: at most %d", MaxConsoleOIDCScopes))
		}
		for i, sc := range o.Scopes {
			if !validScope(sc) {
				errs = append(errs, keyErr(fmt.Sprintf("gateway.console.oidc.scopes[%d]", i), "a scope is printable ASCII without spaces, quotes or backslashes"))
			}
		}
		if len(o.Scopes) > 0 && !slices.Contains(o.Scopes, "openid") {
			errs = append(errs, errors.New("gateway.console.oidc.scopes must hold openid: the login needs an ID token"))
		}
		if g.Auth.OIDC.Issuer == "" || g.Auth.OIDC.JWKSURL == "" {
			errs = append(errs, errors.New("gateway.console.oidc needs gateway.auth.oidc.issuer and jwksURL: the provider and its signing keys"))
		}
	}
	return errors.Join(errs...)
}
