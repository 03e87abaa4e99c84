package replicas

import (
	"bufio"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/config"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/rpc"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// handledCalls is how many CallTool RPCs the aggregator serving cfg has
// handled for the gateways.
func handledCalls(t *testing.T, cfg *config.Config) int { return handledRPCs(t, cfg, "CallTool") }

// handledRPCs is how many of one AggregatorService RPC the aggregator
// serving cfg has handled for the gateways, from
// switchboard_grpc_server_handled_total on its ops port.
func handledRPCs(t *testing.T, cfg *config.Config, rpc string) int {
	t.Helper()
	resp, err := http.Get("http://" + cfg.Aggregator.HTTPListen + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics of the aggregator at %s: %s", cfg.Aggregator.Listen, resp.Status)
	}
	total := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "switchboard_grpc_server_handled_total{") ||
			!strings.Contains(line, `caller="gateway"`) || !strings.Contains(line, "AggregatorService/"+rpc+`"`) {
			continue
		}
		n, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		total += int(n)
	}
	return total
}

// testAggregatorsShare makes calls through the load balancer and checks
// that every aggregator replica handled some of them: gateways spread
// their calls over all healthy aggregators (client-side balancing over the
// name that resolves to both), rather than holding one connection to one.
func testAggregatorsShare(t *testing.T, c *cluster) {
	const calls = 20
	before := make([]int, len(c.configs))
	for i, cfg := range c.configs {
		before[i] = handledCalls(t, cfg)
	}
	for _, era := range eras {
		cs := connect(t, c.MCPURL, era.pin, newRecorder(), clientOptions{noStream: true})
		for range calls / 2 {
			if err := echo(t.Context(), cs, "alpha", pollDeadline); err != nil {
				t.Fatal(err)
			}
		}
	}
	var got []int
	for i, cfg := range c.configs {
		got = append(got, handledCalls(t, cfg)-before[i])
	}
	sum := 0
	for i, n := range got {
		sum += n
		if n == 0 {
			t.Errorf("aggregator-%d handled none of the %d calls (per replica: %v); want every replica to take a share", i+1, calls, got)
		}
	}
	if sum < calls {
		t.Errorf("the aggregators handled %d CallTool RPCs for %d calls", sum, calls)
	}
	t.Logf("CallTool RPCs per aggregator replica for %d calls: %v", calls, got)
}

// operatorToken is the replicas' operator credential (the console's).
const operatorToken = "operator-" + "5e5e5e5e5e5e5e5e"

// testTrafficOfEveryReplica: over the balanced address the console reads
// GetTraffic through, consecutive calls reach every aggregator replica,
// each naming itself apart, so the console's traffic page sums them all;
// together they counted every call testAggregatorsShare made.
func testTrafficOfEveryReplica(t *testing.T, c *cluster) {
	conn, err := rpc.Dial(config.Endpoint{Address: c.configs[0].Gateway.Aggregator.Address, Token: operatorToken}, config.TLS{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	agg := aggregatorv1.NewAggregatorServiceClient(conn)
	seen := map[string]int64{}
	// A new channel's first calls go to the replicas it reached first:
	// the others take their turns once connected and found healthy.
	testkit.Eventually(t, "GetTraffic reaches every replica", pollDeadline, func() error {
		resp, err := agg.GetTraffic(t.Context(), &aggregatorv1.GetTrafficRequest{})
		if err != nil {
			return err
		}
		var calls int64
		for _, m := range resp.GetMinutes() {
			for _, cell := range m.GetCells() {
				if cell.GetDimension() == "tool" && cell.GetName() == "alpha_echo" {
					calls += cell.GetCalls()
				}
			}
		}
		seen[resp.GetReplica()] = calls
		if len(seen) != len(c.configs) {
			return fmt.Errorf("reached replicas %v, want %d distinct", seen, len(c.configs))
		}
		return nil
	})
	var sum int64
	for name, n := range seen {
		if n == 0 {
			t.Errorf("replica %q counted no call of alpha_echo", name)
		}
		sum += n
	}
	if sum < 20 {
		t.Errorf("the replicas counted %d calls of alpha_echo in all (%v), want at least the 20 made", sum, seen)
	}
}
