package replicas

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/mcpspec"
	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// The rate limits of TestRateLimitAcrossReplicas: one principal (the
// anonymous one) flooding tools/call through both gateways and both
// aggregators, one server per era so that each era's burst has a bucket
// of its own, and a find_tool limit on an optimizer server.
const (
	limitRate   = 20 // per second
	limitBurst  = 20
	floodFor    = 4 * time.Second
	floodQueues = 8 // concurrent clients
	findBurst   = 3
)

func withRateLimits(c *config.Config) {
	optimizer := true
	plain := false
	c.Servers = append(c.Servers,
		config.Server{Name: "burst-modern", Backends: []string{"alpha"}, Optimizer: &plain},
		config.Server{Name: "burst-legacy", Backends: []string{"alpha"}, Optimizer: &plain},
		config.Server{Name: "burst-find", Backends: []string{"alpha"}, Optimizer: &optimizer},
	)
	rate := strconv.Itoa(limitRate) + "/s"
	c.RateLimits.Limits = []config.RateLimit{
		{Name: "modern-user", Per: config.RatePerPrincipal, Rate: rate, Burst: limitBurst, Match: config.RateLimitMatch{Servers: []string{"burst-modern"}}},
		{Name: "legacy-user", Per: config.RatePerPrincipal, Rate: rate, Burst: limitBurst, Match: config.RateLimitMatch{Servers: []string{"burst-legacy"}}},
		// One token an hour: only the burst passes.
		{Name: "find-user", Per: config.RatePerPrincipal, Rate: "1/h", Burst: findBurst, Methods: []string{config.RateMethodFindTool},
			Match: config.RateLimitMatch{Servers: []string{"burst-find"}}},
	}
	// The aggregators take their tokens from the indexers, with their own
	// credential (config.AggregatorMethods).
	c.Aggregator.Indexer = config.Endpoint{Address: c.Gateway.Indexer.Address, Token: c.Aggregator.Peers.Token}
}

// TestRateLimitAcrossReplicas floods one tool from one principal through
// HAProxy over two gateways (and so two aggregators, sharing their
// buckets through the indexers' PostgreSQL), in each era, for a fixed
// time, and checks that what is admitted is within 10 % of burst + rate
// * duration (the time the clients asked, for the lower bound; until
// their last call ended, for the upper one), that every refusal is HTTP
// 429 with Retry-After and an error of code 429 whose data carries
// retryAfterSeconds, and that the aggregators' metrics count exactly
// what the clients saw.
// find_tool's limit is held by the indexers and refused the same way.
func TestRateLimitAcrossReplicas(t *testing.T) {
	c := startCluster(t, withRateLimits)
	for _, era := range []struct{ name, server string }{{"modern", "burst-modern"}, {"legacy", "burst-legacy"}} {
		t.Run(era.name, func(t *testing.T) {
			url := strings.TrimSuffix(c.MCPURL, "/mcp") + "/mcp/" + era.server
			send := modernCall
			if era.name == "legacy" {
				send = legacyCaller(t, url)
			}
			// The catalog of the server is built: one call succeeds. Its
			// token is back in the bucket (capped at the burst) by the
			// time the flood starts, but for the lease's one left unspent.
			testkit.Eventually(t, "the server serves alpha_echo", pollDeadline, func() error {
				r := send(t, url, 0)
				if r.status != http.StatusOK {
					return fmt.Errorf("%d %s", r.status, r.body)
				}
				return nil
			})
			before := limitMetric(t, c, era.name+"-user")
			admitted, refused, gateways, elapsed := flood(t, url, send)
			after := limitMetric(t, c, era.name+"-user")
			opened := 0
			for i := range after {
				opened += after[i].opened - before[i].opened
			}
			// At most what refilled until the last call ended; at least
			// what refilled while the clients kept asking (floodFor: a call
			// still in flight then, slow on a loaded machine, lengthens
			// elapsed but asks for nothing more). 10 % either way for the
			// leases: one unspent lapses, one held from the warm-up call.
			// What was admitted while the buckets could not be reached in
			// time is not the limit's (the bucket refills to its burst in
			// the second that lasts).
			most := float64(limitBurst) + limitRate*elapsed.Seconds()
			least := float64(limitBurst) + limitRate*floodFor.Seconds()
			got := float64(admitted - opened)
			t.Logf("%s: admitted %d of %d in %.2fs (asking for %v) through gateways %v, %d without the buckets; burst+rate*T = %.1f to %.1f",
				era.name, admitted, admitted+refused, elapsed.Seconds(), floodFor, gateways, opened, least, most)
			if got > most*1.1 || got < least*0.9 {
				t.Fatalf("%s: admitted %.0f, not within 10 %% of %.1f to %.1f", era.name, got, least, most)
			}
			if refused == 0 {
				t.Fatal("nothing refused: the flood did not reach the limit")
			}
			if len(gateways) < 2 {
				t.Fatalf("admitted calls went through %v only: the test needs both gateways", gateways)
			}
			var allowed, refusedCounted []int
			sumA, sumR := 0, 0
			for i := range after {
				allowed = append(allowed, after[i].allowed-before[i].allowed)
				refusedCounted = append(refusedCounted, after[i].refused-before[i].refused)
				sumA, sumR = sumA+allowed[i], sumR+refusedCounted[i]
			}
			t.Logf("%s: per aggregator allowed %v, refused %v", era.name, allowed, refusedCounted)
			if sumA+opened != admitted || sumR != refused {
				t.Fatalf("aggregators counted %d allowed (and %d without the buckets), %d refused; the clients saw %d and %d", sumA, opened, sumR, admitted, refused)
			}
			for i, n := range allowed {
				if n == 0 {
					t.Fatalf("aggregator %d admitted none: the test needs both sharing the buckets", i+1)
				}
			}
		})
	}
	t.Run("find_tool", func(t *testing.T) {
		url := strings.TrimSuffix(c.MCPURL, "/mcp") + "/mcp/burst-find"
		var statuses []int
		for i := range findBurst + 2 {
			r := modernRPCCall(t, url, i, "find_tool", `{"tool_description":"echo the arguments"}`)
			statuses = append(statuses, r.status)
			if r.status == http.StatusTooManyRequests {
				checkRefusal(t, r)
			} else if r.status != http.StatusOK || r.isError {
				t.Fatalf("find_tool %d: %d %s", i, r.status, r.body)
			}
		}
		want := []int{200, 200, 200, 429, 429}
		if fmt.Sprint(statuses) != fmt.Sprint(want) {
			t.Fatalf("find_tool statuses %v, want %v (the burst of %d, then refused)", statuses, want, findBurst)
		}
	})
}

// flood sends calls from floodQueues clients for floodFor and counts
// them; it fails the test on any answer but a success or a well-formed
// refusal.
func flood(t *testing.T, url string, send caller) (admitted, refused int, gateways []string, elapsed time.Duration) {
	var ok, no atomic.Int64
	var mu sync.Mutex
	seen := map[string]bool{}
	var wg sync.WaitGroup
	var id atomic.Int64
	start := time.Now()
	deadline := start.Add(floodFor)
	for range floodQueues {
		wg.Go(func() {
			for time.Now().Before(deadline) && !t.Failed() {
				r := send(t, url, int(id.Add(1)))
				switch r.status {
				case http.StatusOK:
					if r.isError {
						t.Errorf("admitted call failed: %s", r.body)
						return
					}
					ok.Add(1)
					mu.Lock()
					seen[r.gateway] = true
					mu.Unlock()
				case http.StatusTooManyRequests:
					checkRefusal(t, r)
					no.Add(1)
				default:
					t.Errorf("call: %d %s", r.status, r.body)
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed = time.Since(start)
	for g := range seen {
		gateways = append(gateways, g)
	}
	return int(ok.Load()), int(no.Load()), gateways, elapsed
}

// callReply is one raw answer.
type callReply struct {
	status     int
	retryAfter string
	gateway    string
	body       []byte
	isError    bool
	errCode    int
	errData    map[string]any
}

type caller func(t *testing.T, url string, id int) callReply

// checkRefusal: HTTP 429, Retry-After in whole seconds (at least 1), and
// an error of code 429 with the same retryAfterSeconds in its data.
func checkRefusal(t *testing.T, r callReply) {
	t.Helper()
	secs, err := strconv.Atoi(r.retryAfter)
	if err != nil || secs < 1 {
		t.Errorf("429 with Retry-After %q", r.retryAfter)
		return
	}
	if r.errCode != 429 {
		t.Errorf("429 with error code %d, want 429: %s", r.errCode, r.body)
		return
	}
	if v, ok := r.errData["retryAfterSeconds"].(float64); !ok || int(v) != secs {
		t.Errorf("429 error data %v, want retryAfterSeconds %d (the Retry-After)", r.errData, secs)
	}
}

func modernCall(t *testing.T, url string, id int) callReply {
	return modernRPCCall(t, url, id, "alpha_echo", `{"n":1}`)
}

// modernRPCCall sends one Modern tools/call.
func modernRPCCall(t *testing.T, url string, id int, tool, args string) callReply {
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":%q,"arguments":%s,"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",`+
		`"io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/clientInfo":{"name":"ratelimit","version":"0"}}}}`, id, tool, args)
	h := http.Header{}
	h.Set("Mcp-Protocol-Version", "2026-07-28")
	h.Set("Mcp-Method", "tools/call")
	h.Set("Mcp-Name", tool)
	return postCall(t, url, h, body)
}

// legacyCaller opens a Legacy session (go-sdk's client, through the load
// balancer) and returns a caller that sends raw tools/call on it.
func legacyCaller(t *testing.T, url string) caller {
	cs := harness.Connect(t, url, harness.Legacy)
	session := cs.ID()
	if session == "" {
		t.Fatal("Legacy session without an id")
	}
	return func(t *testing.T, url string, id int) callReply {
		body := fmt.Sprintf(`{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"alpha_echo","arguments":{"n":1}}}`, id)
		h := http.Header{}
		h.Set("Mcp-Protocol-Version", harness.Legacy)
		h.Set("Mcp-Session-Id", session)
		return postCall(t, url, h, body)
	}
}

var floodClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: floodQueues * 2}}

func postCall(t *testing.T, url string, h http.Header, body string) callReply {
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = h
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := floodClient.Do(req)
	if err != nil {
		return callReply{status: -1, body: []byte(err.Error())}
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	r := callReply{status: resp.StatusCode, retryAfter: resp.Header.Get("Retry-After"), gateway: resp.Header.Get(servedByHeader), body: raw}
	raw = mcpspec.LastMessage(resp.Header.Get("Content-Type"), raw)
	var msg struct {
		Result *struct {
			IsError bool `json:"isError"`
		} `json:"result"`
		Error *struct {
			Code int            `json:"code"`
			Data map[string]any `json:"data"`
		} `json:"error"`
	}
	if json.Unmarshal(raw, &msg) != nil || (msg.Result == nil && msg.Error == nil) {
		r.isError = true
		return r
	}
	if msg.Error != nil {
		r.isError, r.errCode, r.errData = true, msg.Error.Code, msg.Error.Data
	} else {
		r.isError = msg.Result.IsError
	}
	return r
}

// limitCounts are a limit's decisions on one aggregator.
// limitCounts are an aggregator's decisions of a limit, and the requests
// it admitted without the shared buckets (unavailable_total, open), which
// a loaded machine can make it do: an acquisition that took longer than
// its bound makes the replica decide by onUnavailable for a second.
type limitCounts struct{ allowed, refused, opened int }

// limitMetric reads each aggregator's counts of limit.
func limitMetric(t *testing.T, c *cluster, limit string) []limitCounts {
	t.Helper()
	out := make([]limitCounts, len(c.configs))
	for i, cfg := range c.configs {
		resp, err := http.Get("http://" + cfg.Aggregator.HTTPListen + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			opened := strings.HasPrefix(line, `switchboard_aggregator_ratelimit_unavailable_total{decision="open"}`)
			if !opened && (!strings.HasPrefix(line, "switchboard_aggregator_ratelimit_requests_total{") || !strings.Contains(line, `limit="`+limit+`"`)) {
				continue
			}
			n, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				t.Fatal(err)
			}
			if opened {
				out[i].opened += int(n)
			} else if strings.Contains(line, `outcome="allowed"`) {
				out[i].allowed += int(n)
			} else {
				out[i].refused += int(n)
			}
		}
		resp.Body.Close()
	}
	return out
}
