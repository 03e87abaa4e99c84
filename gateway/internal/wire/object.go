package wire

import (
	"encoding/json"

	"github.com/switchboard-mcp/switchboard/services/rawjson"
)

// Object is a JSON object whose values stay raw, so members the gateway
// does not model pass through untouched.
type Object map[string]json.RawMessage

// Set stores v, JSON-encoded, under key.
func (o Object) Set(key string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	o[key] = b
}

// Encode renders the object.
func (o Object) Encode() json.RawMessage {
	b, _ := json.Marshal(map[string]json.RawMessage(o))
	return b
}

// String reads a string member; ok is false when it is absent or not a
// string.
func (o Object) String(key string) (string, bool) {
	raw, ok := o[key]
	if !ok {
		return "", false
	}
	if s, plain := plainString(raw); plain {
		return s, true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// Object reads an object member of an Object that Parse produced (whose
// values are valid JSON); ok is false when it is absent, null or not an
// object.
func (o Object) Object(key string) (Object, bool) {
	raw, ok := o[key]
	if !ok || !IsObjectText(raw) {
		return nil, false
	}
	out, err := parseObject(raw)
	return out, err == nil
}

// plainString returns the contents of a JSON string without escapes, which
// need no decoding (ok false for anything else).
func plainString(raw []byte) (string, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return "", false
	}
	for _, c := range raw[1 : len(raw)-1] {
		if c == '\\' || c == '"' || c < 0x20 {
			return "", false
		}
	}
	return string(raw[1 : len(raw)-1]), true
}

// Cursor reads params.cursor: absent, null and "" all mean the first page;
// anything but a string is invalid.
func (o Object) Cursor() (string, *Error) {
	raw, ok := o["cursor"]
	if !ok || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", InvalidParams("cursor must be a string")
	}
	return s, nil
}

// IsObjectText reports whether raw JSON text (already known to be valid)
// is an object.
func IsObjectText(raw []byte) bool { return rawjson.StartsObject(raw) }

// parseObject splits the text of an object, already known to be valid
// JSON, into an Object whose values are subslices of b.
func parseObject(b []byte) (Object, error) {
	o, err := rawjson.Object(b)
	return Object(o), err
}
