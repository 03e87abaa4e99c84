package app

import (
	"fmt"
	"log/slog"
	"reflect"

	"google.golang.org/grpc"

	"github.com/switchboard-mcp/switchboard/gateway/internal/console"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// operatorConsole is the console with the connections it reads the
// services through: its own, with its own credential
// (gateway.console.serviceToken), never the gateway's.
type operatorConsole struct {
	*console.Console
	// token and indexerToken are the console's tokens to the aggregator
	// and to the indexer (gateway.console.aggregatorToken, indexerToken,
	// or serviceToken for both).
	token, indexerToken *svcauth.LiveToken

	conns []*grpc.ClientConn
	log   *slog.Logger
	// oidcFrom is what the OIDC login in force was built from.
	oidcFrom oidcSettings
}

// oidcSettings are the keys the console's OIDC login is built from: its
// client (gateway.console.oidc) and the provider (gateway.auth.oidc, with
// its defaults).
type oidcSettings struct {
	client   config.ConsoleOIDC
	provider config.OIDC
}

func oidcSettingsOf(gw config.Gateway) oidcSettings {
	return oidcSettings{client: gw.Console.OIDC, provider: gw.Auth.OIDC}
}

// build is the OIDC login of s; nil when gateway.console.oidc has no
// client.
func (s oidcSettings) build() (*console.OIDCLogin, error) {
	if !s.client.Enabled() {
		return nil, nil
	}
	return console.NewOIDCLogin(s.client, s.provider, nil)
}

// startConsole builds the console when gateway.console.enabled.
func startConsole(cfg *config.Config, keepalive grpc.DialOption, log *slog.Logger) (*operatorConsole, error) {
	gw := cfg.Gateway.WithDefaults()
	tls := cfg.ServiceAuth.TLS
	oc := &operatorConsole{token: svcauth.NewLiveToken(gw.Console.AggregatorServiceToken(), tls.Enabled()),
		indexerToken: svcauth.NewLiveToken(gw.Console.IndexerServiceToken(), tls.Enabled()), log: log, oidcFrom: oidcSettingsOf(gw)}
	aggConn, err := rpc.DialLive(gw.Aggregator, tls, oc.token, keepalive)
	if err != nil {
		return nil, fmt.Errorf("gateway.console: gateway.aggregator: %w", err)
	}
	oc.conns = append(oc.conns, aggConn)
	deps := console.Deps{Aggregator: aggregatorv1.NewAggregatorServiceClient(aggConn), Log: log.With("component", "console")}
	if gw.Indexer.Address != "" {
		idxConn, err := rpc.DialLive(gw.Indexer, tls, oc.indexerToken, keepalive)
		if err != nil {
			oc.close()
			return nil, fmt.Errorf("gateway.console: gateway.indexer: %w", err)
		}
		oc.conns = append(oc.conns, idxConn)
		deps.Indexer = indexerv1.NewIndexerServiceClient(idxConn)
		deps.RateLimits = indexerRateBuckets{client: deps.Indexer}
	}
	if deps.OIDC, err = oc.oidcFrom.build(); err != nil {
		oc.close()
		return nil, err
	}
	if oc.Console, err = console.New(cfg, deps); err != nil {
		oc.close()
		return nil, err
	}
	return oc, nil
}

// consoleReload is the console's part of a reload, built and not yet in
// force.
type consoleReload struct {
	oc  *operatorConsole
	cfg *config.Config
	// oidcChanged: oidc (nil: none), built from oidcFrom, replaces the
	// login in force.
	oidcChanged bool
	oidc        *console.OIDCLogin
	oidcFrom    oidcSettings
}

// prepare builds what the console takes live of cfg, changing nothing:
// an error leaves the console (and, as the gateway applies it after this,
// the rest of the reload) as it was. The console's keys are checked even
// when cfg disables it, which takes a restart. The OIDC login is rebuilt
// when gateway.auth.oidc or gateway.console.oidc changed.
func (oc *operatorConsole) prepare(cfg *config.Config) (*consoleReload, error) {
	if err := cfg.Gateway.WithDefaults().ValidateConsole(); err != nil {
		return nil, err
	}
	r := &consoleReload{oc: oc, cfg: cfg}
	if !cfg.Gateway.Console.Enabled {
		// Turned off, which takes a restart: until then no one logs in.
		r.oidcChanged = !reflect.DeepEqual(oc.oidcFrom, oidcSettings{})
		return r, nil
	}
	r.oidcFrom = oidcSettingsOf(cfg.Gateway.WithDefaults())
	if !reflect.DeepEqual(r.oidcFrom, oc.oidcFrom) {
		o, err := r.oidcFrom.build()
		if err != nil {
			return nil, err
		}
		r.oidcChanged, r.oidc = true, o
	}
	return r, nil
}

// commit puts the reload in force: the service tokens, the operator keys,
// the servers and rate limits the console shows, and the OIDC login.
func (r *consoleReload) commit() {
	oc := r.oc
	cfg := r.cfg
	if !cfg.Gateway.Console.Enabled {
		// A console a reload turned off lets no one in (no operator key,
		// no OIDC login, below) until the restart that ends it, and keeps
		// the tokens it reads the services with, which the file need not
		// name: without one, a connection with a client certificate
		// would authenticate as the credential the certificate names,
		// the gateway's.
		off := *cfg
		off.Gateway.Console.OperatorKeys = nil
		cfg = &off
	} else {
		oc.token.Set(cfg.Gateway.Console.AggregatorServiceToken())
		oc.indexerToken.Set(cfg.Gateway.Console.IndexerServiceToken())
	}
	oc.Update(cfg)
	if r.oidcChanged {
		oc.SetOIDC(r.oidc)
		oc.oidcFrom = r.oidcFrom
		oc.log.Info("gateway.console: OIDC login reloaded", "enabled", r.oidc != nil)
	}
}

// reload prepares and commits cfg at once.
func (oc *operatorConsole) reload(cfg *config.Config) error {
	r, err := oc.prepare(cfg)
	if err != nil {
		return err
	}
	r.commit()
	return nil
}

func (oc *operatorConsole) close() {
	if oc.Console != nil {
		oc.Console.Close()
	}
	for _, c := range oc.conns {
		_ = c.Close()
	}
}
