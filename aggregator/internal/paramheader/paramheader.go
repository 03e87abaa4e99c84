// Package paramheader implements the x-mcp-header rules of the MCP
// 2026-07-28 Streamable HTTP binding, as go-sdk v1.8.0's server applies
// them: a property of a tool's inputSchema (at any depth of nested
// "properties") annotated "x-mcp-header": "Name" is mirrored into an
// Mcp-Param-Name header. The aggregator uses it twice per tools/call: to
// check the headers a Modern client sent (Check), and to compute the
// headers it sends to a Modern backend (Headers). Bindings are extracted
// once per tool when the catalog snapshot is built (Extract).
package paramheader

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	sdkjson "github.com/segmentio/encoding/json"
)

// Prefix starts every parameter header.
const Prefix = "Mcp-Param-"

// Binding ties one (possibly nested) argument to its header.
type Binding struct {
	// Path is the property names from the arguments object down to the
	// argument.
	Path []string
	// Header is the annotation's value: the header name without Prefix, as
	// the tool spells it.
	Header string
	// Key is Header lower-cased: how the gateway passes header names.
	Key string
}

// FullName is the header's name as sent: Prefix + Header.
func (b Binding) FullName() string { return Prefix + b.Header }

// schemaProperty is what the rules read of a schema property: the members
// go-sdk v1.8.0 reads, decoded as it decodes them (case-sensitive names; a
// schema whose "type" is not a string has no bindings at all).
type schemaProperty struct {
	Type       string                    `json:"type"`
	XMCPHeader json.RawMessage           `json:"x-mcp-header"`
	Properties map[string]schemaProperty `json:"properties"`
}

// properties decodes the top-level properties of an inputSchema as go-sdk
// does; ok is false when it does not decode.
func properties(inputSchema []byte) (map[string]schemaProperty, bool) {
	var root schemaProperty
	dec := sdkjson.NewDecoder(bytes.NewReader(inputSchema))
	dec.DontMatchCaseInsensitiveStructFields()
	if dec.Decode(&root) != nil {
		return nil, false
	}
	return root.Properties, true
}

// Extract returns the bindings of an inputSchema (JSON text), or nil when
// it has none or is not an object schema. The order follows the property
// names, sorted at every level, so it is deterministic. Annotations that
// are not non-empty strings bind nothing (go-sdk ignores them too).
func Extract(inputSchema []byte) []Binding {
	if len(inputSchema) == 0 || !bytes.Contains(inputSchema, []byte("x-mcp-header")) {
		return nil
	}
	props, ok := properties(inputSchema)
	if !ok {
		return nil
	}
	return collect(props, nil, nil)
}

// Validate applies go-sdk v1.8.0's client rule for listed tools: every
// x-mcp-header annotation, at any depth, is on a string, integer or
// boolean property, is a non-empty HTTP token, and is unique ignoring
// case. go-sdk drops a tool that breaks it from tools/list, and so does
// the aggregator. A schema that does not decode binds nothing and passes,
// as in go-sdk.
func Validate(inputSchema []byte) error {
	if len(inputSchema) == 0 || !bytes.Contains(inputSchema, []byte("x-mcp-header")) {
		return nil
	}
	props, ok := properties(inputSchema)
	if !ok {
		return nil
	}
	return validate(props, "", map[string]bool{})
}

func validate(props map[string]schemaProperty, prefix string, seen map[string]bool) error {
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		prop, path := props[name], name
		if prefix != "" {
			path = prefix + "." + name
		}
		if prop.XMCPHeader != nil {
			if prop.Type != "string" && prop.Type != "integer" && prop.Type != "boolean" {
				return fmt.Errorf("property %q: x-mcp-header on a %q property (only string, integer and boolean)", path, prop.Type)
			}
			var header string
			if json.Unmarshal(prop.XMCPHeader, &header) != nil || header == "" {
				return fmt.Errorf("property %q: x-mcp-header is not a non-empty string", path)
			}
			if !isToken(header) {
				return fmt.Errorf("property %q: x-mcp-header %q is not an HTTP token", path, header)
			}
			lower := strings.ToLower(header)
			if seen[lower] {
				return fmt.Errorf("property %q: x-mcp-header %q repeats (ignoring case)", path, header)
			}
			seen[lower] = true
		}
		if len(prop.Properties) > 0 {
			if err := validate(prop.Properties, path, seen); err != nil {
				return err
			}
		}
	}
	return nil
}

// isToken reports whether s is an RFC 9110 token (1*tchar).
func isToken(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return s != ""
}

func collect(props map[string]schemaProperty, prefix []string, out []Binding) []Binding {
	names := make([]string, 0, len(props))
	for n := range props {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, name := range names {
		prop := props[name]
		path := append(append([]string(nil), prefix...), name)
		var header string
		if json.Unmarshal(prop.XMCPHeader, &header) == nil && header != "" {
			out = append(out, Binding{Path: path, Header: header, Key: strings.ToLower(header)})
		}
		if len(prop.Properties) > 0 {
			out = collect(prop.Properties, path, out)
		}
	}
	return out
}

// MismatchError says which header does not mirror its argument.
type MismatchError struct {
	// Header is the full header name (Prefix + annotation).
	Header string
	// Reason says how, for logs and the client's message.
	Reason string
}

func (e *MismatchError) Error() string { return "header mismatch: " + e.Header + ": " + e.Reason }

// Check validates the parameter headers a Modern client sent (keyed by
// lower-cased name without Prefix) against the call's arguments (a JSON
// object's text, or empty): every bound argument that is present and not
// null must be mirrored by its header with an equal value (after decoding
// the =?base64?...?= form; integers compare as numbers), and an absent or
// null one must not be. Headers that no binding names are not checked
// (intermediaries forward unknown ones). Only bindings are walked, so a
// tool without any costs nothing.
func Check(bindings []Binding, arguments []byte, headers map[string]string) error {
	if len(bindings) == 0 {
		return nil
	}
	for _, b := range bindings {
		sent, hasHeader := headers[b.Key]
		raw, present := lookup(arguments, b.Path)
		if !present || string(raw) == "null" {
			if hasHeader && sent != "" {
				return &MismatchError{Header: b.FullName(), Reason: "sent for an absent or null argument " + strings.Join(b.Path, ".")}
			}
			continue
		}
		if !hasHeader || sent == "" {
			return &MismatchError{Header: b.FullName(), Reason: "missing for argument " + strings.Join(b.Path, ".")}
		}
		decoded, ok := DecodeValue(sent)
		if !ok {
			return &MismatchError{Header: b.FullName(), Reason: "invalid base64 encoding"}
		}
		body, ok := primitive(raw)
		if !ok {
			return &MismatchError{Header: b.FullName(), Reason: "argument " + strings.Join(b.Path, ".") + " is not a string, integer or boolean"}
		}
		if !equal(decoded, body) {
			return &MismatchError{Header: b.FullName(), Reason: "value does not match argument " + strings.Join(b.Path, ".")}
		}
	}
	return nil
}

// Headers computes the parameter headers for a call's arguments, as a
// client must send them: full header names, values encoded. Arguments that
// are absent, null or not primitive get no header.
func Headers(bindings []Binding, arguments []byte) map[string]string {
	var out map[string]string
	for _, b := range bindings {
		raw, present := lookup(arguments, b.Path)
		if !present || string(raw) == "null" {
			continue
		}
		v, ok := primitive(raw)
		if !ok {
			continue
		}
		if out == nil {
			out = make(map[string]string, len(bindings))
		}
		out[b.FullName()] = EncodeValue(text(v))
	}
	return out
}

// lookup finds the argument at path in the arguments object.
func lookup(arguments []byte, path []string) (json.RawMessage, bool) {
	cur := json.RawMessage(arguments)
	for _, part := range path {
		var obj map[string]json.RawMessage
		if len(cur) == 0 || json.Unmarshal(cur, &obj) != nil {
			return nil, false
		}
		v, ok := obj[part]
		if !ok {
			return nil, false
		}
		cur = v
	}
	return cur, true
}

// JavaScript's safe integers: the only numbers a header may mirror.
const maxSafeInteger = 1<<53 - 1

// primitive decodes a header-able argument: a string, a boolean, or an
// integer within the safe range (a fraction, or a larger integer, is a
// "number", which the rules do not allow). It returns a string, bool or
// int64.
func primitive(raw json.RawMessage) (any, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil, false
	}
	switch v := v.(type) {
	case string, bool:
		return v, true
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) || v != math.Trunc(v) || v < -maxSafeInteger || v > maxSafeInteger {
			return nil, false
		}
		return int64(v), true
	}
	return nil, false
}

func text(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case int64:
		return strconv.FormatInt(v, 10)
	}
	return fmt.Sprint(v)
}

// equal compares a decoded header with the argument: integers as numbers
// ("42" and "42.0" both match 42), strings and booleans as text.
func equal(header string, body any) bool {
	if n, ok := body.(int64); ok {
		f, err := strconv.ParseFloat(header, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) || f < -maxSafeInteger || f > maxSafeInteger {
			return false
		}
		return int64(f) == n
	}
	return header == text(body)
}

const (
	base64Prefix = "=?base64?"
	base64Suffix = "?="
)

// EncodeValue encodes a header value: as it is when it is plain visible
// ASCII, else (non-ASCII, control characters, leading or trailing space,
// or text that looks like the encoded form itself) as
// =?base64?<base64 of its UTF-8>?=.
func EncodeValue(s string) string {
	if needsBase64(s) {
		return base64Prefix + base64.StdEncoding.EncodeToString([]byte(s)) + base64Suffix
	}
	return s
}

func needsBase64(s string) bool {
	if s == "" {
		return false
	}
	if s[0] == ' ' || s[0] == '\t' || s[len(s)-1] == ' ' || s[len(s)-1] == '\t' {
		return true
	}
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return true
		}
	}
	return strings.HasPrefix(s, base64Prefix) && strings.HasSuffix(s, base64Suffix)
}

// DecodeValue undoes EncodeValue; a value not in the encoded form is
// returned as it is. It reports false for the encoded form with invalid
// base64.
func DecodeValue(v string) (string, bool) {
	if inner, ok := strings.CutPrefix(v, base64Prefix); ok {
		if inner, ok = strings.CutSuffix(inner, base64Suffix); ok {
			b, err := base64.StdEncoding.DecodeString(inner)
			if err != nil {
				return "", false
			}
			return string(b), true
		}
	}
	return v, true
}
