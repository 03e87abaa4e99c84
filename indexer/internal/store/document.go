package store

import (
	"crypto/sha256"
	"encoding/json"
	"strings"
)

// Tool is one tool of a view, as the aggregator lists it.
type Tool struct {
	Name string
	// OriginalName is the tool's name on its backend, when the aggregator
	// advertises it under another ("github_createIssue" for
	// "createIssue": prefixed or renamed); optional.
	OriginalName    string
	Description     string
	InputSchemaJSON string
	// DefinitionJSON is the complete MCP tool object; its size estimates
	// the tokens the tool costs in a tools/list answer. Optional.
	DefinitionJSON string
	// MetaJSON is the tool's _meta object as its view lists it, carried in
	// hits (an MCP App's page among others); "" for none.
	MetaJSON string
	// Title, AnnotationsJSON and OutputSchemaJSON are the tool's title,
	// annotations and output schema as its view lists them, carried in
	// hits; "" for none.
	Title            string
	AnnotationsJSON  string
	OutputSchemaJSON string
}

// Document is a tool as the index stores it: its text cleaned and its
// searchable fields derived. Equal documents (same ContentHash) are stored
// once, whichever views list them.
type Document struct {
	// ContentHash is the SHA-256 of name, description and input schema,
	// and of the original name and the listed fields each when it is set.
	ContentHash     []byte
	Name            string
	Description     string
	InputSchemaJSON string
	// MetaJSON is the tool's _meta ("" for none).
	MetaJSON string
	// Title, AnnotationsJSON and OutputSchemaJSON are as Tool's.
	Title            string
	AnnotationsJSON  string
	OutputSchemaJSON string
	// NameWords is the name split into words (NameWords).
	NameWords string
	// NameKey is the name folded to one token, for trigram similarity
	// against identifier-like or misspelled queries (NameKey).
	NameKey string
	// ParamText is the parameter names and descriptions of the input
	// schema (ParamText).
	ParamText string
	// JSONBytes is the size of the tool in a tools/list answer, for token
	// estimates.
	JSONBytes int
}

// Document derives the stored form of t. NUL characters, which are valid
// UTF-8 (and so may come from any backend) but which PostgreSQL text
// cannot hold, are dropped: one such tool must not fail the build of a
// whole scope. A missing input schema is the empty object schema.
func (t Tool) Document() Document {
	clean := func(s string) string { return strings.ReplaceAll(s, "\x00", "") }
	d := Document{Name: clean(t.Name), Description: clean(t.Description), InputSchemaJSON: clean(t.InputSchemaJSON), MetaJSON: clean(t.MetaJSON),
		Title: clean(t.Title), AnnotationsJSON: clean(t.AnnotationsJSON), OutputSchemaJSON: clean(t.OutputSchemaJSON)}
	if d.InputSchemaJSON == "" {
		d.InputSchemaJSON = `{"type":"object"}`
	}
	original := clean(t.OriginalName)
	if original == d.Name {
		original = ""
	}
	h := sha256.New()
	parts := []string{d.Name, d.Description, d.InputSchemaJSON}
	if original != "" {
		// Only then: a tool advertised under its own name keeps the hash
		// (and so the stored document) it always had.
		parts = append(parts, original)
	}
	// Likewise: a tool without _meta, title, annotations or output schema
	// keeps its hash. Each is labelled, so no two of them can be taken
	// for one another.
	for _, listed := range [...]struct{ label, value string }{
		{"_meta", d.MetaJSON}, {"title", d.Title}, {"annotations", d.AnnotationsJSON}, {"outputSchema", d.OutputSchemaJSON},
	} {
		if listed.value != "" {
			parts = append(parts, listed.label, listed.value)
		}
	}
	for _, part := range parts {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	d.ContentHash = h.Sum(nil)
	d.NameWords = NameWords(d.Name, original)
	d.NameKey = NameKey(d.Name)
	d.ParamText = ParamText(d.InputSchemaJSON)
	d.JSONBytes = definitionBytes(t.DefinitionJSON, d)
	return d
}

// NameKey is the name lower-cased with every separator removed, cut to
// MaxNameKeyRunes: trigram similarity costs time in proportion to it, and
// no real tool name is longer.
func NameKey(name string) string {
	key := []rune(strings.Join(SplitWords(name), ""))
	return string(key[:min(len(key), MaxNameKeyRunes)])
}

// MaxNameKeyRunes bounds NameKey.
const MaxNameKeyRunes = 256

// definitionBytes is the size of the tool as a tools/list entry: the
// definition the aggregator passed, or one rebuilt from the document.
func definitionBytes(definitionJSON string, d Document) int {
	if definitionJSON != "" {
		return len(definitionJSON)
	}
	b, _ := json.Marshal(struct {
		Name        string          `json:"name"`
		Description string          `json:"description,omitempty"`
		InputSchema json.RawMessage `json:"inputSchema"`
	}{d.Name, d.Description, json.RawMessage(d.InputSchemaJSON)})
	if len(b) == 0 { // the schema was not valid JSON
		return len(d.Name) + len(d.Description) + len(d.InputSchemaJSON) + 40
	}
	return len(b)
}
