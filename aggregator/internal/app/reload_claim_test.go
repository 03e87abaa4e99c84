package app

import (
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/engine"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/server"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/lifecycle"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// A reload of gateway.auth.oidc.groupsClaim, which the gateway applies
// live, reaches the aggregator's binding of callers' tokens at once:
// otherwise the gateway would make principals' groups of the new claim
// while the aggregator bound tokens with the old one, and refuse every
// tokenExchange call of a user with groups.
func TestReloadAppliesTheGroupsClaim(t *testing.T) {
	cfg := &config.Config{}
	cfg.Gateway.Auth.OIDC.GroupsClaim = "groups"
	l, api := newLive(t, cfg, func(api *server.Server) *server.Server { return api.WithGroupsClaim(cfg.Gateway.Auth.OIDC.GroupsClaim) })
	next := *cfg
	next.Gateway.Auth.OIDC.GroupsClaim = "roles"
	if err := l.Apply(&next); err != nil {
		t.Fatal(err)
	}
	if got := api.GroupsClaim(); got != "roles" {
		t.Fatalf("after the reload tokens are bound with claim %q, want roles", got)
	}
}

// TestReloadAppliesWhereCodeModeIsOffered: aggregator.codeMode.enabled
// follows a reload, as documented (servers[].codeMode is read by the same
// function); run_code was once offered as at start until the groups claim
// changed too.
func TestReloadAppliesWhereCodeModeIsOffered(t *testing.T) {
	cfg := &config.Config{}
	cfg.Aggregator.CodeMode.Enabled = true
	l, api := newLive(t, cfg, func(api *server.Server) *server.Server {
		return api.WithCodeMode(cfg.Aggregator.CodeMode.WithDefaults(), []string{"unused"}, cfg.CodeModeIn)
	})
	offered := func() bool {
		t.Helper()
		d, err := api.Discover(context.Background(), &aggregatorv1.DiscoverRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return d.GetCodeMode()
	}
	for _, enabled := range []bool{true, false, true} {
		next := *cfg
		next.Aggregator.CodeMode.Enabled = enabled
		if err := l.Apply(&next); err != nil {
			t.Fatal(err)
		}
		if offered() != enabled {
			t.Fatalf("after a reload with aggregator.codeMode.enabled %v, run_code offered %v", enabled, offered())
		}
	}
}

// newLive is the reload of an aggregator started with cfg, its API made
// by with; nothing is listening.
func newLive(t *testing.T, cfg *config.Config, with func(*server.Server) *server.Server) (*live, *server.Server) {
	t.Helper()
	opts, err := engine.OptionsFromConfig(cfg.Aggregator.WithDefaults())
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	opts.Log = log
	e, err := engine.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	api := with(server.New(e))
	return &live{started: cfg, applied: cfg, engine: e, api: api, log: log, services: svcauth.NewAuthenticator(nil)}, api
}

// TestReloadRotatesTheIndexerTokens: the tokens the aggregator presents
// to the indexer follow a reload, without a restart, as the rotation of
// service tokens the operations guide describes needs: the new token
// alone is accepted, and the aggregator's calls get through once the
// reload named it. They were read at start only, and the aggregator was
// cut off from the indexer (rate limits, pinning, tasks, the audit
// table) once the old token was removed.
func TestReloadRotatesTheIndexerTokens(t *testing.T) {
	idx := testkit.Serve(t, []config.ServiceCredential{{Name: "aggregator", Token: "new-token", AssertPrincipals: true, Allow: config.AggregatorMethods}},
		(&testkit.FakeIndexer{}).Register)
	cfg := &config.Config{}
	cfg.Aggregator.Indexer = config.Endpoint{Address: idx.Addr, Token: "old-token"}
	cfg.Aggregator.Pinning.Indexer = cfg.Aggregator.Indexer
	l, _ := newLive(t, cfg, func(api *server.Server) *server.Server { return api })
	logs := &strings.Builder{}
	l.log = slog.New(slog.NewTextHandler(logs, nil))
	l.indexers = newIndexers(lifecycle.Env{Config: cfg})
	t.Cleanup(l.indexers.Close)
	client, err := l.indexers.client(keyIndexer, "aggregator.indexer")
	if err != nil {
		t.Fatal(err)
	}
	record := func() error {
		_, err := client.RecordToolDefinitions(context.Background(), &indexerv1.RecordToolDefinitionsRequest{})
		return err
	}
	if err := record(); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("with the old token: %v, want Unauthenticated", err)
	}
	next := *cfg
	next.Aggregator.Indexer.Token, next.Aggregator.Pinning.Indexer.Token = "new-token", "new-token"
	if err := l.Apply(&next); err != nil {
		t.Fatal(err)
	}
	if err := record(); status.Code(err) == codes.Unauthenticated {
		t.Fatalf("after the reload named the new token: %v", err)
	}
	if strings.Contains(logs.String(), "needs a restart") {
		t.Errorf("the rotation was reported as needing a restart:\n%s", logs.String())
	}
}
