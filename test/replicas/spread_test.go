package replicas

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/config"
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
