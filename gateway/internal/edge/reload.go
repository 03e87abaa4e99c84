package edge

import (
	"errors"
	"reflect"
	"time"

	"github.com/switchboard-mcp/switchboard/gateway/internal/auth"
	"github.com/switchboard-mcp/switchboard/gateway/internal/session"
	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/ratelimit"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// The gateway's part of a configuration reload. What it applies live is
// listed in liveKeys and put in force by Reload; every other key it reads
// (readKeys) keeps its value from the start, and a change of one is
// logged as needing a restart.

// readKeys are the parts of the configuration file the gateway reads.
var readKeys = []string{"gateway", "grpc", "serviceAuth.tls", "telemetry", "logging", "ops", "servers", "reload", "audit", "rateLimits"}

// liveKeys are those of readKeys that Reload applies ("reload" is applied
// by the watch itself).
var liveKeys = []string{"gateway.auth", "gateway.aggregator.token", "gateway.indexer.token", "servers", "reload", "rateLimits",
	// The console's (gateway/internal/console), applied by its Update,
	// and its OIDC login, rebuilt with gateway.auth.oidc (app's console
	// reload).
	"gateway.console.operatorKeys", "gateway.console.serviceToken", "gateway.console.aggregatorToken", "gateway.console.indexerToken", "gateway.console.oidc"}

// Validate checks everything the gateway reads in cfg, as at start and on
// every reload: the sections (config.ValidateGateway), the TLS files, the
// authentication settings as the authenticator is built from them, and the
// session key.
func Validate(cfg *config.Config) error {
	g := cfg.Gateway.WithDefaults()
	if err := errors.Join(cfg.ValidateGateway(), rpc.CheckTLS(cfg.ServiceAuth.TLS)); err != nil {
		return err
	}
	if _, err := auth.New(g.Auth, nil); err != nil {
		return err
	}
	_, err := session.NewSealer(g.Sessions.Key, time.Duration(g.Sessions.TTL))
	return err
}

// authState is the authenticator in force and the settings it was built
// from. It is replaced whole: a request authenticates with the one it
// loaded, so requests under way when it is replaced finish with the old
// one.
type authState struct {
	authn auth.Authenticator
	cfg   config.GatewayAuth
}

// serviceTokens are the credentials the gateway presents to the
// aggregator and the indexer, replaced by Reload (nil when the gateway was
// built without them: their keys then need a restart).
type serviceTokens struct {
	aggregator, indexer *svcauth.LiveToken
	// in force, to log only a change
	aggregatorValue, indexerValue string
}

// Reload puts in force what the gateway applies live of cfg, which
// Validate accepted: gateway.auth (API keys, OIDC settings, the mode),
// the service tokens it presents (gateway.aggregator.token,
// gateway.indexer.token) and rateLimits (the limits its refusals take
// tokens from). All of it is built before any of it is swapped,
// so an error changes nothing. The other keys that differ from the
// configuration at start are logged as needing a restart.
func (g *Gateway) Reload(cfg *config.Config) error {
	if cfg == nil {
		return errors.New("edge: no configuration to reload")
	}
	g.reloadMu.Lock()
	defer g.reloadMu.Unlock()
	next := cfg.Gateway.WithDefaults()
	cur := g.auth.Load()
	var authNext *authState
	if !reflect.DeepEqual(next.Auth, cur.cfg) {
		a, err := auth.New(next.Auth, nil)
		if err != nil {
			return err
		}
		if o, ok := a.(*auth.OIDC); ok {
			o.KeepKeysOf(cur.authn)
		}
		authNext = &authState{authn: a, cfg: next.Auth}
	}

	var limitsNext *ratelimit.Set
	if g.limiter != nil && !reflect.DeepEqual(cfg.RateLimits, g.rateLimits) {
		set, err := ratelimit.Compile(cfg.RateLimits)
		if err != nil {
			return err
		}
		limitsNext = set
	}

	// Every part is built: swap.
	serversChanged := !reflect.DeepEqual(cfg.Servers, g.servers.Load().from)
	if serversChanged {
		g.SetServers(cfg.Servers)
		g.log.Info("servers reloaded", "servers", len(cfg.Servers))
	}
	if authNext != nil {
		g.auth.Store(authNext)
		g.log.Info("gateway.auth reloaded", "mode", modeName(next.Auth.Mode), "api_keys", len(next.Auth.APIKeys))
	}
	if limitsNext != nil {
		// The requests refused from now on are counted by the new
		// limits, as the aggregator's and the indexer's are.
		g.limiter.Apply(limitsNext)
		g.rateLimits = cfg.RateLimits
		g.log.Info("rateLimits reloaded", "limits", len(cfg.RateLimits.Limits))
	}
	if authNext != nil || serversChanged {
		// A server's audience, or the server itself, is part of what
		// a stream's credential is checked against.
		g.credStreams.recheck(g.auth.Load().authn, g.servers.Load())
	}
	live := liveKeys
	if t := &g.tokens; t.aggregator != nil && t.indexer != nil {
		if t.aggregatorValue != next.Aggregator.Token || t.indexerValue != next.Indexer.Token {
			t.aggregator.Set(next.Aggregator.Token)
			t.indexer.Set(next.Indexer.Token)
			t.aggregatorValue, t.indexerValue = next.Aggregator.Token, next.Indexer.Token
			g.log.Info("gateway service tokens reloaded")
		}
	} else {
		live = []string{"gateway.auth", "servers", "reload", "rateLimits"}
	}
	if restart := config.NeedRestart(config.Changed(g.started, cfg), readKeys, live); len(restart) > 0 {
		g.log.Warn("needs a restart: configuration changes not applied", "keys", restart)
	}
	return nil
}

func modeName(m string) string {
	if m == "" {
		return "anonymous"
	}
	return m
}
