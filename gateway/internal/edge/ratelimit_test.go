package edge

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/gateway/internal/wire"
	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/ratelimit"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// emptyBuckets are shared buckets that hold no token, for another minute.
type emptyBuckets struct{ asked atomic.Int32 }

func (b *emptyBuckets) Acquire(_ context.Context, reqs []ratelimit.TokenRequest) ([]ratelimit.Grant, error) {
	b.asked.Add(1)
	grants := make([]ratelimit.Grant, len(reqs))
	for i := range grants {
		grants[i].RetryAfter = time.Minute
	}
	return grants, nil
}

// TestRefusalsHeldToTheLimit: with the principal's bucket empty, every
// refusal of the gateway's own that is the client's fault, wherever it is
// made (a header that disagrees with the body, params the method refuses,
// a forged requestState, the optimizer's call_tool refused with an error
// result), is answered as rate limited (HTTP 429, error 429, Retry-After)
// and recorded rate_limited, as the aggregator records a request it
// limits. A call the gateway sends on asks the buckets nothing; what the
// gateway cannot do now (a requestState it cannot check) takes no token.
func TestRefusalsHeldToTheLimit(t *testing.T) {
	b := startBackends(t)
	sink := &memorySink{}
	w, err := audit.New(audit.Options{Service: "gateway", Sinks: []audit.Sink{sink}, FlushEvery: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Close)
	set, err := ratelimit.Compile(config.RateLimits{Limits: []config.RateLimit{{Name: "each-user", Per: config.RatePerPrincipal, Rate: "1/h", Burst: 5}}})
	if err != nil {
		t.Fatal(err)
	}
	buckets := &emptyBuckets{}
	cfg := testGatewayConfig(b)
	cfg.HTTP.TrustClientTraceparent = true
	_, srv := startGatewayWith(t, b, cfg, func(d *Deps) {
		d.Audit, d.Limiter = w, ratelimit.New(set, buckets, slog.Default(), nil)
	})
	mcp, optimized := srv.URL+"/mcp", srv.URL+"/mcp/optimized"
	elicit := strings.Replace(modernMeta, `clientCapabilities":{}`, `clientCapabilities":{"elicitation":{"form":{}}}`, 1)
	call := func(name, params string) string {
		return `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + elicit + `,"name":"` + name + `"` + params + `}}`
	}

	if _, _, rerr := send(t, http.MethodPost, mcp, modernHeaders("tools/call", "Mcp-Name", "alpha_echo"), call("alpha_echo", `,"arguments":{"text":"hi"}`)).rpc(t); rerr != nil {
		t.Fatalf("a valid call: %v", rerr)
	}
	if n := buckets.asked.Load(); n != 0 {
		t.Fatalf("a call the gateway sent on asked the buckets %d times; want none (the aggregator takes its token)", n)
	}

	_, asking, _ := send(t, http.MethodPost, mcp, modernHeaders("tools/call", "Mcp-Name", "alpha_ask"), call("alpha_ask", "")).rpc(t)
	if buckets.asked.Load() != 0 || asking["requestState"] == nil {
		t.Fatalf("a call asking for input: %v, buckets asked %d times; want a requestState, and none", asking, buckets.asked.Load())
	}
	b.down.Store(true) // the indexer that records used states
	trace, resp := tracedSend(t, mcp, modernHeaders("tools/call", "Mcp-Name", "alpha_ask"),
		call("alpha_ask", `,"inputResponses":{"ok":{"action":"accept","content":{}}},"requestState":`+string(asking["requestState"])))
	b.down.Store(false)
	if resp.status == http.StatusTooManyRequests {
		t.Fatalf("a requestState the gateway cannot check: %d %s; not the client's fault, so no token and no 429", resp.status, resp.body)
	}
	unlimited := trace

	limited := map[string]string{}
	for label, r := range map[string]struct {
		url, name, body string
	}{
		"Mcp-Name disagrees":           {mcp, "beta_add", call("alpha_echo", `,"arguments":{}`)},
		"arguments not an object":      {mcp, "alpha_echo", call("alpha_echo", `,"arguments":["hi"]`)},
		"a forged requestState":        {mcp, "alpha_ask", call("alpha_ask", `,"requestState":"r1.forged"`)},
		"call_tool without a name":     {optimized, "call_tool", call("call_tool", `,"arguments":{}`)},
		"a task without the extension": {mcp, "t1.x", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{` + modernMeta + `,"taskId":"t1.x"}}`},
	} {
		method := "tools/call"
		if strings.Contains(r.body, "tasks/get") {
			method = "tasks/get"
		}
		trace, resp := tracedSend(t, r.url, modernHeaders(method, "Mcp-Name", r.name), r.body)
		_, _, rerr := resp.rpc(t)
		if resp.status != http.StatusTooManyRequests || rerr == nil || rerr.Code != wire.CodeRateLimited || resp.header.Get("Retry-After") == "" {
			t.Errorf("%s with the bucket empty: %d %q %s; want HTTP 429, error 429, Retry-After", label, resp.status, resp.header.Get("Retry-After"), resp.body)
		}
		limited[trace] = label
	}
	if buckets.asked.Load() == 0 {
		t.Error("the refusals never asked the buckets")
	}

	testkit.Eventually(t, "the refusals in the trail", 10*time.Second, func() error {
		if got := sink.ofTrace(unlimited); len(got) != 1 || got[0].Outcome != audit.OutcomeError {
			return fmt.Errorf("a requestState the gateway cannot check: events %+v, want one error", got)
		}
		for trace, label := range limited {
			if got := sink.ofTrace(trace); len(got) != 1 || got[0].Outcome != audit.OutcomeRateLimited {
				return fmt.Errorf("%s: events %+v, want one rate_limited", label, got)
			}
		}
		return nil
	})
}
