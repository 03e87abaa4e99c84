package server_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/authz"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/catalog"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/engine"
	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// watchEvents opens a watch and returns its first event and a channel of
// the events after it.
func watchEvents(t *testing.T, c aggregatorv1.AggregatorServiceClient, req *aggregatorv1.WatchCatalogRequest) (*aggregatorv1.WatchCatalogResponse, <-chan *aggregatorv1.WatchCatalogResponse) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stream, err := c.WatchCatalog(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	events := make(chan *aggregatorv1.WatchCatalogResponse, 16)
	go func() {
		for {
			ev, err := stream.Recv()
			if err != nil {
				return
			}
			events <- ev
		}
	}()
	return first, events
}

func nextEvent(t *testing.T, who string, events <-chan *aggregatorv1.WatchCatalogResponse) *aggregatorv1.WatchCatalogResponse {
	t.Helper()
	select {
	case ev := <-events:
		return ev
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no event within 10s", who)
		return nil
	}
}

// TestPolicySwapWakesOnlyChangedViews replaces the Cedar policy of a
// running engine: the catalog (and its version) stays, the principal whose
// view changed is told, the one whose view did not is not, watchers of all
// changes are told that every view may have changed, and lists and calls
// follow the new policy at once.
func TestPolicySwapWakesOnlyChangedViews(t *testing.T) {
	b := newTestBackend(t, "eng", backendOptions{tools: []string{"build", "deploy"}})
	h := startAggregator(t, parseConfig(t, `
aggregator:
  authz: {policyFile: `+writeFile(t, "policy.cedar", "permit (principal, action, resource);\n")+`}
  backends:
    - {name: eng, url: `+b.url()+`}
`))
	alice, bob := principal("alice"), principal("bob")
	aliceFirst, aliceEvents := watchEvents(t, h.gateway, &aggregatorv1.WatchCatalogRequest{Principal: alice})
	bobFirst, bobEvents := watchEvents(t, h.gateway, &aggregatorv1.WatchCatalogRequest{Principal: bob})
	_, allEvents := watchEvents(t, h.gateway, &aggregatorv1.WatchCatalogRequest{AllChanges: true})
	// Decisions are cached per snapshot: make some before the swap.
	if !slices.Contains(listToolNames(t, h.gateway, alice, 0), "eng_deploy") {
		t.Fatal("alice does not see eng_deploy before the swap")
	}
	if _, err := h.gateway.CallTool(context.Background(), &aggregatorv1.CallToolRequest{Principal: alice, Name: "eng_deploy", ArgumentsJson: "{}"}); err != nil {
		t.Fatalf("alice calls eng_deploy before the swap: %v", err)
	}

	az, err := authz.Parse("new", []byte("permit (principal, action, resource);\nforbid (principal == User::\"alice\", action, resource == Tool::\"eng_deploy\");\n"))
	if err != nil {
		t.Fatal(err)
	}
	h.engine.SetAuthorizer(az)

	ev := nextEvent(t, "alice", aliceEvents)
	if !slices.Equal(ev.GetChanged(), []aggregatorv1.CatalogKind{aggregatorv1.CatalogKind_CATALOG_KIND_TOOLS}) ||
		ev.GetCatalogVersion() != aliceFirst.GetCatalogVersion() || ev.GetToolsDigest() == aliceFirst.GetToolsDigest() {
		t.Fatalf("alice's event %v after her first %v: want tools changed, the same version, another digest", ev, aliceFirst)
	}
	if all := nextEvent(t, "all changes", allEvents); len(all.GetChanged()) != 4 {
		t.Fatalf("all-changes event %v: want every kind", all)
	}
	if slices.Contains(listToolNames(t, h.gateway, alice, 0), "eng_deploy") {
		t.Fatal("alice still lists eng_deploy")
	}
	_, err = h.gateway.CallTool(context.Background(), &aggregatorv1.CallToolRequest{Principal: alice, Name: "eng_deploy", ArgumentsJson: "{}"})
	wantStatus(t, err, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	if !slices.Contains(listToolNames(t, h.gateway, bob, 0), "eng_deploy") {
		t.Fatal("bob lost eng_deploy")
	}

	// Bob's next event is the next change of the catalog, not the policy.
	b.addEchoTool("later")
	ev = nextEvent(t, "bob", bobEvents)
	if ev.GetCatalogVersion() == bobFirst.GetCatalogVersion() {
		t.Fatalf("bob got an event for the policy swap, which did not change his view: %v", ev)
	}
}

// TestReconfigurePublishesBackendsAndPolicyTogether: a reload that adds a
// backend and a policy forbidding one of its tools puts both in force in
// one build. The new backend's tools are never listed or callable under
// the old (permissive) policy: from the first catalog that holds them,
// alice's view lacks the forbidden one.
func TestReconfigurePublishesBackendsAndPolicyTogether(t *testing.T) {
	eng := newTestBackend(t, "eng", backendOptions{tools: []string{"build"}})
	ops := newTestBackend(t, "ops", backendOptions{tools: []string{"status", "restart"}})
	full := &config.Config{Aggregator: parseConfig(t, `
aggregator:
  authz: {policyFile: `+writeFile(t, "policy.cedar", "permit (principal, action, resource);\n")+`}
  backends:
    - {name: eng, url: `+eng.url()+`}
`)}
	h := startAggregator(t, full.Aggregator)
	alice := principal("alice")
	if got := listToolNames(t, h.gateway, alice, 0); !slices.Contains(got, "eng_build") || slices.Contains(got, "ops_status") {
		t.Fatalf("before the reload alice sees %v", got)
	}
	// Every catalog published from here on is looked at as it is
	// published: none may show alice ops_restart.
	var leaked atomic.Bool
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			snap, superseded := h.engine.Snapshot()
			if item, ok := snap.Tool("ops_restart"); ok {
				if _, err := h.engine.Owner(snap, alice, catalog.KindTools, item.Key, item.Backend); !errors.Is(err, engine.ErrNotFound) {
					leaked.Store(true)
				}
			}
			select {
			case <-superseded:
			case <-stop:
				return
			}
		}
	}()

	full.Aggregator.Authz.PolicyFile = writeFile(t, "policy2.cedar", "permit (principal, action, resource);\nforbid (principal == User::\"alice\", action, resource == Tool::\"ops_restart\");\n")
	full.Aggregator.Backends = append(full.Aggregator.Backends, config.Backend{Name: "ops", URL: ops.url()})
	reconfigure(t, h, full)
	testkit.Eventually(t, "ops listed", 10*time.Second, func() bool {
		return slices.Contains(listToolNames(t, h.gateway, alice, 0), "ops_status")
	})
	close(stop)
	<-watched
	if got := listToolNames(t, h.gateway, alice, 0); slices.Contains(got, "ops_restart") {
		t.Errorf("after the reload alice sees %v", got)
	}
	if _, err := h.gateway.CallTool(context.Background(), &aggregatorv1.CallToolRequest{Principal: alice, Name: "ops_restart", ArgumentsJson: "{}"}); status.Code(err) != codes.NotFound {
		t.Errorf("alice calls ops_restart after the reload: %v, want NotFound", err)
	}
	if leaked.Load() {
		t.Error("a catalog holding ops_restart was published under the old policy")
	}
}

// TestViewDigestSeesAPolicyOnPrompts: a policy that changes only a
// principal's prompts keeps the catalog version and the tools digest but
// not the view digest, so a watch reopened after it (a replica's restart
// with the policy, a failover) tells the change from no change.
func TestViewDigestSeesAPolicyOnPrompts(t *testing.T) {
	b := newTestBackend(t, "eng", backendOptions{tools: []string{"build"}, extra: func(b *testBackend) {
		b.server.AddPrompt(&mcp.Prompt{Name: "greet"}, func(context.Context, *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{}, nil
		})
	}})
	h := startAggregator(t, parseConfig(t, `
aggregator:
  authz: {policyFile: `+writeFile(t, "policy.cedar", "permit (principal, action, resource);\n")+`}
  backends:
    - {name: eng, url: `+b.url()+`}
`))
	alice := principal("alice")
	before, events := watchEvents(t, h.gateway, &aggregatorv1.WatchCatalogRequest{Principal: alice})
	az, err := authz.Parse("new", []byte("permit (principal, action, resource);\nforbid (principal == User::\"alice\", action, resource == Prompt::\"eng_greet\");\n"))
	if err != nil {
		t.Fatal(err)
	}
	h.engine.SetAuthorizer(az)
	if ev := nextEvent(t, "alice", events); !slices.Equal(ev.GetChanged(), []aggregatorv1.CatalogKind{aggregatorv1.CatalogKind_CATALOG_KIND_PROMPTS}) || ev.GetViewDigest() == before.GetViewDigest() {
		t.Fatalf("live event %v, want prompts changed under a new view digest", ev)
	}
	after, _ := watchEvents(t, h.gateway, &aggregatorv1.WatchCatalogRequest{Principal: alice})
	if after.GetViewDigest() == "" || after.GetViewDigest() == before.GetViewDigest() {
		t.Fatalf("a watch opened after the policy: view digest %q, as before (%q)", after.GetViewDigest(), before.GetViewDigest())
	}
}
