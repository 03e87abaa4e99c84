package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"
)

// Server is one virtual MCP server: a named view over some of the
// backends, served at /mcp/<name> (and /mcp/<name>/raw, /mcp/<name>/optimized)
// in both eras. The plain /mcp stays the whole catalog. Servers share the
// backend connections: declaring one opens nothing new.
type Server struct {
	// Name is the path segment and the Cedar entity Server::"<name>".
	Name string `yaml:"name"`
	// Backends are the backends whose items the server may show (names of
	// aggregator.backends). Required: a server lists what it serves.
	Backends []string `yaml:"backends"`
	// Tools, Resources and Prompts filter the items of those backends by
	// advertised name (tools, prompts; after overrides) or URI and URI
	// template (resources): see ItemFilter.
	Tools     ItemFilter `yaml:"tools"`
	Resources ItemFilter `yaml:"resources"`
	Prompts   ItemFilter `yaml:"prompts"`
	// Optimizer sets what /mcp/<name> serves: the optimizer's find_tool
	// and call_tool (true) or the server's tools (false). Unset: as
	// gateway.optimizer.enabled says for /mcp.
	Optimizer *bool `yaml:"optimizer"`
	// CodeMode offers run_code in the server's optimizer view (true) or
	// not (false). Unset: as aggregator.codeMode.enabled says.
	CodeMode *bool `yaml:"codeMode"`
	// Instructions are the server's instructions to MCP clients; unset,
	// aggregator.instructions.
	Instructions string `yaml:"instructions"`
	// ToolOverrides apply in this server only, on top of
	// aggregator.toolOverrides (field by field: a field set here wins).
	ToolOverrides []ToolOverride `yaml:"toolOverrides"`
	// Audience, when set, makes the server a protected resource of its
	// own: at /mcp/<name> (and its /raw and /optimized) an OIDC token is
	// accepted only when its aud claim contains this value, and a token
	// for gateway.auth.oidc.audience alone is refused. Unset, the server
	// shares gateway.auth.oidc.audience with /mcp. It needs
	// gateway.auth.mode oidc (API keys carry no audience) and must differ
	// from that audience and from every other server's (see
	// ValidateServerAudiences).
	Audience string `yaml:"audience"`
}

// ItemFilter selects items by name. An item is shown when it matches an
// include pattern (or Include is empty) and matches no exclude pattern.
// A pattern is a name, or a glob where * matches any run of characters
// (including "/") and ? any one character.
type ItemFilter struct {
	Include []string `yaml:"include"`
	Exclude []string `yaml:"exclude"`
}

// Allows reports whether the filter shows the item named name.
func (f ItemFilter) Allows(name string) bool {
	if len(f.Include) > 0 && !slices.ContainsFunc(f.Include, func(p string) bool { return GlobMatch(p, name) }) {
		return false
	}
	return !slices.ContainsFunc(f.Exclude, func(p string) bool { return GlobMatch(p, name) })
}

// GlobMatch reports whether name matches pattern, where * matches any run
// of characters and ? exactly one (a character, however many bytes UTF-8
// takes for it); every other character matches itself.
func GlobMatch(pattern, name string) bool {
	// Iterative matching with one backtrack point: linear in practice and
	// never exponential, whatever the pattern. Positions in name move a
	// character at a time.
	next := func(n int) int {
		_, size := utf8.DecodeRuneInString(name[n:])
		return n + size
	}
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		switch {
		case p < len(pattern) && pattern[p] == '?':
			p++
			n = next(n)
		case p < len(pattern) && pattern[p] == name[n]:
			p++
			n++
		case p < len(pattern) && pattern[p] == '*':
			star, mark = p, n
			p++
		case star >= 0:
			p = star + 1
			mark = next(mark)
			n = mark
		default:
			return false
		}
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

// ToolOverride changes how one backend tool is advertised and called.
// Global overrides are aggregator.toolOverrides; a server's own apply in
// that server on top of them.
type ToolOverride struct {
	// Backend and Tool name the tool as the backend lists it.
	Backend string `yaml:"backend"`
	Tool    string `yaml:"tool"`
	// Name replaces the tool's name before the naming rule
	// (conflictResolution) applies, so the advertised name is still a
	// function of the configuration, the backend and this name only: under
	// the prefix strategy, backend "tickets" and name "find" advertise
	// "tickets_find".
	Name string `yaml:"name"`
	// Title and Description replace the tool's own.
	Title       string `yaml:"title"`
	Description string `yaml:"description"`
	// Annotations are merged into the tool's annotations member by member
	// (readOnlyHint, destructiveHint, idempotentHint, openWorldHint, title).
	Annotations map[string]any `yaml:"annotations"`
	// Arguments fix or default the tool's arguments by name.
	Arguments map[string]ArgumentOverride `yaml:"arguments"`
	// Timeout bounds a call of this tool instead of the backend's timeout.
	Timeout Duration `yaml:"timeout"`
	// TaskSupport lets a call of the tool become a task Switchboard runs
	// (aggregator.tasks) for a client that can take one: "optional" (a
	// client that cannot gets the result as usual) or "required" (a client
	// that cannot is refused); "forbidden", the default, never.
	TaskSupport string `yaml:"taskSupport"`
	// TaskAfterInput, for a tool that asks its questions before it works,
	// answers the questions a call asks at once (within 250 ms) as a
	// multi-round-trip round, and makes the call a task only in a round
	// that does not: the questions stay in the client's request, and only
	// the work is a task. Unset, a call becomes a task at once.
	TaskAfterInput bool `yaml:"taskAfterInput"`
	// UI changes the tool's MCP App (_meta.ui); nil leaves it as listed.
	UI *UIOverride `yaml:"ui"`
}

// UIOverride changes a tool's MCP App (SEP-1865, _meta.ui).
type UIOverride struct {
	// Remove drops the app: the tool is listed without _meta.ui (and
	// without the deprecated _meta["ui/resourceUri"]), as a plain tool.
	Remove bool `yaml:"remove"`
	// ResourceURI names another page of the same backend, a ui:// URI
	// as the backend lists it (the catalog advertises it under the
	// backend's name, like any).
	ResourceURI string `yaml:"resourceUri"`
	// Visibility replaces who may use the tool: "model" (the agent) and
	// "app" (the backend's apps).
	Visibility []string `yaml:"visibility"`
}

// Values of ToolOverride.TaskSupport.
const (
	TaskSupportForbidden = "forbidden"
	TaskSupportOptional  = "optional"
	TaskSupportRequired  = "required"
)

// ArgumentOverride fixes or defaults one argument of a tool.
type ArgumentOverride struct {
	// Hidden removes the argument from the advertised input schema and
	// injects Value into every call; a call that sets it is refused
	// (-32602), so a client can never override what the operator fixed.
	Hidden bool `yaml:"hidden"`
	// Value is the fixed value of a hidden argument (any JSON value).
	Value any `yaml:"value"`
	// Default, for an argument that stays visible, is advertised as the
	// schema's default and injected when a call omits the argument.
	Default any `yaml:"default"`
}

// serverNamePattern keeps a server name one safe path segment that is also
// a readable Cedar entity id. "raw" and "optimized" would shadow the
// /mcp/raw and /mcp/optimized routes.
var serverNamePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,62}$`)

// IsServerName reports whether name is a well-formed server name (which
// the configuration may or may not declare).
func IsServerName(name string) bool {
	return serverNamePattern.MatchString(name) && name != "raw" && name != "optimized"
}

// Bounds of what a configuration may declare; they keep a typo (or a
// generated file gone wrong) from costing memory per request.
const (
	MaxServers              = 256
	MaxFilterPatterns       = 256
	MaxToolOverrides        = 4096
	MaxArgumentsPerOverride = 64
)

// backendNames is the set of aggregator.backends' names.
func (c *Config) backendNames() map[string]bool {
	names := make(map[string]bool, len(c.Aggregator.Backends))
	for _, b := range c.Aggregator.Backends {
		names[b.Name] = true
	}
	return names
}

// ValidateServers checks the servers against the backends they name, and
// every tool override (global and per server).
func (c *Config) ValidateServers() error {
	var errs []error
	backends := c.backendNames()
	if len(c.Servers) > MaxServers {
		errs = append(errs, fmt.Errorf("servers: %d declared, at most %d", len(c.Servers), MaxServers))
	}
	seen := map[string]bool{}
	for i, s := range c.Servers {
		at := fmt.Sprintf("servers[%d]", i)
		switch {
		case !serverNamePattern.MatchString(s.Name):
			errs = append(errs, keyErr(at+".name", "must be 1-63 of a-z, 0-9, _ and -, starting with a letter or digit"))
		case s.Name == "raw" || s.Name == "optimized":
			errs = append(errs, keyErr(at+".name", "is reserved (raw and optimized are routes of /mcp)"))
		case seen[s.Name]:
			errs = append(errs, keyErr(at+".name", "is declared twice"))
		}
		seen[s.Name] = true
		if len(s.Backends) == 0 {
			errs = append(errs, fmt.Errorf("%s (%s).backends must name at least one backend", at, s.Name))
		}
		for j, b := range s.Backends {
			if !backends[b] {
				errs = append(errs, keyErr(fmt.Sprintf("%s.backends[%d]", at, j), "is not in aggregator.backends"))
			}
		}
		for kind, f := range map[string]ItemFilter{"tools": s.Tools, "resources": s.Resources, "prompts": s.Prompts} {
			if len(f.Include)+len(f.Exclude) > MaxFilterPatterns {
				errs = append(errs, fmt.Errorf("%s (%s).%s: at most %d patterns", at, s.Name, kind, MaxFilterPatterns))
			}
			for _, p := range slices.Concat(f.Include, f.Exclude) {
				if p == "" {
					errs = append(errs, fmt.Errorf("%s (%s).%s: an empty pattern matches nothing useful", at, s.Name, kind))
				}
			}
		}
		errs = append(errs, validateOverrides(at+".toolOverrides", s.ToolOverrides, func(b string) bool { return slices.Contains(s.Backends, b) })...)
	}
	errs = append(errs, validateOverrides("aggregator.toolOverrides", c.Aggregator.ToolOverrides, func(b string) bool { return backends[b] })...)
	return errors.Join(errs...)
}

var annotationKinds = map[string]string{
	"title": "string", "readOnlyHint": "bool", "destructiveHint": "bool", "idempotentHint": "bool", "openWorldHint": "bool",
}

func validateOverrides(at string, ovs []ToolOverride, known func(string) bool) []error {
	var errs []error
	if len(ovs) > MaxToolOverrides {
		errs = append(errs, fmt.Errorf("%s: %d overrides, at most %d", at, len(ovs), MaxToolOverrides))
	}
	seen := map[string]bool{}
	renamed := map[string]int{} // backend and new name: the override's index
	for i, o := range ovs {
		here := fmt.Sprintf("%s[%d]", at, i)
		if o.Backend == "" || o.Tool == "" {
			errs = append(errs, fmt.Errorf("%s: backend and tool are required", here))
			continue
		}
		if o.Name != "" {
			// Two tools of one backend under one name would both be
			// dropped from the catalog (catalog.build); say so here.
			to := o.Backend + "\x00" + o.Name
			if first, dup := renamed[to]; dup {
				errs = append(errs, keyErr(here+".name", "is also %s[%d]'s name for another tool of the same backend", at, first))
			} else {
				renamed[to] = i
			}
		}
		if !known(o.Backend) {
			errs = append(errs, keyErr(here+".backend", "is not one of the backends in scope"))
		}
		key := o.Backend + "\x00" + o.Tool
		if seen[key] {
			errs = append(errs, keyErr(here, "its backend and tool are overridden twice"))
		}
		seen[key] = true
		if o.Name != "" && strings.TrimSpace(o.Name) != o.Name {
			errs = append(errs, keyErr(here+".name", "has surrounding spaces"))
		}
		for k, v := range o.Annotations {
			want, ok := annotationKinds[k]
			if !ok {
				errs = append(errs, fmt.Errorf("%s: annotation %q is not one of title, readOnlyHint, destructiveHint, idempotentHint, openWorldHint", here, k))
				continue
			}
			if _, isBool := v.(bool); (want == "bool") != isBool {
				errs = append(errs, keyErr(here+".annotations."+k, "must be a %s", want))
			}
		}
		switch o.TaskSupport {
		case "", TaskSupportForbidden, TaskSupportOptional, TaskSupportRequired:
		default:
			errs = append(errs, keyErr(here+".taskSupport", "is not one of forbidden, optional, required"))
		}
		errs = append(errs, o.UI.validate(here+".ui")...)
		if len(o.Arguments) > MaxArgumentsPerOverride {
			errs = append(errs, fmt.Errorf("%s: at most %d arguments", here, MaxArgumentsPerOverride))
		}
		for name, a := range o.Arguments {
			if name == "" {
				errs = append(errs, fmt.Errorf("%s: an argument needs a name", here))
			}
			switch {
			case a.Hidden && a.Default != nil:
				errs = append(errs, fmt.Errorf("%s: argument %q is hidden: give it a value, not a default", here, name))
			case a.Hidden && a.Value == nil:
				errs = append(errs, fmt.Errorf("%s: hidden argument %q needs a value", here, name))
			case !a.Hidden && a.Value != nil:
				errs = append(errs, fmt.Errorf("%s: argument %q has a value but is not hidden: set hidden: true, or use default", here, name))
			case !a.Hidden && a.Default == nil:
				errs = append(errs, fmt.Errorf("%s: argument %q neither hidden nor defaulted", here, name))
			}
			for _, v := range []any{a.Value, a.Default} {
				if v == nil {
					continue
				}
				if _, err := json.Marshal(v); err != nil {
					errs = append(errs, fmt.Errorf("%s: argument %q: a value JSON cannot hold (not a number, an infinity or a key that is not a string)", here, name))
				}
			}
		}
		if o.Timeout < 0 {
			errs = append(errs, fmt.Errorf("%s: timeout must be positive", here))
		}
	}
	return errs
}

// ServerByName returns the server named name.
func (c *Config) ServerByName(name string) (Server, bool) {
	i := slices.IndexFunc(c.Servers, func(s Server) bool { return s.Name == name })
	if i < 0 {
		return Server{}, false
	}
	return c.Servers[i], true
}

func (u *UIOverride) validate(at string) []error {
	if u == nil {
		return nil
	}
	var errs []error
	if u.Remove && (u.ResourceURI != "" || u.Visibility != nil) {
		errs = append(errs, keyErr(at, "removes the app and changes it: set remove alone"))
	}
	if u.ResourceURI != "" && (len(u.ResourceURI) < len("ui://") || !strings.EqualFold(u.ResourceURI[:len("ui://")], "ui://")) {
		errs = append(errs, keyErr(at+".resourceUri", "must be a ui:// URI"))
	}
	if u.Visibility != nil && len(u.Visibility) == 0 {
		errs = append(errs, keyErr(at+".visibility", "is empty: list model, app or both (or remove the app)"))
	}
	for _, v := range u.Visibility {
		if v != "model" && v != "app" {
			errs = append(errs, keyErr(at+".visibility", "lists something other than model and app"))
		}
	}
	return errs
}
