package server_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/backenderr"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

func backendHealth(t *testing.T, h *harness, name string) *aggregatorv1.Backend {
	t.Helper()
	resp, err := h.gateway.ListBackends(context.Background(), &aggregatorv1.ListBackendsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range resp.GetBackends() {
		if b.GetName() == name {
			return b
		}
	}
	t.Fatalf("backend %s not listed", name)
	return nil
}

func TestUnhealthyBackendDropsOutFailsFastAndRecovers(t *testing.T) {
	steady := newTestBackend(t, "steady", backendOptions{tools: []string{"ping"}})
	// Auto protocol against a Legacy-only server: Modern first, then the
	// SDK's fallback.
	flaky := newTestBackend(t, "flaky", backendOptions{stateful: true, tools: []string{"ping"}, extra: withWhoami})
	t.Setenv("TEST_FLAKY_TOKEN", "hunter2-flaky-secret")
	logs := &testkit.LogBuffer{}
	h, err := startAggregatorLogging(t, parseConfig(t, `
aggregator:
  catalogTTL: 1h
  health: {interval: 50ms, timeout: 500ms, unhealthyThreshold: 2}
  backends:
    - {name: steady, url: `+steady.url()+`}
    - name: flaky
      url: `+flaky.url()+`
      headers: {Authorization: "Bearer ${TEST_FLAKY_TOKEN}"}
`), slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	if err != nil {
		t.Fatal(err)
	}
	all := []string{"flaky_fail", "flaky_hang", "flaky_ping", "flaky_whoami", "steady_fail", "steady_hang", "steady_ping"}
	if got := listToolNames(t, h.gateway, nil, 0); !slices.Equal(got, all) {
		t.Fatalf("tools %v", got)
	}
	if v := backendHealth(t, h, "flaky").GetProtocolVersion(); v != "2025-11-25" {
		t.Fatalf("auto against a Legacy-only backend negotiated %q", v)
	}
	// The latency of the last success, which the degraded threshold is
	// compared with: a loopback backend answers within the probe timeout.
	if l := backendHealth(t, h, "steady").GetLastLatency(); l == nil || l.AsDuration() <= 0 || l.AsDuration() > 500*time.Millisecond {
		t.Fatalf("steady's last latency %v", l)
	}

	// A backend's protocol error comes back as BACKEND_ERROR with its detail
	// (go-sdk answers a handler's plain Go error with code 0),
	// and with the backend's secrets cut out.
	_, err = h.gateway.CallTool(context.Background(), &aggregatorv1.CallToolRequest{Name: "flaky_whoami"})
	wantStatus(t, err, codes.Unknown, commonv1.ErrorReason_ERROR_REASON_BACKEND_ERROR)
	if be, ok := backenderr.From(err); !ok || strings.Contains(err.Error(), "hunter2") || strings.Contains(be.GetMessage(), "hunter2") ||
		!strings.Contains(err.Error(), "[redacted]") || !strings.Contains(be.GetMessage(), "[redacted]") {
		t.Fatalf("backend error %v (detail %v)", err, be)
	}

	flaky.down.Store(true)
	testkit.Eventually(t, "flaky unhealthy", 3*time.Second, func() bool {
		return backendHealth(t, h, "flaky").GetHealth() == aggregatorv1.BackendHealth_BACKEND_HEALTH_UNHEALTHY
	})
	testkit.Eventually(t, "flaky tools hidden", 2*time.Second, func() bool {
		return slices.Equal(listToolNames(t, h.gateway, nil, 0), []string{"steady_fail", "steady_hang", "steady_ping"})
	})
	b := backendHealth(t, h, "flaky")
	if b.GetLastError() == "" || strings.Contains(b.GetLastError(), "hunter2") || b.GetLastCheck() == nil {
		t.Fatalf("unhealthy backend report: %v", b)
	}
	start := time.Now()
	_, err = h.gateway.CallTool(context.Background(), &aggregatorv1.CallToolRequest{Name: "flaky_ping"})
	wantStatus(t, err, codes.Unavailable, commonv1.ErrorReason_ERROR_REASON_BACKEND_UNAVAILABLE)
	if took := time.Since(start); took > 200*time.Millisecond {
		t.Fatalf("call to an unhealthy backend took %s; it should fail fast", took)
	}
	if _, err := h.gateway.CallTool(context.Background(), &aggregatorv1.CallToolRequest{Name: "steady_ping"}); err != nil {
		t.Fatalf("healthy backend affected: %v", err)
	}

	flaky.down.Store(false)
	testkit.Eventually(t, "flaky recovered and listed", 3*time.Second, func() bool {
		return slices.Equal(listToolNames(t, h.gateway, nil, 0), all)
	})
	if b := backendHealth(t, h, "flaky"); b.GetHealth() != aggregatorv1.BackendHealth_BACKEND_HEALTH_HEALTHY || b.GetLastError() != "" {
		t.Fatalf("recovered backend report: %v", b)
	}
	if _, err := h.gateway.CallTool(context.Background(), &aggregatorv1.CallToolRequest{Name: "flaky_ping"}); err != nil {
		t.Fatalf("call after recovery: %v", err)
	}
	if out := logs.String(); strings.Contains(out, "hunter2") || !strings.Contains(out, "flaky") {
		t.Fatalf("logs leak the backend secret or say nothing about the backend:\n%s", out)
	}
	// Probes never carry a user credential: every request the backend saw
	// had only its configured header.
	for _, v := range flaky.headerValues("Authorization") {
		if v != "Bearer hunter2-flaky-secret" {
			t.Fatalf("backend saw Authorization %q", v)
		}
	}
}

const matrixPolicy = `
// eng sees every tool of backend "eng".
permit (principal in Group::"eng", action == Action::"call_tool", resource in Backend::"eng");
// sales may call one tool of "crm" only.
permit (principal in Group::"sales", action == Action::"call_tool", resource == Tool::"crm_lookup");
// Nobody calls the hanging tools.
forbid (principal, action == Action::"call_tool", resource == Tool::"eng_hang");
// Everyone reads everything.
permit (principal, action == Action::"read_resource", resource);
`

func TestCedarMatrix(t *testing.T) {
	eng := newTestBackend(t, "eng", backendOptions{tools: []string{"build", "deploy"}})
	crm := newTestBackend(t, "crm", backendOptions{stateful: true, tools: []string{"lookup", "update"}})
	h := startAggregator(t, parseConfig(t, `
aggregator:
  authz: {policyFile: `+writeFile(t, "policy.cedar", matrixPolicy)+`}
  backends:
    - {name: eng, url: `+eng.url()+`}
    - {name: crm, url: `+crm.url()+`, protocol: "2025-11-25"}
`))
	ctx := context.Background()
	alice, bob, carol := principal("alice", "eng"), principal("bob", "sales"), principal("carol", "eng")
	views := map[string]struct {
		p    *commonv1.Principal
		want []string
	}{
		"alice":  {alice, []string{"eng_build", "eng_deploy", "eng_fail"}},
		"bob":    {bob, []string{"crm_lookup"}},
		"nobody": {principal("mallory"), nil},
	}
	for who, v := range views {
		if got := listToolNames(t, h.gateway, v.p, 0); !slices.Equal(got, v.want) {
			t.Errorf("%s lists %v, want %v", who, got, v.want)
		}
		d, err := h.gateway.Discover(ctx, &aggregatorv1.DiscoverRequest{Principal: v.p})
		if err != nil || int(d.GetToolCount()) != len(v.want) {
			t.Errorf("%s discovers %v (%v), want %d tools", who, d, err, len(v.want))
		}
		for _, name := range []string{"eng_build", "crm_lookup", "crm_update", "eng_hang"} {
			_, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: v.p, Name: name})
			if slices.Contains(v.want, name) != (err == nil) {
				t.Errorf("%s calling %s: %v", who, name, err)
			}
		}
	}

	// Denied looks exactly like missing.
	_, denied := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: bob, Name: "crm_update"})
	_, missing := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: bob, Name: "crm_no_such_tool"})
	wantStatus(t, denied, codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	if ds, ms := status.Convert(denied), status.Convert(missing); ds.Code() != ms.Code() || ds.Message() != ms.Message() || len(ds.Details()) != len(ms.Details()) {
		t.Fatalf("denied %v differs from missing %v", ds, ms)
	}

	// Equal views share a digest; different views do not.
	digest := func(p *commonv1.Principal) string {
		d, err := h.gateway.Discover(ctx, &aggregatorv1.DiscoverRequest{Principal: p})
		if err != nil {
			t.Fatal(err)
		}
		return d.GetToolsDigest()
	}
	if digest(alice) != digest(carol) || digest(alice) == digest(bob) {
		t.Fatal("tools_digest does not track the tool view")
	}

	// An internal client acts as its own identity and may not assert another.
	_, err := h.internal.ListTools(ctx, &aggregatorv1.ListToolsRequest{Principal: alice})
	wantStatus(t, err, codes.PermissionDenied, commonv1.ErrorReason_ERROR_REASON_PRINCIPAL_NOT_ALLOWED)
	if got := listToolNames(t, h.internal, nil, 0); len(got) != 0 {
		t.Fatalf("internal client (group ops) lists %v", got)
	}
	stream, err := h.internal.WatchCatalog(ctx, &aggregatorv1.WatchCatalogRequest{AllChanges: true})
	if err == nil {
		_, err = stream.Recv()
	}
	wantStatus(t, err, codes.PermissionDenied, commonv1.ErrorReason_ERROR_REASON_PRINCIPAL_NOT_ALLOWED)

	// The trusted all-changes view never leaks to a principal, whatever
	// its name.
	all, err := h.gateway.WatchCatalog(ctx, &aggregatorv1.WatchCatalogRequest{AllChanges: true})
	if err != nil {
		t.Fatal(err)
	}
	if first, err := all.Recv(); err != nil || first.GetToolsDigest() == digest(alice) {
		t.Fatalf("all-changes watch: %v %v", first, err)
	}
	if got := listToolNames(t, h.gateway, principal("", "all"), 0); len(got) != 0 {
		t.Fatalf("principal {\"\", [all]} lists %v", got)
	}
	if resp, err := h.internal.ListBackends(ctx, &aggregatorv1.ListBackendsRequest{}); err != nil || len(resp.GetBackends()) != 0 {
		t.Fatalf("untrusted caller sees backends it has nothing of: %v %v", resp, err)
	}

	// ListBackends with a principal lists only what it can see, and
	// counts only that: crm's other tool is denied to bob, and denied
	// looks like missing.
	resp, err := h.gateway.ListBackends(ctx, &aggregatorv1.ListBackendsRequest{Principal: bob})
	if err != nil || len(resp.GetBackends()) != 1 || resp.GetBackends()[0].GetName() != "crm" {
		t.Fatalf("bob's backends: %v %v", resp, err)
	}
	if n := resp.GetBackends()[0].GetToolCount(); n != 1 {
		t.Fatalf("bob sees 1 tool of crm, and ListBackends tells him it has %d", n)
	}
}

func TestDegradedBackendStaysListed(t *testing.T) {
	slow := newTestBackend(t, "slow", backendOptions{tools: []string{"ping"}})
	// Any answer is slower than a nanosecond.
	h := startAggregator(t, parseConfig(t, `
aggregator:
  health: {interval: 20ms, degradedThreshold: 1ns}
  backends:
    - {name: slow, url: `+slow.url()+`}
`))
	testkit.Eventually(t, "slow degraded", 2*time.Second, func() bool {
		return backendHealth(t, h, "slow").GetHealth() == aggregatorv1.BackendHealth_BACKEND_HEALTH_DEGRADED
	})
	if got := listToolNames(t, h.gateway, nil, 0); !slices.Contains(got, "slow_ping") {
		t.Fatalf("degraded backend's tools dropped: %v", got)
	}
	if _, err := h.gateway.CallTool(context.Background(), &aggregatorv1.CallToolRequest{Name: "slow_ping"}); err != nil {
		t.Fatalf("calling a degraded backend: %v", err)
	}
}

func TestLegacySessionLostOnRestartIsReopened(t *testing.T) {
	legacy := newTestBackend(t, "legacy", backendOptions{stateful: true, tools: []string{"ping"}})
	h := startBeforeLegacy(t, legacy, ``)
	call := func() error {
		_, err := h.gateway.CallTool(context.Background(), &aggregatorv1.CallToolRequest{Name: "legacy_ping"})
		return err
	}
	if err := call(); err != nil {
		t.Fatal(err)
	}
	sessions := len(legacy.headerValues("Mcp-Session-Id"))
	legacy.restart()
	// The old session is unknown to the restarted backend (404); the call is
	// not lost: the aggregator opens a new session and sends it again.
	if err := call(); err != nil {
		t.Fatalf("first call after the backend restarted: %v", err)
	}
	ids := legacy.headerValues("Mcp-Session-Id")
	if len(ids) <= sessions || ids[len(ids)-1] == ids[sessions-1] {
		t.Fatalf("no new session after restart: %v", ids)
	}
	if err := call(); err != nil {
		t.Fatal(err)
	}
}

func TestCutConnectionsDoNotBreakSessions(t *testing.T) {
	h, modern, legacy := twoEras(t)
	legacyRaced := false
	for _, b := range []*testBackend{modern, legacy} {
		// Every TCP connection to the backend dies, including the pooled
		// keep-alive ones, the Legacy GET stream and the Modern listen
		// stream, as when a proxy between them restarts. The first call
		// meets a dead pooled connection and must be re-sent, not failed.
		b.http.CloseClientConnections()
		resp, err := h.gateway.CallTool(context.Background(), &aggregatorv1.CallToolRequest{Name: b.name + "_echo"})
		if b == legacy && status.Code(err) == codes.Unavailable {
			// go-sdk ends a Legacy session whose standalone GET stream
			// broke. A call that races that teardown fails cleanly as
			// unavailable (a tool call is not re-sent blindly: it may have
			// side effects); the next call runs on a new session.
			legacyRaced = true
			resp, err = h.gateway.CallTool(context.Background(), &aggregatorv1.CallToolRequest{Name: b.name + "_echo"})
		}
		if err != nil || resp.GetIsError() {
			t.Fatalf("%s: first call after the cut: %v %v", b.name, resp, err)
		}
	}
	if legacyRaced {
		return
	}
	// The sessions survived: no new Legacy session was opened.
	ids := legacy.headerValues("Mcp-Session-Id")
	if len(ids) == 0 || ids[0] != ids[len(ids)-1] {
		t.Fatalf("Legacy session changed after the cut: first %q, last %q", ids[0], ids[len(ids)-1])
	}
}

// A key the environment writes into a backend's URL path (${VAR}) is a
// secret like its query: an operator's ListBackends shows the URL and
// the last error without it.
func TestBackendKeyInTheURLPathStaysSecret(t *testing.T) {
	const key = "k3y-of-the-backend"
	t.Setenv("TEST_PATH_KEY", key)
	h := startAggregatorFile(t, `
aggregator:
  catalogTTL: 1h
  health: {interval: 50ms, timeout: 500ms, unhealthyThreshold: 1}
  backends:
    - {name: keyed, url: "http://127.0.0.1:1/api/${TEST_PATH_KEY}/mcp", timeout: 500ms}
`)
	var got *aggregatorv1.Backend
	testkit.Eventually(t, "the backend's failure is listed", 10*time.Second, func() bool {
		resp, err := h.operator.ListBackends(context.Background(), &aggregatorv1.ListBackendsRequest{})
		if err != nil || len(resp.GetBackends()) != 1 {
			return false
		}
		got = resp.GetBackends()[0]
		return got.GetLastError() != ""
	})
	if got.GetUrl() != "http://127.0.0.1:1/api/[redacted]/mcp" || strings.Contains(got.GetLastError(), key) || !strings.Contains(got.GetLastError(), "/api/[redacted]/mcp") {
		t.Fatalf("url %q, last error %q: want the key cut out of both", got.GetUrl(), got.GetLastError())
	}
}
