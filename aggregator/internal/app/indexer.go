package app

import (
	"fmt"

	"google.golang.org/grpc"

	"github.com/switchboard-mcp/switchboard/services/config"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/lifecycle"
	"github.com/switchboard-mcp/switchboard/services/rpc"
)

// indexers are the aggregator's connections to the indexer: pinned
// definitions, rate-limit tokens and the audit table all call it, over
// one connection per distinct endpoint (aggregator.indexer and
// aggregator.pinning.indexer are usually the same one).
type indexers struct {
	env   lifecycle.Env
	conns map[config.Endpoint]*grpc.ClientConn
}

func newIndexers(env lifecycle.Env) *indexers {
	return &indexers{env: env, conns: map[config.Endpoint]*grpc.ClientConn{}}
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
	conn, ok := x.conns[ep]
	if !ok {
		// serviceAuth.tls.serverName is the name the aggregator checks in
		// its peers' certificates (it dials them by address); the indexer
		// is dialled by its own name.
		tls := x.env.Config.ServiceAuth.TLS
		tls.ServerName = ""
		var err error
		if conn, err = rpc.Dial(ep, tls, rpc.ClientKeepalive(x.env.Config.GRPC)); err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		x.conns[ep] = conn
	}
	return conn, nil
}

// Close closes every connection; what uses them is stopped first.
func (x *indexers) Close() {
	for _, conn := range x.conns {
		_ = conn.Close()
	}
}
