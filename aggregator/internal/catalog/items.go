package catalog

import (
	"encoding/json"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/override"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	"github.com/switchboard-mcp/switchboard/services/rawjson"
)

// The item functions make an item's API message and its definition: the
// item as listed (raw, byte for byte, so fields go-sdk does not model reach
// clients), with its name member rewritten to the advertised name where
// the catalog renames; the typed item encoded when raw is nil (lists made
// in code). Schemas and annotations are also passed as listed.
//
// A tool's message is read from those bytes alone (override.FieldsOf),
// never from the typed copy go-sdk's decoding made of them, so the
// message, the definition and the pinning digest read one text the same
// way; the catalog never holds a definition that could be read two ways
// (CheckDefinition, Screen).

func toolItem(t *mcp.Tool, raw []byte, name, b string) (*aggregatorv1.Tool, []byte) {
	if raw == nil {
		raw, _ = json.Marshal(t)
	}
	def := definition(raw, t, name, func(adv *mcp.Tool) { adv.Name = name })
	def = toolUI(def, b)
	f := override.FieldsOf(raw)
	msg := &aggregatorv1.Tool{
		Name:             name,
		Title:            f.Title,
		Description:      f.Description,
		InputSchemaJson:  string(f.InputSchema),
		OutputSchemaJson: string(f.OutputSchema),
		AnnotationsJson:  string(f.Annotations),
		Backend:          b,
		OriginalName:     t.Name,
		DefinitionJson:   string(def),
	}
	return msg, def
}

func promptItem(p *mcp.Prompt, raw []byte, name, b string) (*aggregatorv1.Prompt, []byte) {
	def := definition(raw, p, name, func(adv *mcp.Prompt) { adv.Name = name })
	return &aggregatorv1.Prompt{Name: name, Title: p.Title, Description: p.Description, Backend: b, OriginalName: p.Name, DefinitionJson: string(def)}, def
}

// resourceItem and templateItem make an item under its advertised URI or
// URI template: a ui:// one's is its backend's (UIURI), any other's its
// own.
func resourceItem(r *mcp.Resource, raw []byte, uri, b string) (*aggregatorv1.Resource, []byte) {
	def := withURI(definition(raw, r, "", nil), "uri", r.URI, uri)
	return &aggregatorv1.Resource{Uri: uri, Name: r.Name, Title: r.Title, Description: r.Description, MimeType: r.MIMEType, Backend: b, DefinitionJson: string(def)}, def
}

func templateItem(t *mcp.ResourceTemplate, raw []byte, uriTemplate, b string) (*aggregatorv1.ResourceTemplate, []byte) {
	def := withURI(definition(raw, t, "", nil), "uriTemplate", t.URITemplate, uriTemplate)
	return &aggregatorv1.ResourceTemplate{UriTemplate: uriTemplate, Name: t.Name, Title: t.Title, Description: t.Description, MimeType: t.MIMEType, Backend: b, DefinitionJson: string(def)}, def
}

// definition is the advertised definition of an item: raw with its name
// member set to name (rename not nil), or raw as it is; the typed item
// (renamed by rename) encoded when raw is nil.
func definition[T any](raw []byte, typed *T, name string, rename func(*T)) []byte {
	if raw != nil {
		if rename == nil {
			return raw
		}
		if def, err := rawjson.WithMember(raw, "name", rawjson.AppendString(nil, name)); err == nil {
			return def
		}
	}
	adv := *typed
	if rename != nil {
		rename(&adv)
	}
	def, _ := json.Marshal(&adv)
	return def
}

// withURI is def with its member named member set to adv when that is not
// the item's own URI (or template).
func withURI(def []byte, member, own, adv string) []byte {
	if adv == own {
		return def
	}
	if out, err := rawjson.WithMember(def, member, rawjson.AppendString(nil, adv)); err == nil {
		return out
	}
	return def
}
