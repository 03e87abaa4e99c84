package svcauth

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/apierr"
	aggregatorv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/aggregator/v1"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// TestResolveBoundsThePrincipal: a principal named in a request is
// refused with INVALID_ARGUMENT past any of its bounds (the subject's
// bytes, a group's bytes, the number of groups, all groups' bytes), from
// a caller that asserts principals and from one bound to its own; a
// principal at every bound is taken.
func TestResolveBoundsThePrincipal(t *testing.T) {
	manyGroups := func(n, size int) []string {
		g := make([]string, n)
		for i := range g {
			name := fmt.Sprintf("g%06d", i)
			g[i] = name + strings.Repeat("x", size-len(name))
		}
		return g
	}
	atBounds := []*commonv1.Principal{
		{Subject: strings.Repeat("s", MaxSubjectBytes)},
		{Subject: "alice", Groups: []string{strings.Repeat("g", MaxGroupBytes)}},
		{Subject: "alice", Groups: manyGroups(MaxGroups, MaxGroupsBytes/MaxGroups)},
	}
	past := map[string]*commonv1.Principal{
		"a 4 MiB subject":           {Subject: strings.Repeat("s", 4<<20)},
		"a subject one byte over":   {Subject: strings.Repeat("s", MaxSubjectBytes+1)},
		"a group one byte over":     {Subject: "alice", Groups: []string{strings.Repeat("g", MaxGroupBytes+1)}},
		"one group too many":        {Subject: "alice", Groups: manyGroups(MaxGroups+1, 8)},
		"a million repeated groups": {Subject: "alice", Groups: strings.Split(strings.Repeat("eng,", 1<<20), ",")},
		"groups over their bytes":   {Subject: "alice", Groups: manyGroups(MaxGroupsBytes/MaxGroupBytes+1, MaxGroupBytes)},
		"a NUL in the subject":      {Subject: "alice\x00admins", Groups: []string{"x"}},
		"a control in a group":      {Subject: "alice", Groups: []string{"ops\nadmins"}},
	}
	edge := Caller{Name: "gateway", AssertPrincipals: true}
	for _, p := range atBounds {
		got, err := Resolve(edge, p)
		if err != nil || got.GetSubject() != p.GetSubject() || len(got.GetGroups()) != len(p.GetGroups()) {
			t.Errorf("a principal at the bounds (subject %d bytes, %d groups): %v", len(p.GetSubject()), len(p.GetGroups()), err)
		}
	}
	bound := Caller{Name: "reporting", Bound: &commonv1.Principal{Subject: "reporting"}}
	for name, p := range past {
		for _, c := range []Caller{edge, bound} {
			_, err := Resolve(c, p)
			if status.Code(err) != codes.InvalidArgument || apierr.Reason(err) != commonv1.ErrorReason_ERROR_REASON_INVALID_ARGUMENT {
				t.Errorf("%s from %s: %v, want INVALID_ARGUMENT", name, c.Name, err)
			}
		}
	}
}

// A request that carries a tool call names its principal twice, at the
// top level and in the call (CallToolStreamRequest, ResumeHeldCallRequest
// and its streamed form). The call's is checked exactly as the top-level
// one: another principal than its own from a caller bound to one is
// PERMISSION_DENIED, one past the bounds INVALID_ARGUMENT from any caller;
// its own identity, or none, passes.
func TestNestedCallPrincipalIsChecked(t *testing.T) {
	edge := Caller{Name: "gateway", AssertPrincipals: true}
	bound := Caller{Name: "reporting", Bound: &commonv1.Principal{Subject: "reporting"}}
	oversized := &commonv1.Principal{Subject: strings.Repeat("s", MaxSubjectBytes+1)}
	requests := map[string]func(call *aggregatorv1.CallToolRequest) any{
		"CallToolStreamRequest": func(call *aggregatorv1.CallToolRequest) any {
			return &aggregatorv1.CallToolStreamRequest{Call: call}
		},
		"ResumeHeldCallRequest": func(call *aggregatorv1.CallToolRequest) any {
			return &aggregatorv1.ResumeHeldCallRequest{Call: call}
		},
		"ResumeHeldCallStreamRequest": func(call *aggregatorv1.CallToolRequest) any {
			return &aggregatorv1.ResumeHeldCallStreamRequest{Call: call}
		},
	}
	for name, request := range requests {
		for _, c := range []struct {
			caller    Caller
			principal *commonv1.Principal
			want      codes.Code
		}{
			{bound, &commonv1.Principal{Subject: "alice"}, codes.PermissionDenied},
			{bound, oversized, codes.InvalidArgument},
			{edge, oversized, codes.InvalidArgument},
			{bound, &commonv1.Principal{Subject: "reporting"}, codes.OK},
			{bound, nil, codes.OK},
			{edge, &commonv1.Principal{Subject: "alice"}, codes.OK},
		} {
			_, err := resolveRequest(c.caller, request(&aggregatorv1.CallToolRequest{Name: "demo_add", Principal: c.principal}))
			if status.Code(err) != c.want {
				t.Errorf("%s with call.principal %.20q from %s: %v, want %s", name, c.principal.GetSubject(), c.caller.Name, err, c.want)
			}
		}
	}
}
