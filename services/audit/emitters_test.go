package audit

import (
	"maps"
	"slices"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/config"
)

// The table of who records what knows exactly the services a credential
// may be bound to (serviceAuth.credentials[].auditService), and every
// kind is recorded by some service.
func TestEmittersTable(t *testing.T) {
	services := slices.Sorted(maps.Keys(emitters))
	if got := services; !slices.Equal(got, config.AuditServices) {
		t.Fatalf("the table's services %v, config.AuditServices %v", got, config.AuditServices)
	}
	for _, k := range []Kind{KindToolCall, KindResourceRead, KindPromptGet, KindResourceSubscribe, KindCompletion, KindFindTool,
		KindSessionStart, KindSessionEnd, KindQuarantine, KindConfigReload, KindTaskGet, KindTaskUpdate, KindTaskCancel, KindTaskList, KindTaskEnd, KindCodeRun} {
		var by []string
		for _, s := range services {
			if Emits(s, k) {
				by = append(by, s)
			}
		}
		if len(by) == 0 {
			t.Errorf("no service records %s", k)
		}
	}
	for _, tc := range []struct {
		service string
		kind    Kind
		want    bool
	}{
		{"gateway", KindSessionStart, true},
		{"gateway", KindToolCall, true},
		{"gateway", KindQuarantine, false},
		{"aggregator", KindQuarantine, true},
		{"aggregator", KindSessionStart, false},
		{"aggregator", KindFindTool, false},
		{"indexer", KindFindTool, true},
		{"indexer", KindToolCall, false},
		{"console", KindConfigReload, false},
		{"gateway", "made_up", false},
	} {
		if got := Emits(tc.service, tc.kind); got != tc.want {
			t.Errorf("Emits(%s, %s) = %v, want %v", tc.service, tc.kind, got, tc.want)
		}
	}
}
