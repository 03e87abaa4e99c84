package multiagg

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"testing"

	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/rpc/dnstest"
)

// TestIndexerReadsAViewFromOneReplica: two aggregator replicas that
// disagree (each sees another backend, as when one cannot reach a backend),
// both behind one DNS name the indexer balances over, and views of two
// pages (1100 tools, pages of 1000). The balanced client sends consecutive
// pages to alternate replicas, so no balanced listing is whole; the retry
// goes through the indexer's pinned connection, which reads every page
// from one replica, and the search succeeds with that replica's view.
// Without the pinned retry every search fails UNAVAILABLE.
func TestIndexerReadsAViewFromOneReplica(t *testing.T) {
	w := newWorld(t)
	w.backend("alpha", "--synthetic", "1100")
	w.backend("beta", "--synthetic", "1100")
	port := sharedPort(t)
	first, second := w.config("alpha"), w.config("beta")
	first.Aggregator.Listen = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	second.Aggregator.Listen = net.JoinHostPort("127.0.0.2", strconv.Itoa(port))
	w.startAggregator("aggregator-1", first)
	w.startAggregator("aggregator-2", second)
	dns, err := dnstest.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dns.Close() })
	dns.Set("aggregators.multiagg.test", netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.2"))
	idx := w.startIndexer(fmt.Sprintf("dns://%s/aggregators.multiagg.test:%d", dns.Addr(), port))
	ctx := ctxT(t)

	for i := range 6 {
		// A principal of its own each time: a new build, not a cached scope.
		p := &commonv1.Principal{Subject: fmt.Sprintf("user-%d", i)}
		resp, err := idx.Search(ctx, &indexerv1.SearchRequest{Principal: p, Query: "synthetic echo tool", Limit: 50})
		if err != nil {
			t.Fatalf("search %d: %v", i, err)
		}
		if b := hitBackends(resp); len(b) != 1 || resp.GetScopeSize() != 1100 {
			t.Fatalf("search %d: hits from %v, scope of %d; want one replica's whole view", i, b, resp.GetScopeSize())
		}
	}
	for digest, backends := range scopesByBackend(t, ctx, w.database) {
		if len(backends) != 1 {
			t.Fatalf("scope %s holds the tools of %v", digest, backends)
		}
	}
}

// sharedPort returns a port free on both 127.0.0.1 and 127.0.0.2.
func sharedPort(t *testing.T) int {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if l2, err := net.Listen("tcp", net.JoinHostPort("127.0.0.2", strconv.Itoa(port))); err == nil {
			l2.Close()
			return port
		}
	}
	t.Fatal("no port free on 127.0.0.1 and 127.0.0.2")
	return 0
}
