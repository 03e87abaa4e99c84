package store

import (
	"encoding/json"
	"slices"
	"sort"
	"strings"
	"unicode"
)

// SplitWords breaks an identifier or a phrase into lower-case words: at
// non-alphanumerics (snake_case, dots, dashes, slashes, spaces), at
// camelCase humps ("getHTTPResponse" → get, http, response) and between
// letters and digits.
func SplitWords(s string) []string {
	var words []string
	var cur []rune
	flush := func() {
		if len(cur) > 0 {
			words = append(words, strings.ToLower(string(cur)))
			cur = cur[:0]
		}
	}
	rs := []rune(s)
	for i, r := range rs {
		if !unicode.IsLetter(r) && !unicode.IsDigit(r) {
			flush()
			continue
		}
		if len(cur) > 0 {
			prev := cur[len(cur)-1]
			switch {
			case unicode.IsLower(prev) && unicode.IsUpper(r):
				flush()
			case unicode.IsUpper(prev) && unicode.IsUpper(r) && i+1 < len(rs) && unicode.IsLower(rs[i+1]):
				// The last capital of an acronym starts the next word.
				flush()
			case unicode.IsDigit(prev) != unicode.IsDigit(r):
				flush()
			}
		}
		cur = append(cur, r)
	}
	flush()
	return words
}

// NameWords is the text indexed for a tool name: its words, plus the
// whole name folded to one token when it has several, so that a query
// naming the tool exactly ("getweather") matches too, as a prefix too
// ("weather" begins "weatherforecast"). original, when not empty, is the
// tool's name on its backend, folded the same way: an aggregator's
// prefix ("acme_weatherForecast") would otherwise put its backend's name
// at the start of every tool's folded name, and a query beginning the
// tool's own name would match none of them.
func NameWords(name, original string) string {
	words := SplitWords(name)
	text := strings.Join(words, " ")
	if len(words) > 1 {
		text += " " + strings.Join(words, "")
	}
	if ow := SplitWords(original); len(ow) > 1 && !slices.Equal(ow, words) {
		text += " " + strings.Join(ow, "")
	}
	return text
}

// ParamText extracts parameter names (split into words) and descriptions
// from a JSON Schema, walking nested objects and arrays a few levels deep.
// A schema that does not parse contributes nothing: it is the backend's
// schema, indexed on a best-effort basis.
func ParamText(schemaJSON string) string {
	var schema map[string]any
	if json.Unmarshal([]byte(schemaJSON), &schema) != nil {
		return ""
	}
	var parts []string
	collectParams(schema, 0, &parts)
	return strings.Join(parts, " ")
}

func collectParams(schema map[string]any, depth int, parts *[]string) {
	if depth > 4 {
		return
	}
	props, _ := schema["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for name := range props {
		names = append(names, name)
	}
	sort.Strings(names) // deterministic text for equal schemas
	for _, name := range names {
		*parts = append(*parts, strings.Join(SplitWords(name), " "))
		prop, _ := props[name].(map[string]any)
		if desc, ok := prop["description"].(string); ok {
			*parts = append(*parts, desc)
		}
		collectParams(prop, depth+1, parts)
	}
	if items, ok := schema["items"].(map[string]any); ok {
		collectParams(items, depth+1, parts)
	}
}
