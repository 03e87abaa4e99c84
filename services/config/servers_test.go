package config

import (
	"strings"
	"testing"
)

func TestGlobMatch(t *testing.T) {
	cases := []struct {
		pattern, name string
		want          bool
	}{
		{"get_*", "get_ticket", true},
		{"get_*", "list_tickets", false},
		{"*", "", true},
		{"", "", true},
		{"", "a", false},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"file:///docs/*", "file:///docs/a/b.md", true},
		{"*_delete*", "tickets_delete_all", true},
		{"*a*a*a*a*b", strings.Repeat("a", 200), false},
		{"tickets_*_read", "tickets_x_read", true},
		{"tickets_*_read", "tickets_x_read_more", false},
		// ? is one character, whatever its length in UTF-8.
		{"eng_?", "eng_é", true},
		{"eng_?", "eng_日", true},
		{"eng_??", "eng_é", false},
		{"*?", "é", true},
		{"*é?", "aéé", true},
		{"d?c/*", "dóc/x", true},
	}
	for _, c := range cases {
		if got := GlobMatch(c.pattern, c.name); got != c.want {
			t.Errorf("GlobMatch(%q, %q) = %v, want %v", c.pattern, c.name, got, c.want)
		}
	}
}

func TestItemFilter(t *testing.T) {
	f := ItemFilter{Include: []string{"tickets_*"}, Exclude: []string{"*_delete"}}
	for name, want := range map[string]bool{"tickets_get": true, "tickets_delete": false, "docs_get": false} {
		if got := f.Allows(name); got != want {
			t.Errorf("Allows(%q) = %v, want %v", name, got, want)
		}
	}
	if !(ItemFilter{}).Allows("anything") {
		t.Error("an empty filter must show everything")
	}
}

func TestValidateServers(t *testing.T) {
	base := func() *Config {
		return &Config{Aggregator: Aggregator{Backends: []Backend{{Name: "tickets"}, {Name: "docs"}}}}
	}
	ok := base()
	ok.Servers = []Server{{Name: "support", Backends: []string{"tickets"},
		ToolOverrides: []ToolOverride{{Backend: "tickets", Tool: "search", Name: "find",
			Annotations: map[string]any{"readOnlyHint": true},
			Arguments:   map[string]ArgumentOverride{"org": {Hidden: true, Value: "acme"}, "limit": {Default: 20}}}}}}
	if err := ok.ValidateServers(); err != nil {
		t.Fatalf("valid servers refused: %v", err)
	}
	bad := []struct {
		name   string
		mutate func(*Config)
		want   string
	}{
		{"reserved name", func(c *Config) { c.Servers = []Server{{Name: "raw", Backends: []string{"docs"}}} }, "reserved"},
		{"bad name", func(c *Config) { c.Servers = []Server{{Name: "Support Team", Backends: []string{"docs"}}} }, "must be"},
		{"twice", func(c *Config) {
			c.Servers = []Server{{Name: "a", Backends: []string{"docs"}}, {Name: "a", Backends: []string{"docs"}}}
		}, "twice"},
		{"no backends", func(c *Config) { c.Servers = []Server{{Name: "a"}} }, "at least one backend"},
		{"unknown backend", func(c *Config) { c.Servers = []Server{{Name: "a", Backends: []string{"nope"}}} }, "servers[0].backends[0]: is not in aggregator.backends"},
		{"override outside server", func(c *Config) {
			c.Servers = []Server{{Name: "a", Backends: []string{"docs"}, ToolOverrides: []ToolOverride{{Backend: "tickets", Tool: "x", Title: "t"}}}}
		}, "not one of the backends in scope"},
		{"hidden without value", func(c *Config) {
			c.Aggregator.ToolOverrides = []ToolOverride{{Backend: "docs", Tool: "x", Arguments: map[string]ArgumentOverride{"a": {Hidden: true}}}}
		}, "needs a value"},
		{"value not hidden", func(c *Config) {
			c.Aggregator.ToolOverrides = []ToolOverride{{Backend: "docs", Tool: "x", Arguments: map[string]ArgumentOverride{"a": {Value: 1}}}}
		}, "not hidden"},
		{"bad annotation", func(c *Config) {
			c.Aggregator.ToolOverrides = []ToolOverride{{Backend: "docs", Tool: "x", Annotations: map[string]any{"readOnlyHint": "yes"}}}
		}, "must be a bool"},
		{"override twice", func(c *Config) {
			c.Aggregator.ToolOverrides = []ToolOverride{{Backend: "docs", Tool: "x", Title: "a"}, {Backend: "docs", Tool: "x", Title: "b"}}
		}, "overridden twice"},
		{"two tools renamed to one name", func(c *Config) {
			c.Aggregator.ToolOverrides = []ToolOverride{{Backend: "docs", Tool: "x", Name: "find"}, {Backend: "docs", Tool: "y", Name: "find"}}
		}, "is also aggregator.toolOverrides[0]'s name for another tool of the same backend"},
	}
	for _, b := range bad {
		c := base()
		b.mutate(c)
		err := c.ValidateServers()
		if err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("%s: got %v, want an error containing %q", b.name, err, b.want)
		}
	}
}
