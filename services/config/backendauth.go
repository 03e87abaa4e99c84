package config

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Backend credential modes (aggregator.backends[].auth.mode): whose
// identity a backend's requests carry.
const (
	// BackendAuthStatic sends only the configured headers, the same on
	// every request (the default).
	BackendAuthStatic = "static"
	// BackendAuthPassthrough is refused: it handed backends the caller's
	// own token, which the gateway accepts, so a backend (or whoever
	// controls it) could replay it at the gateway as the user. Use
	// BackendAuthTokenExchange.
	BackendAuthPassthrough = "passthrough"
	// BackendAuthTokenExchange trades the caller's token (RFC 8693) at
	// auth.tokenEndpoint for one scoped to the backend (auth.audience,
	// auth.scopes), cached per caller and backend.
	BackendAuthTokenExchange = "tokenExchange"
	// BackendAuthClientCredentials sends the gateway's own token from the
	// OAuth 2.0 client credentials grant at auth.tokenEndpoint, on every
	// request (listings and probes too), cached until shortly before it
	// expires.
	BackendAuthClientCredentials = "clientCredentials"
)

// DefaultTokenCacheEntries bounds the exchanged tokens an aggregator
// replica keeps per backend.
const DefaultTokenCacheEntries = 10000

// DefaultTokenRefreshBefore is how long before its expiry a cached token
// is no longer used.
const DefaultTokenRefreshBefore = Duration(30 * time.Second)

// BackendAuth is how the aggregator authenticates to one backend.
type BackendAuth struct {
	// Mode is static (default), tokenExchange or clientCredentials.
	Mode string `yaml:"mode"`
	// Audience: with tokenExchange (required) and clientCredentials
	// (optional), the audience asked for.
	Audience string `yaml:"audience"`
	// TokenEndpoint is the authorization server's token endpoint
	// (tokenExchange, clientCredentials): https, or http to a loopback
	// address.
	TokenEndpoint string `yaml:"tokenEndpoint"`
	// ClientID and ClientSecret (${ENV}) authenticate the aggregator to
	// the token endpoint (HTTP Basic, RFC 6749 §2.3.1).
	ClientID     string `yaml:"clientID"`
	ClientSecret string `yaml:"clientSecret"`
	// Scopes asked for (tokenExchange, clientCredentials); optional.
	Scopes []string `yaml:"scopes"`
	// CacheEntries bounds the exchanged tokens kept per backend on each
	// replica (tokenExchange; default 10000; least recently used first
	// out).
	CacheEntries int `yaml:"cacheEntries"`
	// RefreshBefore: a cached token is not used within this much of its
	// expiry (default 30s).
	RefreshBefore Duration `yaml:"refreshBefore"`
}

// EffectiveMode is the mode, static when unset.
func (a BackendAuth) EffectiveMode() string {
	if a.Mode == "" {
		return BackendAuthStatic
	}
	return a.Mode
}

// NeedsCaller reports whether the mode acts as the calling user, so the
// backend's calls need the caller's token.
func (a BackendAuth) NeedsCaller() bool {
	m := a.EffectiveMode()
	return m == BackendAuthTokenExchange
}

// errPassthroughRemoved explains the refusal of mode passthrough and how
// to migrate.
var errPassthroughRemoved = errors.New("was removed: it sent the backend the caller's own token, which the gateway accepts, so the backend could replay it at the gateway as the user; use mode tokenExchange with the backend's audience (docs/configuration.md, Migrating from passthrough)")

// Validate checks the auth section at key at (aggregator.backends[i].auth)
// of a backend whose static headers are headers.
func (a BackendAuth) Validate(at string, headers map[string]string) error {
	mode := a.EffectiveMode()
	oauth := mode == BackendAuthTokenExchange || mode == BackendAuthClientCredentials
	switch mode {
	case BackendAuthStatic:
		if a.Audience != "" {
			return fmt.Errorf("%s.audience is not for mode %s", at, BackendAuthStatic)
		}
	case BackendAuthPassthrough:
		return fmt.Errorf("%s.mode %s %w", at, BackendAuthPassthrough, errPassthroughRemoved)
	case BackendAuthTokenExchange:
		if strings.TrimSpace(a.Audience) == "" {
			return fmt.Errorf("%s.audience is required with mode %s: the backend's own audience", at, mode)
		}
	case BackendAuthClientCredentials:
	default:
		return keyErr(at+".mode", "want %s, %s or %s", BackendAuthStatic, BackendAuthTokenExchange, BackendAuthClientCredentials)
	}
	if mode != BackendAuthStatic {
		for k := range headers {
			if http.CanonicalHeaderKey(k) == "Authorization" {
				return fmt.Errorf("%s: mode %s sets Authorization; the backend's headers must not set one too", at, mode)
			}
		}
	}
	if !oauth {
		if a.TokenEndpoint != "" || a.ClientID != "" || a.ClientSecret != "" || len(a.Scopes) > 0 || a.CacheEntries != 0 || a.RefreshBefore != 0 {
			return fmt.Errorf("%s: tokenEndpoint, clientID, clientSecret, scopes, cacheEntries and refreshBefore are only for modes %s and %s", at, BackendAuthTokenExchange, BackendAuthClientCredentials)
		}
		return nil
	}
	// Client secrets and user tokens go there (SecureURL).
	if err := SecureURL(a.TokenEndpoint); err != nil {
		return keyErr(at+".tokenEndpoint", "%w", err)
	}
	if a.ClientID == "" || a.ClientSecret == "" {
		return fmt.Errorf("%s: clientID and clientSecret (${ENV}) are required with mode %s", at, mode)
	}
	if a.CacheEntries < 0 || a.RefreshBefore < 0 {
		return fmt.Errorf("%s: cacheEntries and refreshBefore must not be negative", at)
	}
	if mode == BackendAuthClientCredentials && a.CacheEntries != 0 {
		return fmt.Errorf("%s.cacheEntries is for mode %s (one token is kept with %s)", at, BackendAuthTokenExchange, BackendAuthClientCredentials)
	}
	for i, sc := range a.Scopes {
		if sc == "" || strings.ContainsAny(sc, " \"\\") {
			return keyErr(fmt.Sprintf("%s.scopes[%d]", at, i), "not a scope token")
		}
	}
	return nil
}

// WithDefaults fills the cache bounds of the modes that keep tokens:
// refreshBefore (tokenExchange, clientCredentials) and cacheEntries
// (tokenExchange), so a section with its defaults still validates.
func (a BackendAuth) WithDefaults() BackendAuth {
	switch a.EffectiveMode() {
	case BackendAuthTokenExchange:
		if a.CacheEntries == 0 {
			a.CacheEntries = DefaultTokenCacheEntries
		}
		fallthrough
	case BackendAuthClientCredentials:
		if a.RefreshBefore == 0 {
			a.RefreshBefore = DefaultTokenRefreshBefore
		}
	}
	return a
}
