package app

import (
	"fmt"
	"log/slog"

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
}

// startConsole builds the console when gateway.console.enabled.
func startConsole(cfg *config.Config, keepalive grpc.DialOption, log *slog.Logger) (*operatorConsole, error) {
	gw := cfg.Gateway.WithDefaults()
	tls := cfg.ServiceAuth.TLS
	oc := &operatorConsole{token: svcauth.NewLiveToken(gw.Console.AggregatorServiceToken(), tls.Enabled()),
		indexerToken: svcauth.NewLiveToken(gw.Console.IndexerServiceToken(), tls.Enabled())}
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
	if gw.Console.OIDC.Enabled() {
		if deps.OIDC, err = console.NewOIDCLogin(gw.Console.OIDC, gw.Auth.OIDC, nil); err != nil {
			oc.close()
			return nil, err
		}
	}
	if oc.Console, err = console.New(cfg, deps); err != nil {
		oc.close()
		return nil, err
	}
	return oc, nil
}

// reload applies what the console takes live: its service tokens, the
// operator keys, the servers and rate limits it shows.
func (oc *operatorConsole) reload(cfg *config.Config) {
	oc.token.Set(cfg.Gateway.Console.AggregatorServiceToken())
	oc.indexerToken.Set(cfg.Gateway.Console.IndexerServiceToken())
	oc.Update(cfg)
}

func (oc *operatorConsole) close() {
	if oc.Console != nil {
		oc.Console.Close()
	}
	for _, c := range oc.conns {
		_ = c.Close()
	}
}
