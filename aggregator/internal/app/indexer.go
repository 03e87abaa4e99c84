package app

import (
	"fmt"

	"google.golang.org/grpc"

	"github.com/switchboard-mcp/switchboard/services/config"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/lifecycle"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// indexers are the aggregator's connections to the indexer: pinned
// definitions, rate-limit tokens, tasks and the audit table all call it,
// over one connection per distinct endpoint (aggregator.indexer and
// aggregator.pinning.indexer are usually the same one). Each presents its
// endpoint's token as the configuration has it now: a reload replaces it
// (SetTokens), so a rotated token takes no restart.
type indexers struct {
	env   lifecycle.Env
	conns map[config.Endpoint]*indexerConn
}

// indexerConn is one connection and the token it presents, which SetTokens
// replaces.
type indexerConn struct {
	conn  *grpc.ClientConn
	token *svcauth.LiveToken
	// from is the configuration key whose token it presents, value the
	// token.
	from, value string
}

func newIndexers(env lifecycle.Env) *indexers {
	return &indexers{env: env, conns: map[config.Endpoint]*indexerConn{}}
}

// client is a client of the indexer at ep, dialled on first use; key
// names ep in an error.
func (x *indexers) client(ep config.Endpoint, key string) (indexerv1.IndexerServiceClient, error) {
	conn, err := x.conn(ep, key)
	if err != nil {
		return nil, err
	}
	return indexerv1.NewIndexerServiceClient(conn), nil
}

// clusterState is a client of the indexer's ClusterStateService at ep,
// over the same connection as client's.
func (x *indexers) clusterState(ep config.Endpoint, key string) (indexerv1.ClusterStateServiceClient, error) {
	conn, err := x.conn(ep, key)
	if err != nil {
		return nil, err
	}
	return indexerv1.NewClusterStateServiceClient(conn), nil
}

func (x *indexers) conn(ep config.Endpoint, key string) (*grpc.ClientConn, error) {
	c, ok := x.conns[ep]
	if !ok {
		// serviceAuth.tls.serverName is the name the aggregator checks in
		// its peers' certificates (it dials them by address); the indexer
		// is dialled by its own name.
		tls := x.env.Config.ServiceAuth.TLS
		tls.ServerName = ""
		token := rpc.ClientToken(ep, tls)
		conn, err := rpc.DialLive(ep, tls, token, rpc.ClientKeepalive(x.env.Config.GRPC))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		c = &indexerConn{conn: conn, token: token, from: endpointKey(x.env.Config, ep), value: ep.Token}
		x.conns[ep] = c
	}
	return c.conn, nil
}

// endpointKey is the configuration key of ep in cfg: the one of the
// aggregator's indexer endpoints it is.
func endpointKey(cfg *config.Config, ep config.Endpoint) string {
	if ep == cfg.Aggregator.Indexer {
		return "aggregator.indexer"
	}
	return "aggregator.pinning.indexer"
}

// endpointOf is the endpoint of key in cfg (endpointKey).
func endpointOf(cfg *config.Config, key string) config.Endpoint {
	if key == "aggregator.indexer" {
		return cfg.Aggregator.Indexer
	}
	return cfg.Aggregator.Pinning.Indexer
}

// SetTokens puts in force the tokens cfg gives the endpoints dialled (a
// reload), and reports whether one changed. An endpoint's address is
// read at start only.
func (x *indexers) SetTokens(cfg *config.Config) (changed bool) {
	for ep, c := range x.conns {
		next := endpointOf(cfg, c.from)
		if next.Address != ep.Address || next.Token == c.value {
			continue
		}
		c.token.Set(next.Token)
		c.value, changed = next.Token, true
	}
	return changed
}

// Close closes every connection; what uses them is stopped first.
func (x *indexers) Close() {
	for _, c := range x.conns {
		_ = c.conn.Close()
	}
}
