package catalog

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/aggregator/internal/override"
	"github.com/switchboard-mcp/switchboard/services/config"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// An override that names no tool its backend lists is logged once, when
// it stops matching, and again only after it matched in between.
func TestOverrideOfNoToolIsLogged(t *testing.T) {
	ovs, err := override.Compile([]config.ToolOverride{
		{Backend: "tickets", Tool: "tickets_search", Arguments: map[string]config.ArgumentOverride{"apiKey": {Hidden: true, Value: "k"}}},
		{Backend: "tickets", Tool: "open", Description: "Open a ticket."},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testkit.LogBuffer{}
	bd := NewSpecBuilder(mustNaming(t, config.ConflictResolution{}), Spec{Overrides: ovs}, slog.New(slog.NewTextHandler(logs, nil)))
	listing := func(names ...string) map[string]*backend.Lists {
		var tools []string
		for _, n := range names {
			tools = append(tools, `{"name":"`+n+`","inputSchema":{"type":"object"}}`)
		}
		return map[string]*backend.Lists{"tickets": listsFromJSON(`{"tools":[` + strings.Join(tools, ",") + `]}`)}
	}
	warnings := func() int {
		return strings.Count(logs.String(), "tool override names a tool its backend does not list")
	}
	bd.Build(listing("search", "open"), nil)
	bd.Build(listing("search", "open"), nil)
	bd.Build(listing("search", "open"), map[string]bool{"tickets": true})
	if n := warnings(); n != 1 || !strings.Contains(logs.String(), "tool=tickets_search") || strings.Contains(logs.String(), "tool=open") {
		t.Fatalf("%d warnings for one override of no tool in three builds:\n%s", n, logs)
	}
	bd.Build(listing("search", "tickets_search"), nil)
	bd.Build(listing("search"), nil)
	if n := warnings(); n != 3 || !strings.Contains(logs.String(), "tool=open") {
		t.Fatalf("%d warnings, want 3 (tickets_search again after it matched, open once gone):\n%s", n, logs)
	}
}
