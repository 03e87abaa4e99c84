package config

import (
	"reflect"
	"strings"

	"go.yaml.in/yaml/v3"
)

// What a value expanded from ${VAR} is: the field it lands in decides,
// never what the variable's text looks like to YAML. A secret of "null",
// "~" or "" must not become an empty string, nor a hidden argument's
// "0123" the integer 83.
//
//   - In a text field (a string, a list or map of strings, a mapping key,
//     or an any-typed value such as a hidden argument's value, an
//     annotation or a default), the expanded value is its text, exactly,
//     whether the reference was quoted or not. Except nothing: an
//     unquoted reference that expands to the empty string is an empty
//     value, as if nothing were written there (an empty string, no entry
//     in a list, no value in an any-typed field); quoted, it is "".
//   - In any other field (a number, a bool, a duration), the expanded value
//     is read as YAML reads a bare value of the file: "8080" is a number,
//     "true" a bool, "30s" a duration, "" or "null" unset. Quotes around
//     the reference do not change that, as they did not before.
//   - A value written with an explicit tag (!!str ${X}, !!int ${X}) keeps
//     it: the way to a number or a bool from a variable in an any-typed
//     field. A value that does not fit its tag is refused by its key.
//   - Tool-override annotations are any-typed but a known schema
//     (annotationKinds): title is text, and the hints (readOnlyHint,
//     destructiveHint, idempotentHint, openWorldHint) are booleans: read
//     as YAML reads a bare value of the file, quoted or not, so that
//     `readOnlyHint: ${RO}` with RO=true is the boolean true, as it was
//     before values were typed by their field (and RO=yes the text "yes",
//     which the validation refuses, as it does `readOnlyHint: yes`).
//     Other keys are text (and refused by the validation).

// quotedStyles are the styles of a scalar written as text: quoted, or a
// literal or folded block.
const quotedStyles = yaml.DoubleQuotedStyle | yaml.SingleQuotedStyle | yaml.LiteralStyle | yaml.FoldedStyle

// textScalars returns the scalar nodes of doc that decode into a text
// field of a Config, keys of mappings included.
func textScalars(doc *yaml.Node) map[*yaml.Node]bool {
	text := map[*yaml.Node]bool{}
	markText(doc, reflect.TypeOf(Config{}), text, 0)
	return text
}

// maxTypeDepth bounds markText's walk of the file: a document nested
// deeper than any field of a Config is refused by the decoding anyway.
const maxTypeDepth = 64

var unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()

// markText walks n, which decodes into a value of type t (nil when not
// known: an unknown key, which the decoding refuses), and marks the
// scalars that decode into text.
func markText(n *yaml.Node, t reflect.Type, text map[*yaml.Node]bool, depth int) {
	if n == nil || t == nil || depth > maxTypeDepth {
		return
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == yaml.DocumentNode {
		for _, c := range n.Content {
			markText(c, t, text, depth+1)
		}
		return
	}
	if t.Kind() == reflect.Interface {
		markAll(n, text, depth)
		return
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		// A type that reads the node itself (Duration) is not text:
		// its node is read as written.
		return
	}
	switch n.Kind {
	case yaml.ScalarNode:
		if t.Kind() == reflect.String {
			text[n] = true
		}
	case yaml.SequenceNode:
		if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
			for _, c := range n.Content {
				markText(c, t.Elem(), text, depth+1)
			}
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			switch t.Kind() {
			case reflect.Map:
				markText(k, t.Key(), text, depth+1)
				markText(v, t.Elem(), text, depth+1)
			case reflect.Struct:
				if k.Kind == yaml.ScalarNode {
					text[k] = true
				}
				if k.Value == "<<" && k.Tag == "!!merge" {
					markText(v, t, text, depth+1) // merged into this mapping
					continue
				}
				if t == toolOverrideType && k.Value == "annotations" {
					markAnnotations(v, text, depth+1)
					continue
				}
				markText(v, fieldType(t, k.Value), text, depth+1)
			}
		}
	}
}

var toolOverrideType = reflect.TypeOf(ToolOverride{})

// markAnnotations marks the text of a tool override's annotations (n,
// any-typed): every key, title and the keys that are not annotations,
// but not the hints, which annotationKinds says are bools: they are read
// as YAML reads a bare value (true, false).
func markAnnotations(n *yaml.Node, text map[*yaml.Node]bool, depth int) {
	if depth > maxTypeDepth {
		return
	}
	if n.Kind != yaml.MappingNode {
		markAll(n, text, depth)
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind == yaml.ScalarNode {
			text[k] = true
		}
		switch {
		case k.Value == "<<" && k.Tag == "!!merge":
			// Merged into this mapping: a mapping, or a list of them.
			if v.Kind == yaml.SequenceNode {
				for _, c := range v.Content {
					markAnnotations(c, text, depth+1)
				}
			} else {
				markAnnotations(v, text, depth+1)
			}
		case k.Kind == yaml.ScalarNode && annotationKinds[k.Value] == "bool" && v.Kind == yaml.ScalarNode:
			// A bool: not text.
		default:
			markAll(v, text, depth+1)
		}
	}
}

// markAll marks every scalar under n as text: n decodes into an any-typed
// value, where YAML would otherwise pick a type from the text.
func markAll(n *yaml.Node, text map[*yaml.Node]bool, depth int) {
	if depth > maxTypeDepth {
		return
	}
	if n.Kind == yaml.ScalarNode {
		text[n] = true
		return
	}
	for _, c := range n.Content {
		markAll(c, text, depth+1)
	}
}

// fieldType is the type of the field of struct t that the YAML key name
// decodes into, as yaml.v3 maps them (the tag's name, else the field's
// name in lower case; ",inline" structs searched too); nil when none.
func fieldType(t reflect.Type, name string) reflect.Type {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("yaml")
		if tag == "-" {
			continue
		}
		key, opts, _ := strings.Cut(tag, ",")
		if strings.Contains(","+opts+",", ",inline,") {
			inner := f.Type
			for inner.Kind() == reflect.Pointer {
				inner = inner.Elem()
			}
			if inner.Kind() == reflect.Struct {
				if ft := fieldType(inner, name); ft != nil {
					return ft
				}
			}
			continue
		}
		if key == "" {
			key = strings.ToLower(f.Name)
		}
		if key == name {
			return f.Type
		}
	}
	return nil
}
