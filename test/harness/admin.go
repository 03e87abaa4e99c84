package harness

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/demobackend"
)

// AddTool adds (or replaces) a tool on a running demo backend of the
// cluster through its /admin API; its clients get list_changed.
func (c *Cluster) AddTool(t testing.TB, backend string, tool demobackend.ToolSpec) {
	t.Helper()
	body, err := json.Marshal(tool)
	if err != nil {
		t.Fatal(err)
	}
	c.admin(t, backend, http.MethodPost, "/admin/tools", body, http.StatusCreated)
}

// RemoveTool removes a tool from a running demo backend of the cluster.
func (c *Cluster) RemoveTool(t testing.TB, backend, tool string) {
	t.Helper()
	c.admin(t, backend, http.MethodDelete, "/admin/tools/"+tool, nil, http.StatusNoContent)
}

// Calls returns how many requests reached each handler of a running demo
// backend of the cluster, by "tools/call <tool>" and "resources/read <uri>".
func (c *Cluster) Calls(t testing.TB, backend string) map[string]int {
	t.Helper()
	var calls map[string]int
	if err := json.Unmarshal(c.admin(t, backend, http.MethodGet, "/admin/calls", nil, http.StatusOK), &calls); err != nil {
		t.Fatalf("GET /admin/calls of %s: %v", backend, err)
	}
	return calls
}

func (c *Cluster) admin(t testing.TB, backend, method, path string, body []byte, want int) []byte {
	t.Helper()
	mcpURL, ok := c.BackendURLs[backend]
	if !ok {
		t.Fatalf("no backend %q in the cluster", backend)
	}
	url := strings.TrimSuffix(mcpURL, demobackend.MCPPath) + path
	req, err := http.NewRequestWithContext(t.Context(), method, url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	msg, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != want {
		t.Fatalf("%s %s: %s %s %v", method, url, resp.Status, msg, err)
	}
	return msg
}

// Sleeps returns a demo backend's counts of sleep calls (running,
// cancelled, completed), from its /admin/sleeps.
func (c *Cluster) Sleeps(t testing.TB, backend string) demobackend.SleepStats {
	t.Helper()
	mcpURL, ok := c.BackendURLs[backend]
	if !ok {
		t.Fatalf("no backend %q in the cluster", backend)
	}
	resp, err := http.Get(strings.TrimSuffix(mcpURL, demobackend.MCPPath) + "/admin/sleeps")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var stats demobackend.SleepStats
	if err := json.NewDecoder(resp.Body).Decode(&stats); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /admin/sleeps of %s: %s %v", backend, resp.Status, err)
	}
	return stats
}
