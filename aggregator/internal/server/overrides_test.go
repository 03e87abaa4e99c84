package server_test

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// startOverrides serves a backend whose search tool takes tenant, query
// and limit, overridden globally (renamed, re-described, tenant fixed,
// limit defaulted, a short timeout on hang) and again in one server.
func startOverrides(t *testing.T) *harness {
	t.Helper()
	tickets := newTestBackend(t, "tickets", backendOptions{extra: func(b *testBackend) {
		b.server.AddTool(&mcp.Tool{Name: "search", Description: "Search.", InputSchema: map[string]any{
			"type":     "object",
			"required": []any{"tenant", "query"},
			"properties": map[string]any{
				"tenant": map[string]any{"type": "string"},
				"query":  map[string]any{"type": "string"},
				"limit":  map[string]any{"type": "integer"},
			},
		}}, func(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: string(req.Params.Arguments)}}}, nil
		})
	}})
	h := startAggregatorFile(t, `
aggregator:
  backends:
    - {name: tickets, url: `+tickets.url()+`}
  toolOverrides:
    - backend: tickets
      tool: search
      name: find
      description: Find tickets by text.
      annotations: {readOnlyHint: true}
      arguments:
        tenant: {hidden: true, value: acme}
        limit: {default: 20}
    - backend: tickets
      tool: hang
      timeout: 200ms
servers:
  - name: support
    backends: [tickets]
    toolOverrides:
      - backend: tickets
        tool: search
        title: Support search
        arguments:
          limit: {default: 5}
`)
	return h
}

func TestToolOverrides(t *testing.T) {
	h := startOverrides(t)
	ctx := context.Background()
	p := principal("alice")
	tool := func(server string) *aggregatorv1.Tool {
		t.Helper()
		resp, err := h.gateway.ListTools(ctx, &aggregatorv1.ListToolsRequest{Principal: p, Server: server})
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range resp.GetTools() {
			if tl.GetName() == "tickets_find" {
				return tl
			}
		}
		t.Fatalf("server %q lists no tickets_find: %v", server, resp.GetTools())
		return nil
	}
	whole := tool("")
	if whole.GetDescription() != "Find tickets by text." || whole.GetOriginalName() != "search" || !strings.Contains(whole.GetAnnotationsJson(), `"readOnlyHint":true`) {
		t.Errorf("overridden tool %v", whole)
	}
	var schema struct {
		Required   []string                   `json:"required"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal([]byte(whole.GetInputSchemaJson()), &schema); err != nil {
		t.Fatal(err)
	}
	if _, has := schema.Properties["tenant"]; has || slices.Contains(schema.Required, "tenant") || !strings.Contains(string(schema.Properties["limit"]), `"default":20`) {
		t.Errorf("schema %s: tenant must be hidden, limit defaulted to 20", whole.GetInputSchemaJson())
	}
	if !strings.Contains(whole.GetDefinitionJson(), `"name":"tickets_find"`) || strings.Contains(whole.GetDefinitionJson(), "tenant") {
		t.Errorf("advertised definition %s", whole.GetDefinitionJson())
	}
	if support := tool("support"); support.GetTitle() != "Support search" || !strings.Contains(support.GetInputSchemaJson(), `"default":5`) {
		t.Errorf("support's override over the global one: %v", support)
	}
	if slices.ContainsFunc(listServerTools(t, h.gateway, p, ""), func(n string) bool { return n == "tickets_search" }) {
		t.Error("the backend's own name is still advertised")
	}

	call := func(server, args string) (string, error) {
		resp, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: p, Server: server, Name: "tickets_find", ArgumentsJson: args})
		if err != nil {
			return "", err
		}
		return resultText(t, resp.GetResultJson()), nil
	}
	got, err := call("", `{"query":"printer"}`)
	if err != nil {
		t.Fatal(err)
	}
	var sent map[string]any
	if err := json.Unmarshal([]byte(got), &sent); err != nil || sent["tenant"] != "acme" || sent["query"] != "printer" || sent["limit"] != float64(20) {
		t.Errorf("the backend got %s: want tenant acme, query printer, limit 20", got)
	}
	if got, _ := call("support", `{"query":"x","limit":2}`); !strings.Contains(got, `"limit":2`) || !strings.Contains(got, `"tenant":"acme"`) {
		t.Errorf("support call got %s: the client's limit wins over the default, tenant fixed", got)
	}
	if got, _ := call("support", `{}`); !strings.Contains(got, `"limit":5`) {
		t.Errorf("support call got %s: support's default limit is 5", got)
	}
	_, err = call("", `{"query":"x","tenant":"evil"}`)
	wantStatus(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_HIDDEN_ARGUMENT)
	if err != nil && strings.Contains(err.Error(), "acme") {
		t.Errorf("the refusal names the fixed value: %v", err)
	}
	_, err = call("", `[1]`)
	wantStatus(t, err, codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)

	// A per-tool timeout cuts the call as a backend timeout.
	_, err = h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: p, Name: "tickets_hang"})
	wantStatus(t, err, codes.DeadlineExceeded, commonv1.ErrorReason_ERROR_REASON_BACKEND_TIMEOUT)
}

// TestServerRenameKeepsThePolicyName: a server that renames a tool (its
// own toolOverrides) changes what its clients see, not what the policy
// and the rate limits know the tool by. A forbid written against the
// tool's name at /mcp holds through the server, and a limit on that name
// counts the calls of both in one bucket.
func TestServerRenameKeepsThePolicyName(t *testing.T) {
	eng := newTestBackend(t, "eng", backendOptions{tools: []string{"deploy", "build"}})
	h := startAggregatorFile(t, `
aggregator:
  authz: {policyFile: `+writeFile(t, "policy.cedar", "permit (principal, action, resource);\nforbid (principal == User::\"alice\", action, resource == Tool::\"eng_deploy\");\n")+`}
  backends:
    - {name: eng, url: `+eng.url()+`}
servers:
  - name: ops
    backends: [eng]
    toolOverrides:
      - {backend: eng, tool: deploy, name: ship}
rateLimits:
  limits:
    - {name: deploys, per: tool, match: {tools: [eng_deploy]}, rate: 1/h, burst: 1}
`)
	ctx := context.Background()
	alice, bob := principal("alice"), principal("bob")
	testkit.Eventually(t, "eng listed", 10*time.Second, func() bool {
		return slices.Contains(listServerTools(t, h.gateway, bob, "ops"), "eng_ship")
	})
	if got := listServerTools(t, h.gateway, alice, "ops"); slices.Contains(got, "eng_ship") || !slices.Contains(got, "eng_build") {
		t.Errorf("alice at ops sees %v; the forbid on eng_deploy must hold for its rename", got)
	}
	call := func(p *commonv1.Principal, server, name string) error {
		_, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: p, Server: server, Name: name, ArgumentsJson: "{}"})
		return err
	}
	wantStatus(t, call(alice, "ops", "eng_ship"), codes.NotFound, commonv1.ErrorReason_ERROR_REASON_NOT_FOUND)
	// bob's call at /mcp takes the one token of eng_deploy's bucket; his
	// call of the same tool through its rename finds it empty.
	if err := call(bob, "", "eng_deploy"); err != nil {
		t.Fatalf("bob calls eng_deploy: %v", err)
	}
	wantStatus(t, call(bob, "ops", "eng_ship"), codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_RATE_LIMITED)
	if n := eng.received("tools/call"); n != 1 {
		t.Errorf("the backend received %d calls, want the 1 admitted", n)
	}
}

// TestRefusedCallOfARenameCountsAsTheTool: a call of a server's rename
// that the admission refuses once the tool is found and allowed
// (arguments that are not an object) takes its token under the tool's
// name at /mcp, as its calls do; it once took it under the rename, so a
// limit on eng_deploy never counted the malformed calls of eng_ship.
// Those arguments once reached the backend too: a rename is an override
// that adds no argument, and such an override skipped the check.
func TestRefusedCallOfARenameCountsAsTheTool(t *testing.T) {
	eng := newTestBackend(t, "eng", backendOptions{tools: []string{"deploy"}})
	h := startAggregatorFile(t, `
aggregator:
  backends:
    - {name: eng, url: `+eng.url()+`}
servers:
  - name: ops
    backends: [eng]
    toolOverrides:
      - {backend: eng, tool: deploy, name: ship}
rateLimits:
  limits:
    - {name: deploys, per: principal, match: {tools: [eng_deploy]}, rate: 1/h, burst: 1}
`)
	ctx, bob := context.Background(), principal("bob")
	testkit.Eventually(t, "eng listed", 10*time.Second, func() bool {
		return slices.Contains(listServerTools(t, h.gateway, bob, "ops"), "eng_ship")
	})
	call := func() error {
		_, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: bob, Server: "ops", Name: "eng_ship", ArgumentsJson: "[1]"})
		return err
	}
	wantStatus(t, call(), codes.InvalidArgument, commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT)
	wantStatus(t, call(), codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_RATE_LIMITED)
	if n := eng.received("tools/call"); n != 0 {
		t.Errorf("the backend received %d calls with arguments that are not an object", n)
	}
}

// TestReloadOfAGlobalRenameReachesServers: a reload that renames a tool
// in aggregator.toolOverrides changes its name at /mcp, the name the
// policy and the rate limits know it by in every server, even in a server
// whose own override gives it a name of its own (so that server's listing
// does not change). A limit on the new name counts the server's calls at
// once.
func TestReloadOfAGlobalRenameReachesServers(t *testing.T) {
	eng := newTestBackend(t, "eng", backendOptions{tools: []string{"deploy"}})
	conf := func(global string) *config.Config {
		full, err := config.Load(writeFile(t, "switchboard.yaml", `
aggregator:
  catalogTTL: 1h
  backends:
    - {name: eng, url: `+eng.url()+`}
  toolOverrides:
    - {backend: eng, tool: deploy, name: `+global+`}
servers:
  - name: ops
    backends: [eng]
    toolOverrides:
      - {backend: eng, tool: deploy, name: ship}
rateLimits:
  limits:
    - {name: releases, per: tool, match: {tools: [eng_release]}, rate: 1/h, burst: 1}
`))
		if err != nil {
			t.Fatal(err)
		}
		return full
	}
	h, err := startAggregatorWith(t, conf("rollout"), quietLog)
	if err != nil {
		t.Fatal(err)
	}
	alice := principal("alice")
	testkit.Eventually(t, "eng listed", 10*time.Second, func() bool {
		return slices.Contains(listServerTools(t, h.gateway, alice, "ops"), "eng_ship")
	})
	call := func() error {
		_, err := h.gateway.CallTool(context.Background(), &aggregatorv1.CallToolRequest{Principal: alice, Server: "ops", Name: "eng_ship", ArgumentsJson: "{}"})
		return err
	}
	// Known as eng_rollout: the limit does not count it.
	for range 3 {
		if err := call(); err != nil {
			t.Fatal(err)
		}
	}
	reconfigure(t, h, conf("release"))
	if err := call(); err != nil {
		t.Fatalf("the first call known as eng_release: %v", err)
	}
	wantStatus(t, call(), codes.ResourceExhausted, commonv1.ErrorReason_ERROR_REASON_RATE_LIMITED)
}

// TestRenameOntoASiblingTool: an override that renames one tool of a
// backend onto another of its tools makes a conflict, not a shadow: the
// name goes to neither and is reported (it once ran the renamed tool and
// hid the other silently, by the backend's listing order), and under the
// manual strategy the aggregator refuses to start.
func TestRenameOntoASiblingTool(t *testing.T) {
	eng := newTestBackend(t, "eng", backendOptions{tools: []string{"alpha", "beta", "gamma"}})
	h := startAggregatorFile(t, `
aggregator:
  backends:
    - {name: eng, url: `+eng.url()+`}
  toolOverrides:
    - {backend: eng, tool: alpha, name: beta}
`)
	ctx := context.Background()
	p := principal("alice")
	if got := listServerTools(t, h.gateway, p, ""); slices.Contains(got, "eng_beta") || !slices.Contains(got, "eng_gamma") {
		t.Errorf("tools %v, want eng_gamma and no eng_beta", got)
	}
	if _, err := h.gateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: p, Name: "eng_beta", ArgumentsJson: "{}"}); status.Code(err) != codes.NotFound {
		t.Errorf("eng_beta: %v, want NOT_FOUND", err)
	}
	bk, err := h.operator.ListBackends(ctx, &aggregatorv1.ListBackendsRequest{Principal: p})
	if err != nil {
		t.Fatal(err)
	}
	if c := bk.GetConflicts(); len(c) != 1 || c[0].GetName() != "eng_beta" || c[0].GetWinner() != "" {
		t.Errorf("conflicts %v, want eng_beta with no winner", c)
	}

	manual, err := config.Load(writeFile(t, "manual.yaml", `
aggregator:
  conflictResolution: {strategy: manual}
  backends:
    - {name: eng, url: `+eng.url()+`}
  toolOverrides:
    - {backend: eng, tool: alpha, name: beta}
`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := startAggregatorWith(t, manual, quietLog); err == nil || !strings.Contains(err.Error(), "beta") {
		t.Errorf("the manual strategy started with beta claimed twice: %v", err)
	}
}
