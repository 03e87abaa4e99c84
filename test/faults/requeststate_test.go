package faults

import (
	"fmt"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// confirmSpec serves a tool and a resource that ask the client to confirm
// (the confirm behaviour: input_required with the backend's own
// requestState, no record of the states it issued).
const confirmSpec = `
tools:
  - {name: echo, behaviour: echo}
  - {name: pay, behaviour: confirm}
resources:
  - {uri: "vault://key", name: key, text: "the key", confirm: true}
`

// mrtrCase is one multi-round-trip request: its method, its target (a
// tool's advertised name or a URI) and how its params name the target.
type mrtrCase struct {
	method, name, params string
}

// first sends the call and returns its sealed requestState and the key
// its input request is asked under.
func (m mrtrCase) first(t *testing.T, url string) (state, key string) {
	t.Helper()
	return inputRequired(t, m.method+" "+m.name, modernRPC(t, url, m.method, m.name, m.params))
}

// retry answers the input request under key, with params and state.
func (m mrtrCase) retry(t *testing.T, url, params, state, key string) rpcReply {
	t.Helper()
	return modernRPC(t, url, m.method, m.name, params+","+accepted(key)+`,"requestState":`+quoted(state))
}

// TestRequestStateOnceAcrossReplicas drives multi-round-trip requests
// through two gateway replicas that share a session key, against a Modern
// backend that keeps no record of the request states it issued and a
// Legacy one whose calls the aggregator holds. A sealed requestState is
// accepted once, with the arguments of the call that produced it, at
// either replica: a replay (at the same or the other replica) and a retry
// with other arguments get -32602, and the backend never sees them (its
// own call counts say so). With the indexer, which keeps the record,
// stopped, a retry is refused with -32603 and succeeds once it is back.
func TestRequestStateOnceAcrossReplicas(t *testing.T) {
	c := startClusterWith(t, true,
		harness.Backend{Name: "alpha", Spec: confirmSpec},
		// A URI of its own: two backends listing one URI give it to
		// neither under the prefix strategy.
		harness.Backend{Name: "legacy", Spec: strings.ReplaceAll(confirmSpec, "vault://key", "vault://legacy-key"), Stateful: true})
	one, two := c.MCPURL, startSecondGateway(t, c).url
	for _, tc := range []struct {
		backend string
		mrtrCase
		counter string
		other   string // params with other arguments; empty: none to vary
	}{
		{"alpha", mrtrCase{"tools/call", "alpha_pay", `"name":"alpha_pay","arguments":{"amount":3,"to":"bob"}`}, "tools/call pay",
			`"name":"alpha_pay","arguments":{"amount":300,"to":"bob"}`},
		{"alpha", mrtrCase{"resources/read", "vault://key", `"uri":"vault://key"`}, "resources/read vault://key", ""},
		{"legacy", mrtrCase{"tools/call", "legacy_pay", `"name":"legacy_pay","arguments":{"amount":3,"to":"bob"}`}, "tools/call pay",
			`"name":"legacy_pay","arguments":{"amount":300,"to":"bob"}`},
	} {
		t.Run(tc.backend+" "+tc.method, func(t *testing.T) {
			calls := func() int { return c.Calls(t, tc.backend)[tc.counter] }
			refused := func(what string, r rpcReply, before int) {
				t.Helper()
				if r.Error == nil || r.Error.Code != -32602 || r.status != 400 {
					t.Errorf("%s: %s, want HTTP 400 with -32602", what, r)
				}
				if now := calls(); now != before {
					t.Errorf("%s reached the backend: %d requests before, %d after", what, before, now)
				}
			}

			state, key := tc.first(t, one)
			if r := tc.retry(t, one, tc.params, state, key); r.Error != nil || r.member("resultType") != `"complete"` {
				t.Fatalf("the retry with the answer: %s", r)
			}
			n := calls()
			refused("a replay at the other replica", tc.retry(t, two, tc.params, state, key), n)
			refused("a replay at the same replica", tc.retry(t, one, tc.params, state, key), n)

			// A fresh state, tried with other arguments first: refused
			// without using it up, so the retry it belongs to still works,
			// once, at the other replica.
			state, key = tc.first(t, one)
			n = calls()
			if tc.other != "" {
				refused("a retry with other arguments", tc.retry(t, two, tc.other, state, key), n)
			}
			if r := tc.retry(t, two, tc.params, state, key); r.Error != nil || r.member("resultType") != `"complete"` {
				t.Fatalf("the retry at the other replica: %s", r)
			}
			n = calls()
			refused("a replay at the first replica", tc.retry(t, one, tc.params, state, key), n)
		})
	}
	t.Logf("requests that reached the backends: alpha %v, legacy %v", c.Calls(t, "alpha"), c.Calls(t, "legacy"))

	// The record of used states is the indexer's: while it is down a retry
	// is refused (-32603) without reaching the backend or using the state
	// up, and the same retry succeeds once it is back.
	pay := mrtrCase{"tools/call", "alpha_pay", `"name":"alpha_pay","arguments":{"amount":5}`}
	state, key := pay.first(t, one)
	n := c.Calls(t, "alpha")["tools/call pay"]
	c.Indexer.Stop()
	if r := pay.retry(t, two, pay.params, state, key); r.Error == nil || r.Error.Code != -32603 || c.Calls(t, "alpha")["tools/call pay"] != n {
		t.Errorf("a retry with the indexer down: %s, backend requests %d -> %d; want -32603, none", r, n, c.Calls(t, "alpha")["tools/call pay"])
	}
	c.Indexer.Restart()
	testkit.Eventually(t, "the retry succeeds once the indexer is back", pollDeadline, func() error {
		if r := pay.retry(t, two, pay.params, state, key); r.Error != nil || r.member("resultType") != `"complete"` {
			return fmt.Errorf("%s", r)
		}
		return nil
	})
	checkNoCrash(t, procs(c), nil)
}
