package config

import (
	"encoding/json"
	"reflect"
	"strings"
)

// The configuration file's JSON Schema, made from the Go types (their yaml
// names): every key with its type, and no other key, as Parse reads the
// file strictly. Editors that know YAML and JSON Schema complete and check
// keys with it; docs/switchboard.schema.json is this schema, checked
// current by TestSchemaIsCurrent (make schema writes it).

// SchemaID names the schema.
const SchemaID = "https://switchboard-mcp.dev/schema/switchboard.schema.json"

// expandable is what a non-text key may hold instead of its value: a
// ${VAR} reference, typed by the key once expanded (Parse).
var expandable = map[string]any{"type": "string", "pattern": `\$\{`}

// JSONSchema is the schema of a whole configuration file, as indented
// JSON.
func JSONSchema() ([]byte, error) {
	s := Schema()
	s["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	s["$id"] = SchemaID
	s["title"] = "Switchboard configuration"
	s["description"] = "One file for every Switchboard service; docs/configuration.md lists each key."
	out, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// schemaOf is the schema of a value of type t as the file writes it.
func schemaOf(t reflect.Type) map[string]any {
	if t == reflect.TypeFor[Duration]() {
		// A bare 0 is the one number Duration reads: no unit is
		// needed for none at all ("0, or the key left out, takes the
		// default").
		return map[string]any{"anyOf": []any{map[string]any{"type": "string"}, map[string]any{"const": 0}},
			"description": `a Go duration: "500ms", "30s", "2m", or 0`}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return schemaOf(t.Elem())
	case reflect.Struct:
		props := map[string]any{}
		for i := range t.NumField() {
			f := t.Field(i)
			name := strings.Split(f.Tag.Get("yaml"), ",")[0]
			if !f.IsExported() || name == "-" || name == "" {
				continue
			}
			props[name] = schemaOf(f.Type)
		}
		return map[string]any{"type": "object", "additionalProperties": false, "properties": props}
	case reflect.Slice:
		return map[string]any{"type": "array", "items": schemaOf(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": schemaOf(t.Elem())}
	case reflect.String:
		// YAML reads an unquoted scalar into a text key as the text
		// written (env PORT: 3000, serverInfo.version: 1.0), and so
		// does Parse; the schema must not refuse what the services
		// take.
		return map[string]any{"type": []any{"string", "number", "boolean"}}
	case reflect.Bool:
		return orExpandable("boolean")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return orExpandable("integer")
	case reflect.Float32, reflect.Float64:
		return orExpandable("number")
	}
	// any: a value of any type (an argument override's value).
	return map[string]any{}
}

// Schema is the schema of a configuration, as a JSON value, for a file
// that embeds one (the Helm chart's values.config).
func Schema() map[string]any { return schemaOf(reflect.TypeFor[Config]()) }

// orExpandable is a value of type, or a ${VAR} reference.
func orExpandable(typ string) map[string]any {
	return map[string]any{"anyOf": []any{map[string]any{"type": typ}, expandable}}
}
