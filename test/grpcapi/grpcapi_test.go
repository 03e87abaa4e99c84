// Package grpcapi runs the examples of docs/grpc-api.md against a real
// aggregator, indexer (over a throwaway PostgreSQL) and demo MCP backend:
// the Go client in ./example and every grpcurl command of the document.
package grpcapi

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	indexerv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/indexer/v1"
	"github.com/switchboard-mcp/switchboard/test/grpcapi/example"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

const (
	docPath = "../../docs/grpc-api.md"
	// The internal client's credential in the test configuration, as the
	// document describes it.
	reportingToken   = "reporting-token-for-the-grpcapi-test"
	reportingSubject = "reporting"
	aggregatorToken  = "aggregator-token-for-the-grpcapi-test"
)

// stack is the running system under test.
type stack struct {
	aggregator, indexer string // host:port
	// The gateway's service token and an operator's (harness.Cluster).
	gatewayToken, operatorToken string
}

func TestMain(m *testing.M) { harness.Main(m) }

// grpcurlBinary returns $GRPCURL or builds the pinned grpcurl from
// tools/grpcurl.
func grpcurlBinary(t *testing.T) string {
	t.Helper()
	if g := os.Getenv("GRPCURL"); g != "" {
		return g
	}
	out := filepath.Join(t.TempDir(), "grpcurl")
	cmd := exec.Command("go", "build", "-o", out, "github.com/fullstorydev/grpcurl/cmd/grpcurl")
	cmd.Dir = filepath.Join(harness.RepoRoot(t), "tools", "grpcurl")
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build grpcurl: %v\n%s", err, b)
	}
	return out
}

// startStack starts a whole Switchboard (PostgreSQL, a demo backend named
// demo, aggregator, indexer, gateway) whose configuration also holds the
// internal client's credential the document describes.
func startStack(t *testing.T) stack {
	t.Helper()
	c := harness.Start(t, harness.Options{
		Backends: []harness.Backend{{Name: "demo"}},
		Configure: func(cfg *config.Config) {
			addReportingClient(cfg)
			// The audit trail in PostgreSQL (the document's QueryAuditEvents
			// example): the aggregator ships its events to the indexer
			// with its own credential.
			cfg.ServiceAuth.Credentials = append(cfg.ServiceAuth.Credentials, config.ServiceCredential{
				Name: "aggregator", Token: aggregatorToken, AssertPrincipals: true, Allow: config.AggregatorMethods,
			})
			cfg.Aggregator.Pinning.Indexer = config.Endpoint{Address: cfg.Indexer.Listen, Token: aggregatorToken}
			cfg.Audit.Database.Enabled = true
			// A limit on find_tool's searches (the document's
			// ListRateLimitBuckets example lists the bucket of the
			// reporting client's search): generous, so that no example is
			// refused.
			cfg.RateLimits.Limits = append(cfg.RateLimits.Limits, config.RateLimit{
				Name: "searches", Per: config.RatePerPrincipal, Rate: "100/s", Burst: 100, Methods: []string{config.RateMethodFindTool},
			})
		},
	})
	return stack{aggregator: c.Config.Aggregator.Listen, indexer: c.Config.Indexer.Listen, gatewayToken: c.GatewayToken, operatorToken: c.OperatorToken}
}

func TestGRPCAPI(t *testing.T) {
	s := startStack(t)
	t.Run("go example", func(t *testing.T) { testGoExample(t, s) })
	t.Run("grpcurl examples", func(t *testing.T) { testGrpcurlExamples(t, s) })
	t.Run("explained search", func(t *testing.T) { testExplainedSearch(t, s) })
}

func testGoExample(t *testing.T, s stack) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	aggConn, err := example.Dial(s.aggregator, reportingToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer aggConn.Close()
	agg := aggregatorv1.NewAggregatorServiceClient(aggConn)

	tools, err := example.ListAllTools(ctx, agg)
	if err != nil {
		t.Fatalf("ListAllTools: %v", err)
	}
	var names []string
	for _, tool := range tools {
		names = append(names, tool.GetName())
		if tool.GetBackend() != "demo" {
			t.Errorf("tool %s comes from backend %q, want demo", tool.GetName(), tool.GetBackend())
		}
	}
	for _, want := range []string{"demo_add", "demo_echo", "demo_fail"} {
		if !slices.Contains(names, want) {
			t.Errorf("ListAllTools: %s missing from %v", want, names)
		}
	}

	res, err := example.CallTool(ctx, agg, "demo_add", `{"a": 2, "b": 3}`)
	if err != nil {
		t.Fatalf("CallTool demo_add: %v", err)
	}
	if res.GetIsError() || !strings.Contains(res.GetResultJson(), `"sum":5`) || res.GetBackend() != "demo" {
		t.Errorf("CallTool demo_add = %v", res)
	}
	res, err = example.CallTool(ctx, agg, "demo_fail", `{}`)
	if err != nil {
		t.Fatalf("CallTool demo_fail: a failing tool must be a result, got error %v", err)
	}
	if !res.GetIsError() {
		t.Errorf("CallTool demo_fail: isError not set: %v", res)
	}
	_, err = example.CallTool(ctx, agg, "demo_missing", `{}`)
	if status.Code(err) != codes.NotFound || example.Reason(err) != "ERROR_REASON_NOT_FOUND" {
		t.Errorf("CallTool of a missing tool: %v (reason %q), want NotFound with ERROR_REASON_NOT_FOUND", err, example.Reason(err))
	}

	// A bound credential may name itself, but nobody else.
	_, err = agg.ListTools(ctx, &aggregatorv1.ListToolsRequest{Principal: &commonv1.Principal{Subject: reportingSubject, Groups: []string{"analysts"}}})
	if err != nil {
		t.Errorf("naming its own identity: %v", err)
	}
	_, err = agg.ListTools(ctx, &aggregatorv1.ListToolsRequest{Principal: &commonv1.Principal{Subject: "alice"}})
	if status.Code(err) != codes.PermissionDenied || example.Reason(err) != "ERROR_REASON_PRINCIPAL_NOT_ALLOWED" {
		t.Errorf("naming another principal: %v (reason %q), want PermissionDenied with ERROR_REASON_PRINCIPAL_NOT_ALLOWED", err, example.Reason(err))
	}

	// No credential, or a wrong one, is refused before anything runs.
	for _, token := range []string{"", "not-a-configured-token"} {
		aggConn, err := example.Dial(s.aggregator, token, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = aggregatorv1.NewAggregatorServiceClient(aggConn).ListTools(ctx, &aggregatorv1.ListToolsRequest{})
		if status.Code(err) != codes.Unauthenticated || example.Reason(err) != "ERROR_REASON_UNAUTHENTICATED" {
			t.Errorf("aggregator, token %q: %v, want Unauthenticated with ERROR_REASON_UNAUTHENTICATED", token, err)
		}
		aggConn.Close()
		idxConn, err := example.Dial(s.indexer, token, nil)
		if err != nil {
			t.Fatal(err)
		}
		_, err = indexerv1.NewIndexerServiceClient(idxConn).Search(ctx, &indexerv1.SearchRequest{Query: "add"})
		if status.Code(err) != codes.Unauthenticated || example.Reason(err) != "ERROR_REASON_UNAUTHENTICATED" {
			t.Errorf("indexer, token %q: %v, want Unauthenticated with ERROR_REASON_UNAUTHENTICATED", token, err)
		}
		idxConn.Close()
	}

	idxConn, err := example.Dial(s.indexer, reportingToken, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer idxConn.Close()
	hits, err := example.SearchTools(ctx, indexerv1.NewIndexerServiceClient(idxConn), "add two numbers", 3)
	if err != nil {
		t.Fatalf("SearchTools: %v", err)
	}
	if len(hits) == 0 || hits[0].GetName() != "demo_add" {
		t.Errorf("SearchTools(add two numbers) = %v, want demo_add first", hits)
	}
}

// A documented command: a shell block of the document and what its output
// must contain (or, for a refused call, its error).
type docCommand struct {
	script    string
	expect    string
	wantError bool
}

var shellBlock = regexp.MustCompile("(?s)```sh\n(.*?)```\n+(<!-- (expect|expect-error): (.*?) -->)?")

// docCommands extracts every grpcurl block of the document. Each must be
// followed by an expectation comment, so no example goes untested.
func docCommands(t *testing.T) []docCommand {
	t.Helper()
	raw, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []docCommand
	for _, m := range shellBlock.FindAllStringSubmatch(string(raw), -1) {
		if !strings.Contains(m[1], "grpcurl ") {
			continue
		}
		if m[2] == "" {
			t.Errorf("grpcurl block without an <!-- expect: ... --> comment:\n%s", m[1])
			continue
		}
		cmds = append(cmds, docCommand{script: m[1], expect: m[4], wantError: m[3] == "expect-error"})
	}
	if len(cmds) < 5 {
		t.Fatalf("found %d grpcurl examples in %s, expected more", len(cmds), docPath)
	}
	return cmds
}

func testGrpcurlExamples(t *testing.T, s stack) {
	grpcurl := grpcurlBinary(t)
	for i, c := range docCommands(t) {
		// Name each run after the method or verb it exercises.
		fields := strings.Fields(c.script)
		t.Run(fmt.Sprintf("%d_%s", i, filepath.Base(fields[len(fields)-1])), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", c.script)
			cmd.Env = append(os.Environ(),
				"PATH="+filepath.Dir(grpcurl)+string(os.PathListSeparator)+os.Getenv("PATH"),
				"AGGREGATOR="+s.aggregator,
				"INDEXER="+s.indexer,
				"TOKEN="+reportingToken,
				"OPERATOR_TOKEN="+s.operatorToken,
			)
			out, err := cmd.CombinedOutput()
			if c.wantError && err == nil {
				t.Errorf("%s\nsucceeded, want a refusal; output:\n%s", c.script, out)
			}
			if !c.wantError && err != nil {
				t.Errorf("%s\nfailed: %v; output:\n%s", c.script, err, out)
			}
			// An expectation may list several texts joined by " && ".
			for _, want := range strings.Split(c.expect, " && ") {
				if !strings.Contains(string(out), want) {
					t.Errorf("%s\noutput lacks %q:\n%s", c.script, want, out)
				}
			}
		})
	}
}

// TestDocQuotesExample keeps the Go example of the document identical to
// the code this test runs.
func TestDocQuotesExample(t *testing.T) {
	doc, err := os.ReadFile(docPath)
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("example/example.go")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), "```go\n"+string(src)+"```") {
		t.Errorf("%s does not quote example/example.go verbatim in a go block: copy the file into the document", docPath)
	}
}
