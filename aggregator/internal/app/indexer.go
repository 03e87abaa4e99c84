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
// over one connection per endpoint key (aggregator.indexer and
// aggregator.pinning.indexer), each presenting its key's token as the
// configuration has it now: a reload replaces it (SetTokens), so a
// rotated token takes no restart. The two keys usually name the same
// indexer with the same token, but a connection of their own each lets
// one key's token change alone: one shared connection, which presents a
// single token, once kept presenting the old one for the other key.
type indexers struct {
	env   lifecycle.Env
	conns map[indexerKey]*indexerConn
}

// indexerKey is one of the aggregator's indexer endpoint keys.
type indexerKey int

const (
	// keyIndexer is aggregator.indexer (pinning's when unset):
	// rate limits, tasks and the audit table.
	keyIndexer indexerKey = iota
	// keyPinning is aggregator.pinning.indexer: pinned definitions.
	keyPinning
)

// endpoint is k's endpoint in cfg.
func (k indexerKey) endpoint(cfg *config.Config) config.Endpoint {
	if k == keyIndexer {
		return cfg.Aggregator.IndexerEndpoint()
	}
	return cfg.Aggregator.Pinning.Indexer
}

// indexerConn is one connection, the address it was dialled at and the
// token it presents, which SetTokens replaces.
type indexerConn struct {
	conn           *grpc.ClientConn
	token          *svcauth.LiveToken
	address, value string
}

func newIndexers(env lifecycle.Env) *indexers {
	return &indexers{env: env, conns: map[indexerKey]*indexerConn{}}
}

// client is a client of the indexer at k's endpoint, dialled on first
// use; what names the endpoint in an error.
func (x *indexers) client(k indexerKey, what string) (indexerv1.IndexerServiceClient, error) {
	conn, err := x.conn(k, what)
	if err != nil {
		return nil, err
	}
	return indexerv1.NewIndexerServiceClient(conn), nil
}

// clusterState is a client of the indexer's ClusterStateService at k's
// endpoint, over the same connection as client's.
func (x *indexers) clusterState(k indexerKey, what string) (indexerv1.ClusterStateServiceClient, error) {
	conn, err := x.conn(k, what)
	if err != nil {
		return nil, err
	}
	return indexerv1.NewClusterStateServiceClient(conn), nil
}

func (x *indexers) conn(k indexerKey, what string) (*grpc.ClientConn, error) {
	c, ok := x.conns[k]
	if !ok {
		ep := k.endpoint(x.env.Config)
		// serviceAuth.tls.serverName is the name the aggregator checks in
		// its peers' certificates (it dials them by address); the indexer
		// is dialled by its own name.
		tls := x.env.Config.ServiceAuth.TLS
		tls.ServerName = ""
		token := rpc.ClientToken(ep, tls)
		conn, err := rpc.DialLive(ep, tls, token, rpc.ClientKeepalive(x.env.Config.GRPC))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		c = &indexerConn{conn: conn, token: token, address: ep.Address, value: ep.Token}
		x.conns[k] = c
	}
	return c.conn, nil
}

// SetTokens puts in force the tokens cfg gives the endpoints dialled (a
// reload), and reports whether one changed. An endpoint's address is
// read at start only.
func (x *indexers) SetTokens(cfg *config.Config) (changed bool) {
	for k, c := range x.conns {
		next := k.endpoint(cfg)
		if next.Address != c.address || next.Token == c.value {
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
