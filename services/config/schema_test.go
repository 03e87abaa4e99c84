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
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		t.Fatal(err)
	}
	resolved, err := s.Resolve(nil)
	if err != nil {
		t.Fatal(err)
	}
	validate := func(doc string) error {
		var v any
		if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
			t.Fatal(err)
		}
		return resolved.Validate(jsonValue(t, v))
	}
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
