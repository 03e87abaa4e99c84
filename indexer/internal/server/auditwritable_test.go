package server

import (
	"testing"

	"github.com/switchboard-mcp/switchboard/services/audit"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// TestBoundWriterNamesItsOwnPrincipal: a credential that may not assert
// principals writes events of its own principal, its groups named in any
// order (as svcauth.Resolve compares them): its events once were refused
// when they listed the groups otherwise than its configuration did.
// Another principal's, and the anonymous principal's, are refused.
func TestBoundWriterNamesItsOwnPrincipal(t *testing.T) {
	caller := svcauth.Caller{Name: "batch", AuditService: "aggregator",
		Bound: &commonv1.Principal{Subject: "batch-job", Groups: []string{"ops", "batch"}}}
	resolved, err := svcauth.Resolve(caller, nil)
	if err != nil {
		t.Fatal(err)
	}
	event := func(subject string, groups ...string) audit.Event {
		return audit.Event{Service: "aggregator", Kind: audit.KindToolCall, Subject: subject, Groups: groups}
	}
	for _, c := range []struct {
		name string
		e    audit.Event
		ok   bool
	}{
		{"its principal as Resolve gives it", event(resolved.GetSubject(), resolved.GetGroups()...), true},
		{"its groups as configured", event("batch-job", "ops", "batch"), true},
		{"its groups twice over", event("batch-job", "ops", "batch", "ops"), true},
		{"a group short", event("batch-job", "ops"), false},
		{"another subject", event("alice", "ops", "batch"), false},
		{"the anonymous principal", event(""), false},
	} {
		if r := auditWritable(caller, []audit.Event{c.e}); (r == nil) != c.ok {
			t.Errorf("%s: refusal %v, want allowed %v", c.name, r, c.ok)
		}
	}
}
