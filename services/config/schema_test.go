package config

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"
	"go.yaml.in/yaml/v3"
)

var updateSchema = flag.Bool("update", false, "write docs/switchboard.schema.json")

// schemaPath is the committed schema.
var schemaPath = filepath.Join("..", "..", "docs", "switchboard.schema.json")

// TestSchemaIsCurrent: docs/switchboard.schema.json is the schema of the
// types as they are (make schema writes it).
func TestSchemaIsCurrent(t *testing.T) {
	want, err := JSONSchema()
	if err != nil {
		t.Fatal(err)
	}
	if *updateSchema {
		if err := os.WriteFile(schemaPath, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(schemaPath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("docs/switchboard.schema.json is stale: run make schema and commit it")
	}
}

// TestSchemaValidatesTheExamples: the schema takes every configuration
// the project ships and refuses an unknown key and a value of the wrong
// type, as Parse does.
func TestSchemaValidatesTheExamples(t *testing.T) {
	raw, err := JSONSchema()
	if err != nil {
		t.Fatal(err)
	}
	resolved := resolvedSchema(t)
	validate := func(doc string) error { return resolved.Validate(yamlValue(t, doc)) }
	files, _ := filepath.Glob(filepath.Join("..", "..", "deploy", "examples", "*.yaml"))
	files = append(files, filepath.Join("..", "..", "test", "conformance", "switchboard.yaml"))
	for _, f := range files {
		doc, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := validate(string(doc)); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	if err := validate(shortConfig(t)); err != nil {
		t.Errorf("the short configuration: %v", err)
	}
	for name, doc := range map[string]string{
		"unknown key": "gateway: {listn: 127.0.0.1:8080}",
		"wrong type":  "aggregator: {pageSize: many}",
		"wrong shape": "aggregator: {backends: {name: a}}",
	} {
		if err := validate(doc); err == nil {
			t.Errorf("%s: validated", name)
		}
	}
	if err := validate(`aggregator: {pageSize: "${PAGE}"}`); err != nil {
		t.Errorf("a ${VAR} reference in a number key: %v", err)
	}
	if !strings.Contains(string(raw), `"serviceAuth"`) {
		t.Fatal("the schema lacks serviceAuth")
	}
}

// TestSchemaTakesWhatParseTakes: the schema (and the chart's
// values.schema.json, which embeds it) accepts every file Parse reads: a
// bare number or boolean in a text key (a stdio backend's env PORT: 3000,
// a header X-Api-Version: 2, serverInfo.version: 1.0) is its text, and a
// bare 0 is a duration ("0, or the key left out, takes the default").
func TestSchemaTakesWhatParseTakes(t *testing.T) {
	resolved := resolvedSchema(t)
	for _, doc := range []string{
		"aggregator:\n  backends:\n    - {name: files, command: [/bin/true], env: {PORT: 3000, DEBUG: true}}\n",
		"aggregator:\n  backends:\n    - {name: a, url: \"http://127.0.0.1:1/mcp\", headers: {X-Api-Version: 2}}\n",
		"gateway: {serverInfo: {version: 1.0}}\n",
		"gateway: {shutdownGrace: 0}\n",
	} {
		if _, err := Parse([]byte(doc), env(nil)); err != nil {
			t.Fatalf("%q: Parse refused it: %v", doc, err)
		}
		if err := resolved.Validate(yamlValue(t, doc)); err != nil {
			t.Errorf("%q: Parse takes it, the schema refuses it: %v", doc, err)
		}
	}
	// A bare number other than 0 is no duration (it has no unit): both
	// refuse it.
	const unitless = "gateway: {shutdownGrace: 30}\n"
	if _, err := Parse([]byte(unitless), env(nil)); err == nil {
		t.Errorf("%q: Parse took it", unitless)
	}
	if err := resolved.Validate(yamlValue(t, unitless)); err == nil {
		t.Errorf("%q: the schema took it", unitless)
	}
}

// jsonValue is v as JSON would decode it (yaml decodes maps as
// map[string]any already; numbers stay as they are).
func jsonValue(t *testing.T, v any) any {
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// resolvedSchema is JSONSchema, ready to validate with.
func resolvedSchema(t *testing.T) *jsonschema.Resolved {
	t.Helper()
	raw, err := JSONSchema()
	if err != nil {
		t.Fatal(err)
	}
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	resolved, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	return resolved
}

// yamlValue is the YAML document doc as an editor or helm validates it:
// as JSON.
func yamlValue(t *testing.T, doc string) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatal(err)
	}
	return jsonValue(t, v)
}
