package isolation

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/rpc"
)

// Helpers of the service-security tests (redirects, per-RPC service
// credentials, mTLS, bounded and redacted operator RPCs).

// svcDeadline bounds every wait of these tests.
const svcDeadline = 60 * time.Second

// grpcConn dials addr in plaintext presenting token.
func grpcConn(t *testing.T, addr, token string) *grpc.ClientConn {
	t.Helper()
	conn, err := rpc.Dial(config.Endpoint{Address: addr, Token: token}, config.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func aggregatorAs(t *testing.T, addr, token string) aggregatorv1.AggregatorServiceClient {
	return aggregatorv1.NewAggregatorServiceClient(grpcConn(t, addr, token))
}

func indexerAs(t *testing.T, addr, token string) indexerv1.IndexerServiceClient {
	return indexerv1.NewIndexerServiceClient(grpcConn(t, addr, token))
}

// callCtx is a context for one RPC of a test.
func callCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// headerLog records the headers of every request an HTTP server receives.
type headerLog struct {
	mu   sync.Mutex
	seen []http.Header
}

func (l *headerLog) record(r *http.Request) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seen = append(l.seen, r.Header.Clone())
}

func (l *headerLog) all() []http.Header {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]http.Header(nil), l.seen...)
}
