package multiagg

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// askSpec is a Legacy demo backend whose tool asks the client by a real
// elicitation/create in the middle of the call.
const askSpec = `
tools:
  - {name: ask, behaviour: ask, text: "Go ahead with {tool}?"}
`

// TestHeldCallRetryReachesItsReplica: a call to a Legacy backend that asks
// for input is held by aggregator 1; the client's retry lands on
// aggregator 2, which forwards it to aggregator 1 (its peer) with its own
// credential, and the result arrives. With aggregator 1 killed, a retry of
// a call it held fails cleanly, exactly like a hold that expired; a state
// naming an address outside the peers is never followed.
func TestHeldCallRetryReachesItsReplica(t *testing.T) {
	w := newWorld(t)
	spec := filepath.Join(t.TempDir(), "ask.yaml")
	if err := os.WriteFile(spec, []byte(askSpec), 0o600); err != nil {
		t.Fatal(err)
	}
	w.backend("legacy", "--stateful", "--config", spec)
	cfgs := []*config.Config{w.config("legacy"), w.config("legacy")}
	for _, cfg := range cfgs {
		cfg.Aggregator.Backends[0].Protocol = "2025-11-25"
		cfg.ServiceAuth.Credentials = append(cfg.ServiceAuth.Credentials,
			config.ServiceCredential{Name: "aggregator", Token: w.aggregatorToken, AssertPrincipals: true, Allow: config.AggregatorMethods})
		// advertiseAddress is left to its default: the listen address.
		cfg.Aggregator.Peers = config.AggregatorPeers{Addresses: []string{cfgs[0].Aggregator.Listen, cfgs[1].Aggregator.Listen}, Token: w.aggregatorToken}
	}
	one := w.startAggregator("aggregator-1", cfgs[0])
	two := w.startAggregator("aggregator-2", cfgs[1])
	ctx := ctxT(t)
	alice := &commonv1.Principal{Subject: "alice"}
	caps := &aggregatorv1.RequestContext{ClientCapabilitiesJson: `{"elicitation":{}}`}

	ask := func(a *aggregator) (key, state string) {
		t.Helper()
		var resp *aggregatorv1.CallToolResponse
		testkit.Eventually(t, "legacy_ask is served", 60*time.Second, func() error {
			var err error
			resp, err = a.asGateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: alice, Name: "legacy_ask", Context: caps})
			return err
		})
		var res struct {
			InputRequests map[string]struct {
				Method string `json:"method"`
				Params struct {
					Message string `json:"message"`
				} `json:"params"`
			} `json:"inputRequests"`
			RequestState string `json:"requestState"`
		}
		if err := json.Unmarshal([]byte(resp.GetResultJson()), &res); err != nil || resp.GetResultType() != "input_required" || len(res.InputRequests) != 1 {
			t.Fatalf("first call: %s %s (%v)", resp.GetResultType(), resp.GetResultJson(), err)
		}
		for k, r := range res.InputRequests {
			if r.Method != "elicitation/create" || r.Params.Message != "Go ahead with ask?" {
				t.Fatalf("input request %s: %+v", k, r)
			}
			key = k
		}
		if !strings.HasSuffix(res.RequestState, "@"+a.addr) {
			t.Fatalf("requestState %q does not name its replica %s", res.RequestState, a.addr)
		}
		return key, res.RequestState
	}
	retry := func(a *aggregator, key, state string) (*aggregatorv1.CallToolResponse, error) {
		return a.asGateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: alice, Name: "legacy_ask", Context: caps, RequestState: state,
			InputResponsesJson: `{"` + key + `":{"action":"accept","content":{}}}`})
	}

	// Held by aggregator 1, answered through aggregator 2.
	key, state := ask(one)
	resp, err := retry(two, key, state)
	if err != nil || resp.GetResultType() != "complete" || !strings.Contains(resultText(t, resp.GetResultJson()), `"action":"accept"`) {
		t.Fatalf("retry through the other replica: %v %v", resp, err)
	}
	// The state is spent: the owner says so, through the other replica,
	// with the error of a hold that is gone.
	_, err = retry(two, key, state)
	gone := wantGone(t, "a spent state", err)

	// The aggregators' credential may resume held calls and nothing else.
	asPeer := aggregatorv1.NewAggregatorServiceClient(dial(t, two.addr, w.aggregatorToken))
	if _, err := asPeer.Discover(ctx, &aggregatorv1.DiscoverRequest{Principal: alice}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("Discover with the aggregator credential: %v", err)
	}
	if _, err := asPeer.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: alice, Name: "legacy_ask"}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("CallTool with the aggregator credential: %v", err)
	}
	// ResumeHeldCall resumes only a call of the replica it reaches.
	key, state = ask(one)
	_, err = asPeer.ResumeHeldCall(ctx, &aggregatorv1.ResumeHeldCallRequest{Principal: alice, Call: &aggregatorv1.CallToolRequest{
		Principal: alice, Name: "legacy_ask", Context: caps, RequestState: state, InputResponsesJson: `{"` + key + `":{"action":"accept"}}`}})
	wantSame(t, "ResumeHeldCall on a replica that does not hold the call", err, gone)
	// A state naming an address outside the peers is refused, not dialled.
	notAPeer := strings.TrimSuffix(state, one.addr) + "127.0.0.1:1"
	_, err = retry(two, key, notAPeer)
	wantSame(t, "a state naming a non-peer", err, gone)
	// The call is still held by aggregator 1 and can be answered there.
	if resp, err := retry(one, key, state); err != nil || resp.GetResultType() != "complete" {
		t.Fatalf("retry on the owner: %v %v", resp, err)
	}

	// The owner is gone: the retry fails cleanly, like an expired hold.
	key, state = ask(one)
	one.proc.Kill()
	_, err = retry(two, key, state)
	wantSame(t, "a retry of a call held by a killed replica", err, gone)
	// Aggregator 2 still serves calls of its own.
	key, state = ask(two)
	if resp, err := retry(two, key, state); err != nil || resp.GetResultType() != "complete" {
		t.Fatalf("a call held by the surviving replica: %v %v", resp, err)
	}
}

// wantGone checks err is the error of a held call that is gone, and
// returns it.
func wantGone(t *testing.T, what string, err error) *status.Status {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "no longer held") {
		t.Fatalf("%s: %v, want INVALID_ARGUMENT saying the call is no longer held", what, err)
	}
	return st
}

// wantSame checks err is exactly the error gone.
func wantSame(t *testing.T, what string, err error, gone *status.Status) {
	t.Helper()
	st := wantGone(t, what, err)
	if st.Message() != gone.Message() {
		t.Fatalf("%s: %q, want the same error as a hold that is gone: %q", what, st.Message(), gone.Message())
	}
}

// resultText is the text of a tool result's first content block.
func resultText(t *testing.T, resultJSON string) string {
	t.Helper()
	var res struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	if err := json.Unmarshal([]byte(resultJSON), &res); err != nil || len(res.Content) == 0 {
		t.Fatalf("result %s: %v", resultJSON, err)
	}
	return res.Content[0].Text
}

// TestHeldCallRetryWithAMisconfiguredPeer: aggregator 2 forwards with a
// token aggregator 1 does not know. The peer's refusal is the cluster's
// misconfiguration, not the client's: the retry fails INTERNAL, neither
// as the client's UNAUTHENTICATED nor as a hold that is gone.
func TestHeldCallRetryWithAMisconfiguredPeer(t *testing.T) {
	w := newWorld(t)
	spec := filepath.Join(t.TempDir(), "ask.yaml")
	if err := os.WriteFile(spec, []byte(askSpec), 0o600); err != nil {
		t.Fatal(err)
	}
	w.backend("legacy", "--stateful", "--config", spec)
	cfgs := []*config.Config{w.config("legacy"), w.config("legacy")}
	for i, cfg := range cfgs {
		cfg.Aggregator.Backends[0].Protocol = "2025-11-25"
		cfg.ServiceAuth.Credentials = append(cfg.ServiceAuth.Credentials,
			config.ServiceCredential{Name: "aggregator", Token: w.aggregatorToken, AssertPrincipals: true, Allow: config.AggregatorMethods})
		token := w.aggregatorToken
		if i == 1 {
			token = "not-the-peers-token"
		}
		cfg.Aggregator.Peers = config.AggregatorPeers{Addresses: []string{cfgs[0].Aggregator.Listen, cfgs[1].Aggregator.Listen}, Token: token}
	}
	one := w.startAggregator("aggregator-1", cfgs[0])
	two := w.startAggregator("aggregator-2", cfgs[1])
	ctx := ctxT(t)
	alice := &commonv1.Principal{Subject: "alice"}
	caps := &aggregatorv1.RequestContext{ClientCapabilitiesJson: `{"elicitation":{}}`}
	var resp *aggregatorv1.CallToolResponse
	testkit.Eventually(t, "legacy_ask is served", 60*time.Second, func() error {
		var err error
		resp, err = one.asGateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: alice, Name: "legacy_ask", Context: caps})
		return err
	})
	var res struct {
		InputRequests map[string]json.RawMessage `json:"inputRequests"`
		RequestState  string                     `json:"requestState"`
	}
	if err := json.Unmarshal([]byte(resp.GetResultJson()), &res); err != nil || len(res.InputRequests) != 1 {
		t.Fatalf("first call: %s (%v)", resp.GetResultJson(), err)
	}
	var key string
	for k := range res.InputRequests {
		key = k
	}
	_, err := two.asGateway.CallTool(ctx, &aggregatorv1.CallToolRequest{Principal: alice, Name: "legacy_ask", Context: caps, RequestState: res.RequestState,
		InputResponsesJson: `{"` + key + `":{"action":"accept","content":{}}}`})
	if st := status.Convert(err); st.Code() != codes.Internal || strings.Contains(st.Message(), "no longer held") {
		t.Fatalf("a retry forwarded with a token the peer refuses: %v, want INTERNAL naming the peer configuration", err)
	}
	testkit.Eventually(t, "aggregator 2 to log a warning about the peer's refusal", 60*time.Second, func() error {
		if !strings.Contains(two.proc.Log(1<<20), "refused this replica's forwarded retry") {
			return errors.New("no warning logged")
		}
		return nil
	})
}
