package demobackend

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"go.yaml.in/yaml/v3"
)

// Behaviours a demo tool can have.
const (
	// BehaviourEcho returns the call's arguments and the backend's name.
	BehaviourEcho = "echo"
	// BehaviourText returns the tool's fixed text.
	BehaviourText = "text"
	// BehaviourAdd returns the sum of the numbers a and b.
	BehaviourAdd = "add"
	// BehaviourError returns a tool result with isError and the tool's text.
	BehaviourError = "error"
	// BehaviourSleep waits for the duration argument (a Go duration such as
	// "500ms"), or until the call is cancelled.
	BehaviourSleep = "sleep"
	// BehaviourConfirm asks the client to confirm first (an input_required
	// result with an elicitation and a requestState, see confirm.go), then
	// answers like echo with "confirmed": true.
	BehaviourConfirm = "confirm"
	// BehaviourAsk asks the client by elicitation, with the tool's text as
	// the message (an input_required result for a Modern client, a real
	// elicitation/create on a Legacy session), and returns the action it
	// answered.
	BehaviourAsk = "ask"
	// BehaviourLog sends one log message (notifications/message, logger
	// the tool's name) at each of debug, info and warning, of which the
	// client gets those at or above the level it set, and returns the
	// levels.
	BehaviourLog = "log"
	// BehaviourWhoAmI returns the Authorization header the call arrived
	// with (as "authorization"; "" for none): for tests of per-user
	// credentials. A test backend only: it echoes a credential.
	BehaviourWhoAmI = "whoami"
	// BehaviourChallenge refuses every call with HTTP 401 and the tool's
	// text as its WWW-Authenticate challenge, none for an empty text
	// (challenge.go).
	BehaviourChallenge = "challenge"
	// BehaviourForbidden refuses every call with HTTP 403 and the tool's
	// text as its WWW-Authenticate challenge (an insufficient_scope one,
	// say), none for an empty text (challenge.go).
	BehaviourForbidden = "forbidden"
	// BehaviourUnavailable refuses every call with HTTP 503 and the
	// tool's text as its Retry-After, none for an empty text, as a server
	// in maintenance does (challenge.go).
	BehaviourUnavailable = "unavailable"
	// BehaviourForecast returns five days of made-up highs and lows for
	// the city argument, the same for the same city: data for the demo's
	// MCP App (apps.go).
	BehaviourForecast = "forecast"
)

var behaviours = []string{BehaviourEcho, BehaviourText, BehaviourAdd, BehaviourError, BehaviourSleep, BehaviourConfirm, BehaviourAsk, BehaviourLog, BehaviourWhoAmI, BehaviourChallenge, BehaviourForbidden, BehaviourUnavailable, BehaviourForecast}

// Spec is what a demo backend serves. It is read from YAML (--config) and
// the tool entries are also the body of POST /admin/tools (JSON).
type Spec struct {
	// Instructions are returned to clients on discover and initialize.
	Instructions      string         `yaml:"instructions" json:"instructions,omitempty"`
	Tools             []ToolSpec     `yaml:"tools" json:"tools,omitempty"`
	Resources         []ResourceSpec `yaml:"resources" json:"resources,omitempty"`
	ResourceTemplates []TemplateSpec `yaml:"resourceTemplates" json:"resourceTemplates,omitempty"`
	Prompts           []PromptSpec   `yaml:"prompts" json:"prompts,omitempty"`
	// Extensions are members the backend adds to every item it lists
	// (tools, resources, resource templates, prompts) and to every tool
	// result, beyond what go-sdk models: a stand-in for vendor fields and
	// newer revisions' members, to show they pass through a gateway.
	Extensions map[string]any `yaml:"extensions" json:"extensions,omitempty"`
	// Cache, when set, gives every cacheable result (server/discover, the
	// lists, resources/read) these cache hints instead of go-sdk's
	// defaults (ttlMs 0, cacheScope "public").
	Cache *CacheSpec `yaml:"cache" json:"cache,omitempty"`
	// Tasks gives the backend tasks of its own (tasks.go): a Modern
	// tools/call from a client that declares io.modelcontextprotocol/tasks
	// becomes a task the backend runs.
	Tasks bool `yaml:"tasks" json:"tasks,omitempty"`
}

// CacheSpec are the cache hints of a backend's cacheable results. Any
// value is sent as it is, negative ttlMs and unknown scopes included, so
// tests can see what a client makes of them.
type CacheSpec struct {
	TTLMs int    `yaml:"ttlMs" json:"ttlMs"`
	Scope string `yaml:"scope" json:"scope,omitempty"`
}

// ToolSpec is one tool. Text may use the placeholders {backend} and {tool}.
type ToolSpec struct {
	Name        string `yaml:"name" json:"name"`
	Title       string `yaml:"title" json:"title,omitempty"`
	Description string `yaml:"description" json:"description,omitempty"`
	// Annotations are the tool's MCP annotations (readOnlyHint and the
	// others, by their MCP names); OutputSchema is the JSON Schema the
	// tool declares for its structured result (only declared: the
	// behaviours' results are not checked against it).
	Annotations  map[string]any `yaml:"annotations" json:"annotations,omitempty"`
	OutputSchema map[string]any `yaml:"outputSchema" json:"outputSchema,omitempty"`
	// Behaviour is one of echo, text, add, error, sleep, confirm, ask, log (default
	// echo).
	Behaviour string `yaml:"behaviour" json:"behaviour,omitempty"`
	// Text is the answer of text tools and the message of error tools.
	Text string `yaml:"text" json:"text,omitempty"`
	// InputSchema replaces the behaviour's default schema; it must be a JSON
	// Schema object with "type": "object".
	InputSchema map[string]any `yaml:"inputSchema" json:"inputSchema,omitempty"`
	// UI names the tool's MCP App page, a ui:// resource (apps.go), and
	// Visibility who may call it (model, app); both go in _meta.ui.
	UI         string   `yaml:"ui" json:"ui,omitempty"`
	Visibility []string `yaml:"visibility" json:"visibility,omitempty"`
}

// ResourceSpec is one fixed resource. Text may use {backend} and {uri}.
type ResourceSpec struct {
	URI         string `yaml:"uri" json:"uri"`
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description" json:"description,omitempty"`
	MIMEType    string `yaml:"mimeType" json:"mimeType,omitempty"`
	Text        string `yaml:"text" json:"text"`
	// Confirm makes a read ask the client to confirm first, as the confirm
	// tool behaviour does.
	Confirm bool `yaml:"confirm" json:"confirm,omitempty"`
	// App serves the demo's MCP App page (apps.go) instead of Text; the
	// URI must be a ui:// one.
	App bool `yaml:"app" json:"app,omitempty"`
}

// TemplateSpec is one resource template (RFC 6570). Text may use
// {backend} and {uri}, the URI that was read.
type TemplateSpec struct {
	URITemplate string `yaml:"uriTemplate" json:"uriTemplate"`
	Name        string `yaml:"name" json:"name"`
	Description string `yaml:"description" json:"description,omitempty"`
	MIMEType    string `yaml:"mimeType" json:"mimeType,omitempty"`
	Text        string `yaml:"text" json:"text"`
}

// PromptSpec is one prompt with a single user message. Text may use
// {backend} and {<argument name>} for each argument.
type PromptSpec struct {
	Name        string          `yaml:"name" json:"name"`
	Description string          `yaml:"description" json:"description,omitempty"`
	Arguments   []PromptArgSpec `yaml:"arguments" json:"arguments,omitempty"`
	Text        string          `yaml:"text" json:"text"`
}

// PromptArgSpec is one prompt argument. Values, when set, are offered by
// completion/complete.
type PromptArgSpec struct {
	Name        string   `yaml:"name" json:"name"`
	Description string   `yaml:"description" json:"description,omitempty"`
	Required    bool     `yaml:"required" json:"required,omitempty"`
	Values      []string `yaml:"values" json:"values,omitempty"`
}

// LoadSpec reads a YAML spec file. Unknown keys are errors, so a typo never
// silently drops a tool's behaviour.
func LoadSpec(path string) (Spec, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return Spec{}, fmt.Errorf("read demo backend spec: %w", err)
	}
	var s Spec
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil && !errors.Is(err, io.EOF) {
		return Spec{}, fmt.Errorf("parse demo backend spec %s: %w", path, err)
	}
	return s, nil
}

// ToolsFromDescriptions reads a JSON object {"tool name": "description"}
// and makes one echo tool per entry, sorted by name. It loads real-world
// tool corpora for search-quality measurements.
func ToolsFromDescriptions(path string) ([]ToolSpec, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read tool descriptions: %w", err)
	}
	var byName map[string]string
	if err := json.Unmarshal(raw, &byName); err != nil {
		return nil, fmt.Errorf("parse tool descriptions %s: want a JSON object of name to description: %w", path, err)
	}
	tools := make([]ToolSpec, 0, len(byName))
	for name, desc := range byName {
		tools = append(tools, ToolSpec{Name: name, Description: desc, Behaviour: BehaviourEcho})
	}
	sort.Slice(tools, func(i, j int) bool { return tools[i].Name < tools[j].Name })
	return tools, nil
}

// SyntheticTools makes n echo tools named tool_0000, tool_0001, ... for
// load tests.
func SyntheticTools(n int) []ToolSpec {
	tools := make([]ToolSpec, n)
	for i := range tools {
		tools[i] = ToolSpec{
			Name:        fmt.Sprintf("tool_%04d", i),
			Description: fmt.Sprintf("Synthetic echo tool number %d.", i),
			Behaviour:   BehaviourEcho,
		}
	}
	return tools
}

// DefaultSpec is served when no tools are configured at all: one tool of
// each behaviour, so a bare demo backend is useful by itself.
func DefaultSpec() Spec {
	return Spec{Tools: []ToolSpec{
		{Name: "echo", Description: "Echo the arguments back, with the backend's name.", Behaviour: BehaviourEcho},
		{Name: "add", Description: "Add two numbers a and b.", Behaviour: BehaviourAdd},
		{Name: "hello", Description: "Say hello.", Behaviour: BehaviourText, Text: "Hello from {backend}."},
		{Name: "fail", Description: "Always fail with a tool error.", Behaviour: BehaviourError, Text: "{tool} failed on purpose"},
		{Name: "sleep", Description: "Wait for a duration, e.g. 500ms.", Behaviour: BehaviourSleep},
	}}
}

// Validate checks the whole spec: names present and unique per kind,
// behaviours known, schemas well-formed.
func (s Spec) Validate() error {
	var errs []error
	seen := map[string]bool{}
	for _, t := range s.Tools {
		if err := t.validate(); err != nil {
			errs = append(errs, err)
		}
		if seen[t.Name] {
			errs = append(errs, fmt.Errorf("tool %q is defined twice", t.Name))
		}
		seen[t.Name] = true
	}
	uris := map[string]bool{}
	for _, r := range s.Resources {
		if r.URI == "" || r.Name == "" {
			errs = append(errs, fmt.Errorf("resource %q: uri and name are required", r.URI))
		}
		if uris[r.URI] {
			errs = append(errs, fmt.Errorf("resource %q is defined twice", r.URI))
		}
		if r.App && !strings.HasPrefix(r.URI, "ui://") {
			errs = append(errs, fmt.Errorf("resource %q: an app's page needs a ui:// URI", r.URI))
		}
		uris[r.URI] = true
	}
	for _, t := range s.ResourceTemplates {
		if t.URITemplate == "" || t.Name == "" || !strings.Contains(t.URITemplate, "{") {
			errs = append(errs, fmt.Errorf("resource template %q: a uriTemplate with at least one {variable} and a name are required", t.URITemplate))
		}
	}
	prompts := map[string]bool{}
	for _, p := range s.Prompts {
		if p.Name == "" {
			errs = append(errs, errors.New("a prompt without a name"))
		}
		if prompts[p.Name] {
			errs = append(errs, fmt.Errorf("prompt %q is defined twice", p.Name))
		}
		prompts[p.Name] = true
	}
	return errors.Join(errs...)
}

func (t ToolSpec) validate() error {
	if t.Name == "" {
		return errors.New("a tool without a name")
	}
	b := t.behaviour()
	known := false
	for _, k := range behaviours {
		known = known || b == k
	}
	if !known {
		return fmt.Errorf("tool %q: unknown behaviour %q (want one of %s)", t.Name, b, strings.Join(behaviours, ", "))
	}
	if t.InputSchema != nil && t.InputSchema["type"] != "object" {
		return fmt.Errorf("tool %q: inputSchema must have \"type\": \"object\"", t.Name)
	}
	if t.OutputSchema != nil && t.OutputSchema["type"] != "object" {
		return fmt.Errorf("tool %q: outputSchema must have \"type\": \"object\"", t.Name)
	}
	if _, err := t.annotations(); err != nil {
		return fmt.Errorf("tool %q: annotations: %w", t.Name, err)
	}
	if t.UI != "" && !strings.HasPrefix(t.UI, "ui://") {
		return fmt.Errorf("tool %q: ui must be a ui:// URI", t.Name)
	}
	for _, v := range t.Visibility {
		if v != "model" && v != "app" {
			return fmt.Errorf("tool %q: visibility lists %q, not model or app", t.Name, v)
		}
	}
	return nil
}

// annotations is the tool's Annotations as MCP's type; nil for none.
func (t ToolSpec) annotations() (*mcp.ToolAnnotations, error) {
	if t.Annotations == nil {
		return nil, nil
	}
	raw, err := json.Marshal(t.Annotations)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var a mcp.ToolAnnotations
	if err := dec.Decode(&a); err != nil {
		return nil, err
	}
	return &a, nil
}

func (t ToolSpec) behaviour() string {
	if t.Behaviour == "" {
		return BehaviourEcho
	}
	return t.Behaviour
}

// inputSchema is the tool's schema: the configured one, or the default of
// its behaviour.
func (t ToolSpec) inputSchema() map[string]any {
	if t.InputSchema != nil {
		return t.InputSchema
	}
	switch t.behaviour() {
	case BehaviourAdd:
		return map[string]any{
			"type": "object",
			"properties": map[string]any{
				"a": map[string]any{"type": "number", "description": "first addend"},
				"b": map[string]any{"type": "number", "description": "second addend"},
			},
			"required": []any{"a", "b"},
		}
	case BehaviourForecast:
		return map[string]any{
			"type":       "object",
			"properties": map[string]any{"city": map[string]any{"type": "string", "description": "the city", "maxLength": 60}},
			"required":   []any{"city"},
		}
	case BehaviourSleep:
		return map[string]any{
			"type": "object",
			"properties": map[string]any{
				"duration": map[string]any{"type": "string", "description": "how long to wait, as a Go duration such as 500ms or 2s"},
			},
			"required": []any{"duration"},
		}
	default:
		return map[string]any{"type": "object"}
	}
}
