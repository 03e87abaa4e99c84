package app_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// TestEveryRPCIsPlaced enumerates the RPCs of IndexerService and
// ClusterStateService from their service descriptors, so that a new RPC
// fails here until it is placed. Search, the
// one RPC that reaches the store on an end user's behalf (find_tool), is
// driven under a limit of one per principal with the audit trail on: its
// scope is the caller's authorized view of the server asked (from the
// aggregator, which applies the server's filters and Cedar), the second
// search is refused RESOURCE_EXHAUSTED, and both are recorded. Every other
// RPC keeps cluster state for the services themselves, under their own
// credentials' allow lists and per-caller quotas, and is named here with
// what it keeps.
func TestEveryRPCIsPlaced(t *testing.T) {
	db := env.NewDatabase(t)
	file := t.TempDir() + "/audit.jsonl"
	limits := config.RateLimits{Limits: []config.RateLimit{{Name: "one-each", Per: config.RatePerPrincipal, Rate: "1/h", Burst: 1}}}
	h := startLimited(t, db, limits, func(c *config.Config) {
		c.Audit = config.Audit{Sink: config.AuditFile, File: file}
	})
	h.agg.SetTools(tools("sales_summary"))
	h.waitServing(t)

	callerRequests := map[string]bool{"Search": true}
	// What each other RPC keeps, for the services (docs/grpc-api.md).
	clusterState := map[string]string{
		"RefreshScope":          "drops a search scope so that it is built again (the aggregator's catalog changed)",
		"Stats":                 "the index's sizes, for operators",
		"RevokeSession":         "Legacy session deletions, for every gateway replica",
		"CheckSession":          "Legacy session deletions",
		"WatchRevocations":      "Legacy session deletions",
		"ConsumeRequestState":   "the multi-round-trip request states used up, once across replicas",
		"ReleaseRequestState":   "the multi-round-trip request states used up (a use given back)",
		"UpdateSessionState":    "Legacy session state (log level, subscriptions)",
		"WatchSessionEvents":    "Legacy session state and relayed input answers",
		"RelayInputResponse":    "an input answer relayed to the gateway replica holding the request",
		"RelayCancellation":     "a cancellation relayed to the gateway replica holding the request",
		"RecordToolDefinitions": "pinned tool definitions",
		"ApproveToolDefinition": "pinned tool definitions' approvals (operators)",
		"ListToolDefinitions":   "pinned tool definitions",
		"WatchToolDefinitions":  "pinned tool definitions' approvals",
		"AcquireRateTokens":     "the shared rate-limit buckets",
		"ListRateLimitBuckets":  "the shared rate-limit buckets (operators)",
		"RecordAuditEvents":     "the audit trail's database table",
		"QueryAuditEvents":      "the audit trail's database table (operators)",
		"CreateTask":            "the aggregators' MCP tasks, for every aggregator replica",
		"GetTask":               "the aggregators' MCP tasks",
		"ListTasks":             "the aggregators' MCP tasks",
		"AdvanceTask":           "the aggregators' MCP tasks (their runners' changes)",
		"AnswerTask":            "the aggregators' MCP tasks (their clients' answers)",
		"CancelTask":            "the aggregators' MCP tasks",
		"RenewTaskLeases":       "the aggregators' MCP tasks (their runners' leases)",
	}
	// Search's service holds the search and, for one release, deprecated
	// copies of the cluster state's RPCs; ClusterStateService holds the
	// cluster state only.
	for _, desc := range []grpc.ServiceDesc{indexerv1.IndexerService_ServiceDesc, indexerv1.ClusterStateService_ServiceDesc} {
		var names []string
		for _, m := range desc.Methods {
			names = append(names, m.MethodName)
		}
		for _, s := range desc.Streams {
			names = append(names, s.StreamName)
		}
		for _, name := range names {
			switch {
			case desc.ServiceName == "switchboard.indexer.v1.ClusterStateService" && clusterState[name] == "":
				t.Errorf("ClusterStateService's RPC %s is not cluster state: place it in this test", name)
			case !callerRequests[name] && clusterState[name] == "":
				t.Errorf("RPC %s of %s is placed neither as a caller's request (admitted: scope, limit, audit) nor as cluster state: place it in this test", name, desc.ServiceName)
			}
		}
	}

	// The cluster state's service answers a credential whose allow list
	// names the RPC's old name (the aggregator's built-in list still does),
	// and so does the old name.
	conn, err := grpc.NewClient(h.addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithPerRPCCredentials(svcauth.TokenCredentials{Token: aggregatorToken}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	take := &indexerv1.AcquireRateTokensRequest{Keys: []*indexerv1.RateTokenRequest{{Key: "placed", RatePerSecond: 1, Burst: 2, Tokens: 1}}}
	for _, acquire := range []func() (*indexerv1.AcquireRateTokensResponse, error){
		func() (*indexerv1.AcquireRateTokensResponse, error) {
			return indexerv1.NewClusterStateServiceClient(conn).AcquireRateTokens(t.Context(), take)
		},
		func() (*indexerv1.AcquireRateTokensResponse, error) {
			return indexerv1.NewIndexerServiceClient(conn).AcquireRateTokens(t.Context(), take)
		},
	} {
		if resp, err := acquire(); err != nil || resp.GetGrants()[0].GetGranted() != 1 {
			t.Fatalf("AcquireRateTokens: %v %v", resp, err)
		}
	}

	if _, err := h.search(t, "alice", "sales", 0); err != nil {
		t.Fatalf("first search: %v", err)
	}
	_, err = h.search(t, "alice", "sales", 0)
	wantReason(t, err, codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_RATE_LIMITED)

	var outcomes []audit.Outcome
	testkit.Eventually(t, "both searches in the trail", 30*time.Second, func() bool {
		outcomes = outcomes[:0]
		raw, _ := os.ReadFile(file)
		lines := bufio.NewScanner(bytes.NewReader(raw))
		for lines.Scan() {
			var e audit.Event
			if json.Unmarshal(lines.Bytes(), &e) == nil && e.Subject == "alice" && e.Kind == audit.KindFindTool {
				outcomes = append(outcomes, e.Outcome)
			}
		}
		return len(outcomes) >= 2
	})
	if len(outcomes) != 2 || outcomes[0] != audit.OutcomeOK || outcomes[1] != audit.OutcomeRateLimited {
		t.Fatalf("find_tool outcomes %v, want [ok rate_limited]", outcomes)
	}
}
