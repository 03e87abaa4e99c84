package validate

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/switchboard-mcp/switchboard/services/config"
)

var (
	metricName = regexp.MustCompile(`Name:\s*"(switchboard_[a-z0-9_]+)"`)
	spanName   = regexp.MustCompile(`\.Start\(\w+, "([^"]+)"[,)]`)
)

// TestOperationsDocNamesEveryMetric keeps the metric and span list of
// docs/operations.md in step with the code: every metric registered and
// every span started under a literal name must appear there.
func TestOperationsDocNamesEveryMetric(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]string{}
	for _, dir := range []string{"gateway", "aggregator", "indexer", "services"} {
		err := filepath.WalkDir(filepath.Join(repoRoot, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "gen" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for _, re := range []*regexp.Regexp{metricName, spanName} {
				for _, m := range re.FindAllStringSubmatch(string(src), -1) {
					found[m[1]] = path
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(found) < 5 {
		t.Fatalf("found only %d metric and span names in the code: is the scan still right?", len(found))
	}
	for name, path := range found {
		if !strings.Contains(string(doc), "`"+name+"`") {
			t.Errorf("docs/operations.md does not list %s (from %s)", name, path)
		}
	}
}

// TestLocalTracingConfig checks that the local tracing configuration loads
// and sends traces where the local collector listens.
func TestLocalTracingConfig(t *testing.T) {
	dir := filepath.Join("..", "local-tracing")
	raw, err := os.ReadFile(filepath.Join(dir, "switchboard-dev.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(raw, func(string) (string, bool) { return "a-token", true })
	if err != nil {
		t.Fatal(err)
	}
	var collector otelConfig
	rawCollector, err := os.ReadFile(filepath.Join(dir, "collector.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(rawCollector, &collector); err != nil {
		t.Fatal(err)
	}
	if got, want := cfg.Telemetry.OTLPEndpoint, collector.Receivers["otlp"].Protocols["grpc"].Endpoint; got == "" || got != want {
		t.Errorf("telemetry.otlpEndpoint %q, but the local collector listens on %q", got, want)
	}
	if !cfg.Telemetry.OTLPInsecure {
		t.Error("the local collector has no TLS: telemetry.otlpInsecure must be true")
	}
	for _, b := range cfg.Dev.Backends {
		if _, err := os.Stat(filepath.Join(dir, b.Config)); err != nil {
			t.Errorf("demo backend %s: %v", b.Name, err)
		}
	}
}
