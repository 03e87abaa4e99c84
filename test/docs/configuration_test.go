// Package docs checks that the reference documentation keeps up with the
// code.
package docs

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/test/harness"
)

// TestEveryConfigKeyIsDocumented walks the configuration types and wants
// every key in docs/configuration.md, written as `path` relative to its
// section (`auth.apiKeys[].key` under gateway), possibly after a prefix
// (`dev.binDir`).
func TestEveryConfigKeyIsDocumented(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(harness.RepoRoot(t), "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	top := reflect.TypeFor[config.Config]()
	for i := range top.NumField() {
		section := top.Field(i)
		if !section.IsExported() {
			continue // not read from the file
		}
		name := yamlName(section)
		if !strings.Contains(text, "`"+name+"`") {
			t.Errorf("section %s is not documented", name)
		}
		st, prefix := section.Type, ""
		if st.Kind() == reflect.Slice {
			// A section that is a list (servers): its keys are written
			// in full, `servers[].name`.
			st, prefix = st.Elem(), name+"[]."
		}
		for _, key := range leafKeys(st, prefix) {
			if !documented(text, key) {
				t.Errorf("%s.%s is not documented", name, key)
			}
		}
	}
}

// documented reports whether docs mention key: in full, after a prefix
// (`dev.binDir`), or, for a list type used in several places (tool
// overrides, globally and per server), as the key from that list on
// (`toolOverrides[].backend`).
func documented(text, key string) bool {
	for s := key; ; {
		if strings.Contains(text, "`"+s+"`") || strings.Contains(text, "."+s+"`") {
			return true
		}
		_, rest, ok := strings.Cut(s, ".")
		if !ok || !strings.Contains(rest, "[]") {
			return false
		}
		s = rest
	}
}

// leafKeys returns the dotted paths of every non-struct field under t;
// list elements are written name[].
func leafKeys(t reflect.Type, prefix string) []string {
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	var keys []string
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() || yamlName(f) == "-" {
			continue // not read from the file
		}
		path := prefix + yamlName(f)
		ft := f.Type
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
			keys = append(keys, leafKeys(ft.Elem(), path+"[].")...)
			continue
		}
		if ft.Kind() == reflect.Struct {
			keys = append(keys, leafKeys(ft, path+".")...)
			continue
		}
		keys = append(keys, path)
	}
	return keys
}

func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return name
}
