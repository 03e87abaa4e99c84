package lifecycle

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/switchboard-mcp/switchboard/services/audit"
	"github.com/switchboard-mcp/switchboard/services/testkit"
)

// A reload attempt is one config_reload event: ok, or rejected with the
// reason on one line.
func TestRecordReload(t *testing.T) {
	var out testkit.LogBuffer
	w, err := audit.New(audit.Options{Service: "gateway", Sinks: []audit.Sink{audit.NewJSONLines("test", &out)}})
	if err != nil {
		t.Fatal(err)
	}
	RecordReload(w, "switchboard.yaml", nil, true)
	RecordReload(w, "switchboard.yaml", errors.Join(errors.New("audit.sink (line 3, from ${AUDIT_SINK}): want off, stdout or file"), errors.New("reload.interval (line 1): want at least 100ms")), false)
	RecordReload(nil, "switchboard.yaml", nil, false) // no trail: nothing, no panic
	w.Close()
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d events, want 2:\n%s", len(lines), out.String())
	}
	var ok, rejected audit.Event
	if json.Unmarshal([]byte(lines[0]), &ok) != nil || json.Unmarshal([]byte(lines[1]), &rejected) != nil {
		t.Fatalf("not JSON lines:\n%s", out.String())
	}
	if ok.Kind != audit.KindConfigReload || ok.Outcome != audit.OutcomeOK || ok.Detail != "SIGHUP" || ok.Resource != "switchboard.yaml" || ok.Service != "gateway" {
		t.Errorf("in force: %+v", ok)
	}
	if rejected.Outcome != audit.OutcomeRejected || rejected.Detail != `audit.sink (line 3, from ${AUDIT_SINK}): want off, stdout or file; reload.interval (line 1): want at least 100ms` {
		t.Errorf("rejected: %+v", rejected)
	}
}
