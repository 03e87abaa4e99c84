package e2e

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/test/harness"
)

// readmeCurl finds the README's one-line try-it command and returns its
// headers and body, so the test can send exactly what a reader would.
func readmeCurl(t *testing.T) (headers [][2]string, body string) {
	t.Helper()
	f, err := os.Open(filepath.Join(harness.RepoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "curl ") || !strings.Contains(line, "http://127.0.0.1:8080/mcp") {
			continue
		}
		for _, m := range regexp.MustCompile(`-H '([^':]+): ([^']*)'`).FindAllStringSubmatch(line, -1) {
			headers = append(headers, [2]string{m[1], m[2]})
		}
		if m := regexp.MustCompile(`-d '([^']*)'`).FindStringSubmatch(line); m != nil {
			body = m[1]
		}
		return headers, body
	}
	t.Fatal("README.md has no curl command for http://127.0.0.1:8080/mcp")
	return nil, ""
}

// testReadmeCurl sends the README's try-it request to the cluster's
// gateway: it must list the demo tools.
func testReadmeCurl(t *testing.T, mcpURL string) {
	headers, body := readmeCurl(t)
	req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, mcpURL, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range headers {
		req.Header.Set(h[0], h[1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(out), `"name":"alpha_echo"`) {
		t.Fatalf("the README's request got %s:\n%s", resp.Status, out)
	}
}
