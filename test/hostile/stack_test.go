package hostile

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/services/testkit"
	"github.com/switchboard-mcp/switchboard/test/ports"
)

// Two API keys, two principals: alice (group users) may use the weather
// backend only; bob (group admins) may use everything.
const (
	aliceKey = "alice-hostile-key"
	bobKey   = "bob-hostile-key"
	// maxBody is the gateway's request body limit in this deployment.
	maxBody = 256 << 10
)

const policy = `
permit (principal in Group::"admins", action, resource);
permit (principal in Group::"users", action, resource in Backend::"weather");
`

// The weather backend has enough of every kind for several pages at page
// size 2, and one tool that mirrors an argument into a header.
const weatherBackend = `
tools:
  - name: forecast
    description: Get the weather forecast for a city.
    behaviour: echo
    inputSchema:
      type: object
      properties:
        city: {type: string, description: name of the city}
      required: [city]
  - name: regional_report
    description: Weather report for a region.
    behaviour: echo
    inputSchema:
      type: object
      properties:
        region: {type: string, x-mcp-header: Region}
      required: [region]
  - name: current_conditions
    description: Current weather conditions at the station.
    behaviour: text
    text: "Sunny (from {backend})."
  - name: add_temperatures
    description: Add two temperatures a and b.
    behaviour: add
resources:
  - {uri: "weather://stations/a", name: a, mimeType: text/plain, text: "station a"}
  - {uri: "weather://stations/b", name: b, mimeType: text/plain, text: "station b"}
  - {uri: "weather://stations/c", name: c, mimeType: text/plain, text: "station c"}
prompts:
  - {name: plan_trip, description: Plan a trip, text: "Plan a trip."}
  - {name: pack_bag, description: Pack a bag, text: "Pack a bag."}
  - {name: umbrella, description: Umbrella advice, text: "Take one."}
`

// The notes backend is visible to bob only.
const notesBackend = `
tools:
  - name: create_note
    description: Create a secret note.
    behaviour: echo
  - name: search_notes
    description: Search the secret notes.
    behaviour: echo
  - name: about
    description: What this backend is.
    behaviour: text
    text: "notes"
  - name: secret_report
    description: A report whose region and owner are mirrored into headers.
    behaviour: echo
    inputSchema:
      type: object
      properties:
        region: {type: string, x-mcp-header: Region}
        filter:
          type: object
          properties:
            owner: {type: string, x-mcp-header: Owner}
      required: [region]
`

const configTemplate = `
serviceAuth:
  credentials:
    - name: gateway
      token: ${SWITCHBOARD_GATEWAY_TOKEN}
      assertPrincipals: true
      allow: ["switchboard.aggregator.v1.AggregatorService/*", "switchboard.indexer.v1.IndexerService/*"]
    - name: indexer
      token: ${SWITCHBOARD_INDEXER_TOKEN}
      assertPrincipals: true
      allow: [switchboard.aggregator.v1.AggregatorService/Discover, switchboard.aggregator.v1.AggregatorService/ListTools, switchboard.aggregator.v1.AggregatorService/WatchCatalog]
logging:
  level: warn
  format: text
gateway:
  listen: 127.0.0.1:{{gateway}}
  auth:
    mode: apiKeys
    apiKeys:
      - {key: ` + aliceKey + `, subject: alice, groups: [users]}
      - {key: ` + bobKey + `, subject: bob, groups: [admins]}
  http:
    maxBodyBytes: ` + "262144" + `
  streams: {maxPerPrincipal: 4, maxOpen: 6}
  aggregator:
    address: 127.0.0.1:{{aggregator}}
    token: ${SWITCHBOARD_GATEWAY_TOKEN}
  indexer:
    address: 127.0.0.1:{{indexer}}
    token: ${SWITCHBOARD_GATEWAY_TOKEN}
aggregator:
  listen: 127.0.0.1:{{aggregator}}
  httpListen: 127.0.0.1:{{aggregatorops}}
  pageSize: 2
  conflictResolution:
    strategy: prefix
    prefixFormat: "{backend}_"
  authz:
    policyFile: "{{dir}}/policy.cedar"
  backends:
    - {name: weather, url: "http://127.0.0.1:{{weather}}/mcp"}
    - {name: notes, url: "http://127.0.0.1:{{notes}}/mcp"}
indexer:
  listen: 127.0.0.1:{{indexer}}
  database: ""
  aggregator:
    address: 127.0.0.1:{{aggregator}}
    token: ${SWITCHBOARD_INDEXER_TOKEN}
dev:
  startTimeout: 3m
  backends:
    - {name: weather, listen: "127.0.0.1:{{weather}}", config: weather.yaml}
    - {name: notes, listen: "127.0.0.1:{{notes}}", config: notes.yaml}
`

// stack is a whole Switchboard run by switchboard-dev: two demo backends,
// the aggregator, the indexer over a throwaway PostgreSQL, and the gateway,
// each its own process.
type stack struct {
	url     string // the MCP endpoint, http://host:port/mcp
	base    string // http://host:port
	runner  *exec.Cmd
	exited  chan struct{}
	log     *testkit.LogBuffer
	healthz map[string]string // process name → its HTTP health URL
	// aggregatorOps is the aggregator's ops endpoint, http://host:port.
	aggregatorOps string
}

// binDir returns the directory of the Switchboard binaries: $SWITCHBOARD_BIN
// (make test-go sets it after make build), else a fresh build of them.
func binDir(t *testing.T) string {
	if dir := os.Getenv("SWITCHBOARD_BIN"); dir != "" {
		return dir
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range []string{
		"gateway/cmd/switchboard-gateway", "aggregator/cmd/switchboard-aggregator", "indexer/cmd/switchboard-indexer",
		"services/cmd/switchboard-demo-backend", "services/cmd/switchboard-dev",
	} {
		module, pkg, _ := strings.Cut(c, "/")
		cmd := exec.Command("go", "build", "-o", dir+string(filepath.Separator), "./"+pkg)
		cmd.Dir = filepath.Join(root, module)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", c, err, out)
		}
	}
	return dir
}

func freePort(t *testing.T) string {
	port, err := ports.Free()
	if err != nil {
		t.Fatal(err)
	}
	return strconv.Itoa(port)
}

// startStack writes the deployment into a temporary directory, runs
// switchboard-dev on it and waits for its "ready <URL>" line.
func startStack(t *testing.T) *stack {
	bins := binDir(t)
	dir := t.TempDir()
	ports := map[string]string{}
	for _, name := range []string{"gateway", "aggregator", "aggregatorops", "indexer", "weather", "notes"} {
		ports[name] = freePort(t)
	}
	cfg := configTemplate
	for name, port := range ports {
		cfg = strings.ReplaceAll(cfg, "{{"+name+"}}", port)
	}
	// The aggregator resolves the policy file against its working
	// directory, not the configuration's.
	cfg = strings.ReplaceAll(cfg, "{{dir}}", dir)
	for name, content := range map[string]string{
		"switchboard.yaml": cfg, "weather.yaml": weatherBackend, "notes.yaml": notesBackend, "policy.cedar": policy,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	s := &stack{exited: make(chan struct{}), log: &testkit.LogBuffer{}, aggregatorOps: "http://127.0.0.1:" + ports["aggregatorops"], healthz: map[string]string{
		"backend:weather": "http://127.0.0.1:" + ports["weather"] + "/healthz",
		"backend:notes":   "http://127.0.0.1:" + ports["notes"] + "/healthz",
		"gateway":         "http://127.0.0.1:" + ports["gateway"] + "/healthz",
	}}
	s.runner = exec.Command(filepath.Join(bins, "switchboard-dev"), "--config", filepath.Join(dir, "switchboard.yaml"), "--bin-dir", bins)
	stdout, err := s.runner.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.runner.Stderr = s.log
	if err := s.runner.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if url, ok := strings.CutPrefix(sc.Text(), "ready "); ok {
				ready <- url
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { _ = s.runner.Wait(); close(s.exited) }()
	t.Cleanup(func() {
		_ = s.runner.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
		case <-time.After(60 * time.Second):
			_ = s.runner.Process.Kill()
			<-s.exited
		}
		if t.Failed() {
			t.Logf("switchboard-dev output:\n%s", s.log.String())
		}
	})
	select {
	case s.url = <-ready:
	case <-s.exited:
		t.Fatalf("switchboard-dev exited before ready:\n%s", s.log.String())
	case <-time.After(5 * time.Minute):
		t.Fatalf("switchboard-dev not ready after 5 minutes:\n%s", s.log.String())
	}
	s.base = strings.TrimSuffix(s.url, "/mcp")
	return s
}

var readyLine = regexp.MustCompile(`msg=ready .*?process=(\S+) pid=(\d+)`)

// checkAlive fails unless switchboard-dev and every process it started are
// still running and the HTTP ones still answer their health checks.
func (s *stack) checkAlive(t *testing.T) {
	t.Helper()
	select {
	case <-s.exited:
		t.Fatalf("switchboard-dev exited (a child died):\n%s", s.log.String())
	default:
	}
	procs := map[string]int{}
	for _, m := range readyLine.FindAllStringSubmatch(s.log.String(), -1) {
		pid, _ := strconv.Atoi(m[2])
		procs[m[1]] = pid
	}
	for _, name := range []string{"backend:weather", "backend:notes", "aggregator", "indexer", "gateway"} {
		pid, ok := procs[name]
		if !ok {
			t.Errorf("no ready line for %s in the runner's log", name)
			continue
		}
		if err := syscall.Kill(pid, 0); err != nil {
			t.Errorf("%s (pid %d) is gone: %v", name, pid, err)
		}
	}
	for name, url := range s.healthz {
		resp, err := http.Get(url)
		if err != nil {
			t.Errorf("%s health: %v", name, err)
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s health: %d", name, resp.StatusCode)
		}
	}
}

// waitIndexed polls find_tool until the indexer has alice's scope, so the
// SQL cases exercise a real search rather than a cold start.
func (s *stack) waitIndexed(t *testing.T, c *client) {
	t.Helper()
	testkit.Eventually(t, "find_tool to find weather_forecast", 2*time.Minute, func() error {
		r := c.modern(t, "/mcp/optimized", aliceKey, "tools/call", `"name":"find_tool","arguments":{"tool_description":"weather forecast"}`, "Mcp-Name", "find_tool")
		if r.status != http.StatusOK || !strings.Contains(string(r.body), "weather_forecast") {
			return fmt.Errorf("%d %s", r.status, r.body)
		}
		return nil
	})
}

func (s *stack) String() string { return fmt.Sprintf("stack at %s", s.url) }
