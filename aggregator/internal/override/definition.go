package override

import (
	"encoding/json"
	"slices"

	"github.com/switchboard-mcp/switchboard/services/rawjson"
)

// Definition rewrites a tool's definition, raw (the JSON object as the
// backend listed it), as the override says; every member it does not
// change is kept byte for byte:
//
//   - name, title and description are replaced when the override sets
//     them (the catalog then sets name to the advertised name, as for any
//     tool);
//   - annotations are merged member by member into the tool's own (an
//     absent, null or non-object annotations member is replaced by the
//     override's);
//   - execution.taskSupport is set when the override lets the tool run
//     as a task;
//   - _meta.ui (the tool's MCP App) loses its page and the deprecated
//     _meta["ui/resourceUri"] when the override removes the app, else
//     gets the override's resourceUri and visibility;
//   - inputSchema, when it is an object: a hidden argument leaves its
//     properties and its required list; a defaulted argument leaves
//     required (a call without it gets the default) and its property
//     schema, when it is an object or true, gets "default": the value.
//     A required list left empty is removed.
//
// An argument the schema's top-level properties do not declare is still
// injected on call, but no property is invented for it: the override
// cannot know its type or description. Undeclared lists them, for a
// warning at listing time. A schema that is not an object is left as it is.
//
// raw that is not one valid JSON object gets ErrDefinitionNotObject.
func (t *Tool) Definition(raw []byte) ([]byte, error) {
	if t == nil {
		return raw, nil
	}
	if !rawjson.StartsObject(raw) || !json.Valid(raw) {
		return nil, ErrDefinitionNotObject
	}
	def := raw
	var err error
	set := func(name string, value []byte) {
		if err == nil && value != nil {
			def, err = rawjson.WithMember(def, name, value)
		}
	}
	if t.name != "" {
		set("name", rawjson.AppendString(nil, t.name))
	}
	set("title", t.title)
	set("description", t.description)
	if len(t.annotations) > 0 {
		ann, ok := rawjson.Get(def, "annotations")
		if !ok || !rawjson.StartsObject(ann) {
			ann = []byte("{}")
		}
		for _, a := range t.annotations {
			if ann, err = rawjson.WithMember(ann, a.name, a.value); err != nil {
				return nil, err
			}
		}
		set("annotations", ann)
	}
	if t.taskSupport != "" {
		// Switchboard runs the tool's tasks, so its listing says so
		// (execution.taskSupport, as a task-capable server's would),
		// whatever the backend said.
		exec, ok := rawjson.Get(def, "execution")
		if !ok || !rawjson.StartsObject(exec) {
			exec = []byte("{}")
		}
		if exec, err = rawjson.WithMember(exec, "taskSupport", rawjson.AppendString(nil, t.taskSupport)); err != nil {
			return nil, err
		}
		set("execution", exec)
	}
	if t.ui != nil {
		set("_meta", t.meta(def))
	}
	if len(t.hidden)+len(t.defaults) > 0 {
		if schema, ok := rawjson.Get(def, "inputSchema"); ok && rawjson.StartsObject(schema) {
			rewritten, serr := t.schema(schema)
			if serr != nil {
				return nil, serr
			}
			set("inputSchema", rewritten)
		}
	}
	if err != nil {
		return nil, err
	}
	return def, nil
}

// meta is the tool's _meta as the override's ui makes it; nil when there
// is nothing to change.
func (t *Tool) meta(def []byte) []byte {
	meta, ok := rawjson.Get(def, "_meta")
	if !ok || !rawjson.StartsObject(meta) {
		if t.ui.Remove {
			return nil
		}
		meta = []byte("{}")
	}
	if t.ui.Remove {
		out, err := rawjson.MapMembers(meta, func(m rawjson.Member) ([]byte, bool) {
			return m.Value, string(m.Name) != "ui" && string(m.Name) != "ui/resourceUri"
		})
		if err != nil {
			return nil
		}
		return out
	}
	ui, ok := rawjson.Get(meta, "ui")
	if !ok || !rawjson.StartsObject(ui) {
		ui = []byte("{}")
	}
	var err error
	if t.ui.ResourceURI != "" {
		ui, err = rawjson.WithMember(ui, "resourceUri", rawjson.AppendString(nil, t.ui.ResourceURI))
		if err == nil {
			// The page is the one named now; the deprecated member would
			// name the old one.
			meta, err = rawjson.MapMembers(meta, func(m rawjson.Member) ([]byte, bool) { return m.Value, string(m.Name) != "ui/resourceUri" })
		}
	}
	if err == nil && t.ui.Visibility != nil {
		v, _ := json.Marshal(t.ui.Visibility)
		ui, err = rawjson.WithMember(ui, "visibility", v)
	}
	if err == nil {
		meta, err = rawjson.WithMember(meta, "ui", ui)
	}
	if err != nil {
		return nil
	}
	return meta
}

// schema rewrites an input schema object's properties and required.
func (t *Tool) schema(schema []byte) ([]byte, error) {
	var err error
	if props, ok := rawjson.Get(schema, "properties"); ok && rawjson.StartsObject(props) {
		props, err = rawjson.MapMembers(props, func(m rawjson.Member) ([]byte, bool) {
			i, hidden := t.lookup(m.Name)
			switch {
			case i < 0:
				return m.Value, true
			case hidden:
				return nil, false
			case string(m.Value) == "true":
				// The schema that accepts anything, written as an object
				// so that it can carry the default.
				return append(append([]byte(`{"default":`), t.defaults[i].value...), '}'), true
			case rawjson.StartsObject(m.Value):
				v, werr := rawjson.WithMember(m.Value, "default", t.defaults[i].value)
				if werr != nil {
					return m.Value, true
				}
				return v, true
			default:
				return m.Value, true
			}
		})
		if err != nil {
			return nil, err
		}
		if schema, err = rawjson.WithMember(schema, "properties", props); err != nil {
			return nil, err
		}
	}
	req, ok := rawjson.Get(schema, "required")
	if !ok || !rawjson.Elements(req, func([]byte) bool { return true }) {
		return schema, nil
	}
	req, err = rawjson.FilterElements(req, func(v []byte) bool {
		name, isString := rawjson.StringValue(v)
		if !isString {
			return true
		}
		i, _ := t.lookup([]byte(name))
		return i < 0
	})
	if err != nil {
		return nil, err
	}
	if string(req) == "[]" {
		return rawjson.MapMembers(schema, func(m rawjson.Member) ([]byte, bool) { return m.Value, string(m.Name) != "required" })
	}
	return rawjson.WithMember(schema, "required", req)
}

// Undeclared lists, sorted, the hidden and defaulted arguments that the
// top-level properties of raw's input schema do not declare: they are
// injected on call all the same, and the catalog may warn that the
// override may name an argument the tool does not have.
func (t *Tool) Undeclared(raw []byte) []string {
	if t == nil || len(t.hidden)+len(t.defaults) == 0 {
		return nil
	}
	declared := map[string]bool{}
	if schema, ok := rawjson.Get(raw, "inputSchema"); ok {
		if props, ok := rawjson.Get(schema, "properties"); ok {
			rawjson.Each(props, func(m rawjson.Member) bool { declared[string(m.Name)] = true; return true })
		}
	}
	var out []string
	for _, list := range [][]argument{t.hidden, t.defaults} {
		for _, a := range list {
			if !declared[a.name] {
				out = append(out, a.name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Fields are the members of a (rewritten) definition the catalog serves
// apart from the whole definition: title and description decoded (""
// when absent or not strings), the schemas and annotations as written
// (nil when absent or null).
type Fields struct {
	Title, Description                     string
	InputSchema, OutputSchema, Annotations []byte
}

// FieldsOf reads the Fields of a definition in one pass over its members,
// the first member of each name, as the rest of the catalog reads them
// (the catalog lists no definition that repeats a name:
// catalog.CheckDefinition).
func FieldsOf(def []byte) Fields {
	var f Fields
	var seen [5]bool
	once := func(i int) bool {
		if seen[i] {
			return false
		}
		seen[i] = true
		return true
	}
	notNull := func(v []byte) []byte {
		if string(v) == "null" {
			return nil
		}
		return v
	}
	rawjson.Each(def, func(m rawjson.Member) bool {
		switch string(m.Name) {
		case "title":
			if once(0) {
				f.Title, _ = rawjson.StringValue(m.Value)
			}
		case "description":
			if once(1) {
				f.Description, _ = rawjson.StringValue(m.Value)
			}
		case "inputSchema":
			if once(2) {
				f.InputSchema = notNull(m.Value)
			}
		case "outputSchema":
			if once(3) {
				f.OutputSchema = notNull(m.Value)
			}
		case "annotations":
			if once(4) {
				f.Annotations = notNull(m.Value)
			}
		}
		return true
	})
	return f
}
