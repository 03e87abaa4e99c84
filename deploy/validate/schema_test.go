package validate

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/config"
)

var updateSchema = flag.Bool("update", false, "write the generated files instead of comparing them: the chart's values.schema.json with the configuration's schema, deploy/monitoring/prometheusrule.yaml from alerts.yaml")

// TestChartSchemaHasTheConfigSchema: the chart's values.schema.json checks
// values.config with the configuration file's schema (config.Schema), so
// that helm refuses a mistyped key of the file at install, as the services
// would at start (make schema writes it).
func TestChartSchemaHasTheConfigSchema(t *testing.T) {
	path := filepath.Join(chartDir, "values.schema.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	if err := json.Unmarshal(raw, &schema); err != nil {
		t.Fatal(err)
	}
	props, _ := schema["properties"].(map[string]any)
	if props == nil {
		t.Fatal("values.schema.json has no properties")
	}
	cfg := config.Schema()
	cfg["description"] = "the Switchboard configuration file (docs/configuration.md; its schema: docs/switchboard.schema.json)"
	props["config"] = cfg
	want, err := json.MarshalIndent(schema, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, '\n')
	if *updateSchema {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if !bytes.Equal(raw, want) {
		t.Fatal("values.schema.json does not hold the configuration's current schema: run make schema and commit it")
	}
}

// TestChartRefusesAMistypedConfigKey: helm itself refuses values whose
// configuration has a key the services do not know, or a value of the
// wrong type, before anything is installed.
func TestChartRefusesAMistypedConfigKey(t *testing.T) {
	for _, set := range []string{"config.gateway.listn=0.0.0.0:8080", "config.aggregator.pageSize=many"} {
		out, err := exec.Command(helmBinary(), "template", "switchboard", chartDir, "--namespace", "switchboard", "--set", set).CombinedOutput()
		if err == nil || !strings.Contains(string(out), "schema") {
			t.Errorf("--set %s: %v\n%s", set, err, out)
		}
	}
}
