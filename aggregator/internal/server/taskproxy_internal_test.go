package server

import (
	"testing"
	"time"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/backend"
	"github.com/switchboard-mcp/switchboard/services/config"
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

// A client's TTL is at least minTaskTTL, within the cap: one of a
// millisecond was once refused by the store as malformed, and one of a
// few expired before the client could poll it.
func TestTaskTTLHasAFloor(t *testing.T) {
	r := &taskRunner{cfg: config.Tasks{DefaultTTL: config.Duration(time.Hour), MaxTTL: config.Duration(24 * time.Hour)}}
	for asked, want := range map[int64]time.Duration{1: minTaskTTL, 5: minTaskTTL, 0: time.Hour, 60_000: time.Minute, 1 << 62: 24 * time.Hour} {
		if got := r.ttl(asked); got != want {
			t.Errorf("ttl %d ms became %v, want %v", asked, got, want)
		}
	}
	short := &taskRunner{cfg: config.Tasks{DefaultTTL: config.Duration(time.Second), MaxTTL: config.Duration(5 * time.Second)}}
	if got := short.ttl(1); got != 5*time.Second {
		t.Errorf("with maxTTL 5s, ttl 1 ms became %v", got)
	}
}
