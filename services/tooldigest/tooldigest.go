// Package tooldigest is the one definition of a pinned tool's digest
// (docs/operations.md, "Pinned tool definitions"): the aggregator digests
// each tool its backends list with it, and the indexer digests the
// definitions aggregators send for review with it, refusing one that does
// not hash to the digest it comes with, so that what an operator reviews
// is what the digest they approve stands for.
package tooldigest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/switchboard-mcp/switchboard/services/rawjson"
)

// MaxDefinitionDepth bounds how deeply a definition may nest arrays and
// objects: the gateway's bound for what clients send (go-sdk refuses more
// than 1000 levels); no schema a model can use comes near it. The
// aggregator's catalog refuses a listed definition past it
// (catalog.MaxDefinitionDepth is this bound).
const MaxDefinitionDepth = 512

// reviewedMembers are the members of a tool's definition a reviewer reads
// and a model acts on; a change of any of them changes the digest. Other
// members (icons, vendor extensions, the rest of _meta) do not.
var reviewedMembers = []string{"name", "title", "description", "inputSchema", "outputSchema", "annotations"}

// reviewedMeta are the members of a tool's _meta that are reviewed too:
// its MCP App (SEP-1865), the page a host renders and runs beside the
// tool, and who may call the tool (visibility); a changed UI is a changed
// definition. They are digested under the names "_meta.ui" and
// "_meta.ui/resourceUri", so a tool without them keeps the digest it had
// before they were reviewed.
var reviewedMeta = []string{"ui", "ui/resourceUri"}

// digestDomain prefixes the hashed text, so that a later change of what is
// hashed cannot collide with this one.
const digestDomain = "switchboard tool definition v1\n"

// Digest is the SHA-256, hex, of a tool's reviewed definition: def is the
// tool's JSON object as the backend listed it (nil: tool is encoded
// instead, for lists made in code). The members are taken in a canonical
// encoding: object members sorted by name, no insignificant whitespace,
// strings re-encoded one way, numbers as written, and a member that is
// absent or null left out; so reordering members or reformatting changes
// nothing, and any change of content does.
//
// A definition the aggregator's catalog refuses (catalog.CheckDefinition:
// an object in it, reviewed or not, names a member twice, or it nests
// deeper than MaxDefinitionDepth) has no digest: decoding keeps the last
// of two members where the catalog reads the first, so its digest would
// not be of what clients see.
func Digest(def []byte, tool *mcp.Tool) (string, error) {
	if def == nil {
		var err error
		if def, err = json.Marshal(tool); err != nil {
			return "", err
		}
	}
	if err := rawjson.Unique(def, MaxDefinitionDepth); err != nil {
		return "", fmt.Errorf("tool definition cannot be read one way: %w", err)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(def, &obj); err != nil {
		return "", fmt.Errorf("tool definition is not a JSON object: %w", err)
	}
	reviewed := map[string]any{}
	review := func(from map[string]json.RawMessage, m, as string) error {
		raw, ok := from[m]
		if !ok {
			return nil
		}
		v, err := decode(raw)
		if err != nil {
			return fmt.Errorf("tool definition member %s: %w", as, err)
		}
		if v != nil {
			reviewed[as] = v
		}
		return nil
	}
	for _, m := range reviewedMembers {
		if err := review(obj, m, m); err != nil {
			return "", err
		}
	}
	if raw, ok := obj["_meta"]; ok {
		var meta map[string]json.RawMessage
		// A _meta that is not an object names no UI.
		if json.Unmarshal(raw, &meta) == nil {
			for _, m := range reviewedMeta {
				if err := review(meta, m, "_meta."+m); err != nil {
					return "", err
				}
			}
		}
	}
	var buf bytes.Buffer
	buf.WriteString(digestDomain)
	if err := canonical(&buf, reviewed); err != nil {
		return "", err
	}
	sum := sha256.Sum256(buf.Bytes())
	return hex.EncodeToString(sum[:]), nil
}

// decode reads JSON keeping numbers as written.
func decode(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// canonical writes v (as decode makes it) with sorted object members and
// no whitespace.
func canonical(buf *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(v))
		for k := range v {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeString(buf, k); err != nil {
				return err
			}
			buf.WriteByte(':')
			if err := canonical(buf, v[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := canonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case string:
		return writeString(buf, v)
	case json.Number:
		buf.WriteString(v.String())
	case bool:
		buf.WriteString(fmt.Sprint(v))
	case nil:
		buf.WriteString("null")
	default:
		return fmt.Errorf("unexpected JSON value %T", v)
	}
	return nil
}

func writeString(buf *bytes.Buffer, s string) error {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		return err
	}
	buf.Truncate(buf.Len() - 1) // Encode's newline
	return nil
}
