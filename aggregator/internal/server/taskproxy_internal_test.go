package server

import (
	"testing"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
)

// TestLegacyTaskToolReadsTheDefinitionAsClientsDo: a 2025-11-25 tool
// declares tasks by execution.taskSupport, read as clients read it:
// member names match case-sensitively, so a declaration under other
// names clients ignore ("Execution", "TaskSupport") is none here either.
func TestLegacyTaskToolReadsTheDefinitionAsClientsDo(t *testing.T) {
	b := backend.New(backend.Config{Name: "legacy", URL: "http://127.0.0.1:1/mcp"}, nil, nil)
	t.Cleanup(b.Close)
	for def, want := range map[string]bool{
		`{"name":"t","execution":{"taskSupport":"optional"}}`:      true,
		`{"name":"t","execution":{"taskSupport":"required"}}`:      true,
		`{"name":"t","execution":{"taskSupport":"forbidden"}}`:     false,
		`{"name":"t","Execution":{"taskSupport":"optional"}}`:      false,
		`{"name":"t","execution":{"TaskSupport":"optional"}}`:      false,
		`{"name":"t","execution":{"task\u0053upport":"optional"}}`: true,
		`{"name":"t"}`: false,
	} {
		if got := legacyTaskTool(b, def); got != want {
			t.Errorf("legacyTaskTool(%s) = %v, want %v", def, got, want)
		}
	}
}
