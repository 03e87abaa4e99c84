package app

import (
	"context"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/config"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/lifecycle"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// TestIndexerTokensRotateOneKeyAtATime: with aggregator.indexer and
// aggregator.pinning.indexer naming the same indexer with the same
// token, a reload that rotates one key's token makes that key's calls
// present the new token and leaves the other's alone. The two shared a
// connection, tagged with whichever key dialled it first, so a rotation
// of the other key was ignored (configuration.md, live reload, promises
// it takes effect).
func TestIndexerTokensRotateOneKeyAtATime(t *testing.T) {
	var caller string
	fake := &testkit.FakeIndexer{
		Check: func(ctx context.Context, _ string, _ any) error {
			c, _ := svcauth.CallerFrom(ctx)
			caller = c.Name
			return nil
		},
		StatsFunc: func(context.Context, *indexerv1.StatsRequest) (*indexerv1.StatsResponse, error) {
			return &indexerv1.StatsResponse{}, nil
		},
	}
	allow := []string{indexerv1.IndexerService_Stats_FullMethodName[1:]}
	srv := testkit.Serve(t, []config.ServiceCredential{{Name: "old", Token: "old-token", Allow: allow}, {Name: "new", Token: "new-token", Allow: allow}}, fake.Register)
	cfg := &config.Config{}
	cfg.Aggregator.Indexer = config.Endpoint{Address: srv.Addr, Token: "old-token"}
	cfg.Aggregator.Pinning.Indexer = cfg.Aggregator.Indexer
	x := newIndexers(lifecycle.Env{Config: cfg})
	t.Cleanup(x.Close)
	// As the aggregator starts: the pinning guard dials first.
	pinning, err := x.client(keyPinning, "aggregator.pinning.indexer")
	if err != nil {
		t.Fatal(err)
	}
	limits, err := x.client(keyIndexer, "aggregator.indexer")
	if err != nil {
		t.Fatal(err)
	}
	presents := func(c indexerv1.IndexerServiceClient) string {
		t.Helper()
		if _, err := c.Stats(t.Context(), &indexerv1.StatsRequest{}); err != nil {
			t.Fatal(err)
		}
		return caller
	}
	for _, rotated := range []struct {
		key             string
		rotate          func(*config.Config)
		pinning, limits string
	}{
		{"aggregator.pinning.indexer", func(c *config.Config) { c.Aggregator.Pinning.Indexer.Token = "new-token" }, "new", "old"},
		{"aggregator.indexer", func(c *config.Config) { c.Aggregator.Indexer.Token = "new-token" }, "new", "new"},
	} {
		next := *cfg
		rotated.rotate(&next)
		cfg = &next
		if !x.SetTokens(cfg) {
			t.Fatalf("a reload rotating %s changed no token", rotated.key)
		}
		if p, l := presents(pinning), presents(limits); p != rotated.pinning || l != rotated.limits {
			t.Fatalf("after rotating %s: pinning presents %s's token, aggregator.indexer %s's; want %s and %s", rotated.key, p, l, rotated.pinning, rotated.limits)
		}
	}
}
