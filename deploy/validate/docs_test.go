package validate

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
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

// TestOperationsDocReloadSignalsTheService: the guide's command that makes
// a service reread its configuration (SIGHUP from an ephemeral container,
// the images having no shell) must signal that service in each pod as the
// manifests render it. The aggregator's pod shares its process namespace,
// so there PID 1 is the pause container, which ignores SIGHUP.
func TestOperationsDocReloadSignalsTheService(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("`kubectl debug [^`]*--target=<container> -- ([^`]+)`").FindStringSubmatch(string(doc))
	if m == nil {
		t.Fatal("docs/operations.md has no `kubectl debug ... --target=<container> -- <command>`: update this test")
	}
	r := decodeChart(t, chartCase(t, "defaults"))
	for _, comp := range switchboardServices {
		spec := r.deployment("switchboard-" + comp).Spec.Template.Spec
		c := spec.Containers[0]
		// The image's ENTRYPOINT (TestDockerfile holds it to this) and
		// the container's arguments.
		service := strings.Join(append([]string{"/usr/local/bin/switchboard-" + comp}, c.Args...), " ")
		procs := map[int]string{1: service}
		if spec.ShareProcessNamespace != nil && *spec.ShareProcessNamespace {
			procs = map[int]string{1: "/pause", 7: service}
		}
		got := signalled(t, strings.ReplaceAll(m[1], "<container>", c.Name), procs)
		if len(got) != 1 || procs[got[0]] != service {
			t.Errorf("in the %s's pod, %q signals %v of %v, not the %s", comp, m[1], got, procs, comp)
		}
	}
}

// signalled returns the processes of procs (by PID) that command, a kill
// or pkill of busybox, signals.
func signalled(t *testing.T, command string, procs map[int]string) []int {
	t.Helper()
	f := strings.Fields(command)
	var got []int
	switch {
	case len(f) == 3 && f[0] == "kill" && f[1] == "-HUP":
		pid, err := strconv.Atoi(f[2])
		if err != nil {
			t.Fatalf("%q: %v", command, err)
		}
		if _, ok := procs[pid]; ok {
			got = append(got, pid)
		}
	case len(f) == 4 && f[0] == "pkill" && f[1] == "-HUP" && f[2] == "-f":
		re, err := regexp.Compile(f[3])
		if err != nil {
			t.Fatalf("%q: %v", command, err)
		}
		for pid, cmdline := range procs {
			if re.MatchString(cmdline) {
				got = append(got, pid)
			}
		}
	default:
		t.Fatalf("%q: this test knows kill -HUP <pid> and pkill -HUP -f <pattern> only", command)
	}
	slices.Sort(got)
	return got
}

// TestOperationsDocRollbackMatchesTheChart: the runbook's advice on
// rolling back a bad configuration must describe what the chart does. An
// upgrade keeps the previous configuration's ConfigMap
// (helm.sh/resource-policy: keep), so the guide must not say it is gone.
func TestOperationsDocRollbackMatchesTheChart(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	cm := decodeChart(t, chartCase(t, "defaults")).configMap("switchboard-config")
	if cm == nil || cm.Annotations["helm.sh/resource-policy"] != "keep" {
		t.Fatal("the chart no longer keeps the configuration's ConfigMap: update this test")
	}
	if !strings.Contains(string(doc), "`helm rollback`") {
		t.Fatal("docs/operations.md no longer advises helm rollback: update this test")
	}
	for _, claim := range []string{"ConfigMap the upgrade deleted", "the upgrade deletes"} {
		if strings.Contains(string(doc), claim) {
			t.Errorf("docs/operations.md says %q, but an upgrade keeps the previous ConfigMap", claim)
		}
	}
}
