// Package demobackend is a configurable MCP server built on go-sdk, used
// by switchboard-dev and the end-to-end, fault and load tests as the
// backend behind Switchboard.
//
// Every answer names the backend that produced it (tool results carry
// "backend" in their text and structured content, resource and prompt
// texts can use {backend}), so a test can prove where a request was routed.
//
// One URL serves both protocol eras the way the go-sdk allows it: a
// stateless handler for Modern (2026-07-28) requests and a stateful handler
// for Legacy (2025-11-25) sessions, over the same *mcp.Server, so a catalog
// change reaches Modern listeners and Legacy GET streams alike. In
// stateful-only mode Modern requests are refused with -32022 and clients
// fall back to Legacy.
package demobackend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxSleep bounds the sleep behaviour so a bad argument cannot park a
// handler for hours.
const maxSleep = 10 * time.Minute

// Options configures a Backend.
type Options struct {
	// Name is the backend's name, reported in every answer and as the
	// server name.
	Name string
	// StatefulOnly serves Legacy sessions only: Modern requests get -32022
	// and a dual-era client falls back to initialize.
	StatefulOnly bool
	// Log receives the backend's own log lines; nil discards them.
	Log *slog.Logger
}

// Backend is a running demo MCP server. Its catalog may change while it
// serves (see Handler's /admin endpoints).
type Backend struct {
	name         string
	statefulOnly bool
	// extensions are the spec's Extensions as "name":value JSON members,
	// sorted by name; empty when there are none.
	extensions [][2][]byte
	server     *mcp.Server
	log        *slog.Logger
	// tasks are the backend's own tasks (tasks.go); nil unless the spec
	// sets tasks.
	tasks *taskTable

	mu    sync.Mutex
	tools map[string]bool
	// challenges are the refusals of challenge, forbidden and unavailable
	// tools.
	challenges map[string]refusal
	// calls counts the requests that reached a tool or resource handler,
	// by "<method> <name or uri>" (see Calls).
	calls map[string]int

	sleeps SleepStats
}

// SleepStats counts the calls of sleep tools, so a test can see from the
// outside that a call reached the backend and how it ended.
type SleepStats struct {
	// Running are the sleeps in progress.
	Running int `json:"running"`
	// Cancelled are the sleeps whose call was cancelled before they ended.
	Cancelled int `json:"cancelled"`
	// Completed are the sleeps that waited their whole duration.
	Completed int `json:"completed"`
}

// Sleeps returns the counts of sleep calls so far.
func (b *Backend) Sleeps() SleepStats {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sleeps
}

// countSleep applies f to the sleep counts.
func (b *Backend) countSleep(f func(*SleepStats)) {
	b.mu.Lock()
	f(&b.sleeps)
	b.mu.Unlock()
}

// New builds a backend serving spec.
func New(spec Spec, opts Options) (*Backend, error) {
	if opts.Name == "" {
		return nil, errors.New("demo backend: a name is required")
	}
	if err := spec.Validate(); err != nil {
		return nil, fmt.Errorf("demo backend %s: %w", opts.Name, err)
	}
	log := opts.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &Backend{name: opts.Name, statefulOnly: opts.StatefulOnly, log: log, tools: map[string]bool{}, challenges: map[string]refusal{}, calls: map[string]int{}}
	var err error
	if b.extensions, err = encodeExtensions(spec.Extensions); err != nil {
		return nil, fmt.Errorf("demo backend %s: %w", opts.Name, err)
	}
	var setCacheable func(context.Context, mcp.Request, *mcp.Cacheable)
	if c := spec.Cache; c != nil {
		setCacheable = func(_ context.Context, _ mcp.Request, hints *mcp.Cacheable) {
			hints.TTLMs, hints.CacheScope = c.TTLMs, c.Scope
		}
	}
	// Announce every kind even when empty, so a kind added later through
	// /admin is delivered as list_changed; logging with a log tool (a
	// client's aggregator sets a Legacy session's level only then).
	caps := &mcp.ServerCapabilities{
		Tools:     &mcp.ToolCapabilities{ListChanged: true},
		Resources: &mcp.ResourceCapabilities{ListChanged: true, Subscribe: true},
		Prompts:   &mcp.PromptCapabilities{ListChanged: true},
	}
	for _, t := range spec.Tools {
		if t.behaviour() == BehaviourLog {
			caps.Logging = &mcp.LoggingCapabilities{}
		}
	}
	for _, t := range spec.Tools {
		if t.UI != "" {
			caps.AddExtension(uiExtension, nil)
		}
	}
	if spec.Tasks {
		caps.AddExtension(tasksExtension, nil)
		b.tasks = &taskTable{tasks: map[string]*backendTask{}}
	}
	b.server = mcp.NewServer(&mcp.Implementation{Name: opts.Name, Version: "demo"}, &mcp.ServerOptions{
		Instructions:      spec.Instructions,
		CompletionHandler: b.completer(spec.Prompts),
		SetCacheable:      setCacheable,
		Capabilities:      caps,
		// Any URI may be subscribed to; POST /admin/resources/updated
		// announces a change to its subscribers.
		SubscribeHandler:   func(context.Context, *mcp.SubscribeRequest) error { return nil },
		UnsubscribeHandler: func(context.Context, *mcp.UnsubscribeRequest) error { return nil },
		// The SDK warns about every list_changed it cannot push to a
		// short-lived stateless session; that is expected here.
		Logger: slog.New(quietHandler{log.Handler()}),
	})
	for _, t := range spec.Tools {
		b.addTool(t)
	}
	for _, r := range spec.Resources {
		b.addResource(r)
	}
	for _, t := range spec.ResourceTemplates {
		b.addTemplate(t)
	}
	for _, p := range spec.Prompts {
		b.addPrompt(p)
	}
	return b, nil
}

// Name returns the backend's name.
func (b *Backend) Name() string { return b.name }

// ToolNames returns the names of the tools served now, sorted.
func (b *Backend) ToolNames() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	names := make([]string, 0, len(b.tools))
	for n := range b.tools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// AddTool adds or replaces a tool while the backend serves; clients get
// list_changed.
func (b *Backend) AddTool(t ToolSpec) error {
	if err := t.validate(); err != nil {
		return err
	}
	b.addTool(t)
	return nil
}

// RemoveTool removes a tool; it reports whether the tool existed.
func (b *Backend) RemoveTool(name string) bool {
	b.mu.Lock()
	existed := b.tools[name]
	delete(b.tools, name)
	delete(b.challenges, name)
	b.mu.Unlock()
	if existed {
		b.server.RemoveTools(name)
	}
	return existed
}

func (b *Backend) addTool(t ToolSpec) {
	b.mu.Lock()
	b.tools[t.Name] = true
	delete(b.challenges, t.Name)
	switch t.behaviour() {
	case BehaviourChallenge:
		b.challenges[t.Name] = refusal{status: http.StatusUnauthorized, header: "WWW-Authenticate", value: t.Text}
	case BehaviourForbidden:
		b.challenges[t.Name] = refusal{status: http.StatusForbidden, header: "WWW-Authenticate", value: t.Text}
	case BehaviourUnavailable:
		b.challenges[t.Name] = refusal{status: http.StatusServiceUnavailable, header: "Retry-After", value: t.Text}
	}
	b.mu.Unlock()
	tool := &mcp.Tool{
		Name:        t.Name,
		Title:       t.Title,
		Description: t.Description,
		InputSchema: t.inputSchema(),
		Meta:        t.toolMeta(),
	}
	// Both were checked with the spec (validate).
	tool.Annotations, _ = t.annotations()
	if t.OutputSchema != nil {
		tool.OutputSchema = t.OutputSchema
	}
	b.server.AddTool(tool, b.toolHandler(t))
}

// toolHandler runs one tool's behaviour. Every result's text is the JSON
// of its structured content, which always names the backend and the tool.
func (b *Backend) toolHandler(t ToolSpec) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		b.count("tools/call " + t.Name)
		answer := map[string]any{"backend": b.name, "tool": t.Name}
		var args map[string]any
		if raw := req.Params.Arguments; len(raw) > 0 && !bytes.Equal(raw, []byte("null")) {
			if err := json.Unmarshal(raw, &args); err != nil {
				return b.toolError(answer, "arguments must be a JSON object"), nil
			}
		}
		switch t.behaviour() {
		case BehaviourConfirm:
			if res := b.confirmation(t.Name, req.Params.InputResponses, req.Params.RequestState); res != nil {
				return &mcp.CallToolResult{InputRequests: res.requests, RequestState: res.state}, nil
			}
			answer["confirmed"] = true
			fallthrough
		case BehaviourEcho:
			if args == nil {
				args = map[string]any{}
			}
			answer["arguments"] = args
		case BehaviourText:
			answer["text"] = b.expand(t.Text, map[string]string{"tool": t.Name})
		case BehaviourAdd:
			x, okA := args["a"].(float64)
			y, okB := args["b"].(float64)
			if !okA || !okB {
				return b.toolError(answer, "a and b must be numbers"), nil
			}
			answer["sum"] = x + y
		case BehaviourError:
			return b.toolError(answer, b.expand(t.Text, map[string]string{"tool": t.Name})), nil
		case BehaviourForecast:
			city, _ := args["city"].(string)
			if city = strings.TrimSpace(city); city == "" || len(city) > 60 {
				return b.toolError(answer, "city must be a name of 1 to 60 characters"), nil
			}
			forecast(answer, city)
		case BehaviourSleep:
			s, _ := args["duration"].(string)
			d, err := time.ParseDuration(s)
			if err != nil || d < 0 || d > maxSleep {
				return b.toolError(answer, fmt.Sprintf("duration must be a Go duration between 0 and %s, such as 500ms", maxSleep)), nil
			}
			timer := time.NewTimer(d)
			defer timer.Stop()
			b.countSleep(func(s *SleepStats) { s.Running++ })
			b.log.Info("sleep started", "tool", t.Name, "duration", d)
			select {
			case <-timer.C:
				b.countSleep(func(s *SleepStats) { s.Running--; s.Completed++ })
			case <-ctx.Done():
				b.countSleep(func(s *SleepStats) { s.Running--; s.Cancelled++ })
				b.log.Info("sleep cancelled", "tool", t.Name)
				return nil, ctx.Err()
			}
			answer["slept"] = d.String()
		case BehaviourAsk:
			res, ok := req.Params.InputResponses["confirm"].(*mcp.ElicitResult)
			if !ok || res == nil {
				message := t.Text
				if message == "" {
					message = "Confirm {tool}?"
				}
				return &mcp.CallToolResult{InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{
					Message:         b.expand(message, map[string]string{"tool": t.Name}),
					RequestedSchema: map[string]any{"type": "object"},
				}}}, nil
			}
			answer["action"] = res.Action
		case BehaviourWhoAmI:
			answer["authorization"] = ""
			if req.Extra != nil && req.Extra.Header != nil {
				answer["authorization"] = req.Extra.Header.Get("Authorization")
			}
		case BehaviourLog:
			levels := []mcp.LoggingLevel{"debug", "info", "warning"}
			for _, level := range levels {
				if err := req.Session.Log(ctx, &mcp.LoggingMessageParams{Level: level, Logger: t.Name, Data: string(level) + " from " + t.Name}); err != nil {
					return nil, err
				}
			}
			answer["logged"] = levels
		}
		return result(answer, false), nil
	}
}

func (b *Backend) toolError(answer map[string]any, msg string) *mcp.CallToolResult {
	answer["error"] = msg
	return result(answer, true)
}

func result(answer map[string]any, isError bool) *mcp.CallToolResult {
	text, _ := json.Marshal(answer) // a map of JSON-decoded values always marshals
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: string(text)}},
		StructuredContent: answer,
		IsError:           isError,
	}
}

func (b *Backend) addResource(r ResourceSpec) {
	res := &mcp.Resource{URI: r.URI, Name: r.Name, Description: r.Description, MIMEType: r.MIMEType}
	if r.App {
		var page string
		res, page = appResource(r)
		r.MIMEType, r.Text = res.MIMEType, page
	}
	b.server.AddResource(res, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		b.count("resources/read " + r.URI)
		if r.Confirm {
			if res := b.confirmation(r.URI, req.Params.InputResponses, req.Params.RequestState); res != nil {
				return &mcp.ReadResourceResult{InputRequests: res.requests, RequestState: res.state}, nil
			}
		}
		if r.App {
			// The page as it is (no placeholders), with its metadata.
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: r.MIMEType, Text: r.Text, Meta: res.Meta}}}, nil
		}
		return b.contents(req.Params.URI, r.MIMEType, r.Text), nil
	})
}

func (b *Backend) addTemplate(t TemplateSpec) {
	b.server.AddResourceTemplate(&mcp.ResourceTemplate{
		URITemplate: t.URITemplate, Name: t.Name, Description: t.Description, MIMEType: t.MIMEType,
	}, func(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
		return b.contents(req.Params.URI, t.MIMEType, t.Text), nil
	})
}

func (b *Backend) contents(uri, mimeType, text string) *mcp.ReadResourceResult {
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{
		URI: uri, MIMEType: mimeType, Text: b.expand(text, map[string]string{"uri": uri}),
	}}}
}

func (b *Backend) addPrompt(p PromptSpec) {
	args := make([]*mcp.PromptArgument, len(p.Arguments))
	for i, a := range p.Arguments {
		args[i] = &mcp.PromptArgument{Name: a.Name, Description: a.Description, Required: a.Required}
	}
	b.server.AddPrompt(&mcp.Prompt{Name: p.Name, Description: p.Description, Arguments: args},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			for _, a := range p.Arguments {
				if _, ok := req.Params.Arguments[a.Name]; a.Required && !ok {
					return nil, fmt.Errorf("prompt %q: missing required argument %q", p.Name, a.Name)
				}
			}
			return &mcp.GetPromptResult{
				Description: p.Description,
				Messages: []*mcp.PromptMessage{{
					Role:    "user",
					Content: &mcp.TextContent{Text: b.expand(p.Text, req.Params.Arguments)},
				}},
			}, nil
		})
}

// completer offers the configured values of prompt arguments that start
// with what the client typed.
func (b *Backend) completer(prompts []PromptSpec) func(context.Context, *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
	return func(_ context.Context, req *mcp.CompleteRequest) (*mcp.CompleteResult, error) {
		values := []string{}
		if ref := req.Params.Ref; ref != nil && ref.Type == "ref/prompt" {
			for _, p := range prompts {
				for _, a := range p.Arguments {
					if p.Name != ref.Name || a.Name != req.Params.Argument.Name {
						continue
					}
					for _, v := range a.Values {
						if strings.HasPrefix(v, req.Params.Argument.Value) {
							values = append(values, v)
						}
					}
				}
			}
		}
		return &mcp.CompleteResult{Completion: mcp.CompletionResultDetails{Values: values, Total: len(values)}}, nil
	}
}

// expand replaces {backend} and {key} for each key of vars.
func (b *Backend) expand(text string, vars map[string]string) string {
	pairs := []string{"{backend}", b.name}
	for k, v := range vars {
		pairs = append(pairs, "{"+k+"}", v)
	}
	return strings.NewReplacer(pairs...).Replace(text)
}

// quietHandler drops the SDK's records below ERROR: its warnings are about
// transient stateless sessions and would drown the demo's own log.
type quietHandler struct{ slog.Handler }

func (h quietHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelError && h.Handler.Enabled(ctx, l)
}

// WithAttrs keeps the filter on derived handlers.
func (h quietHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return quietHandler{h.Handler.WithAttrs(a)}
}

// WithGroup keeps the filter on derived handlers.
func (h quietHandler) WithGroup(n string) slog.Handler { return quietHandler{h.Handler.WithGroup(n)} }

// ServeStdio serves the backend's MCP server on standard input and output
// (one session, 2025-11-25) until ctx ends or the input closes: a stdio
// server, as the aggregator runs one. The HTTP layer (/admin, tasks,
// extensions) is not served.
func (b *Backend) ServeStdio(ctx context.Context) error {
	return b.server.Run(ctx, &mcp.StdioTransport{})
}
