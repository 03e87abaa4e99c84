package wire

import "encoding/json"

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
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// Present reports whether key is a member with a value other than null.
func (o Object) Present(key string) bool {
	raw, ok := o[key]
	return ok && string(raw) != "null"
}

// Object reads an object member; ok is false when it is absent, null or
// not an object.
func (o Object) Object(key string) (Object, bool) {
	raw, ok := o[key]
	if !ok {
		return nil, false
	}
	var out Object
	if json.Unmarshal(raw, &out) != nil || out == nil {
		return nil, false
	}
	return out, true
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
func IsObjectText(raw []byte) bool {
	for _, c := range raw {
		switch c {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return true
		}
		return false
	}
	return false
}
