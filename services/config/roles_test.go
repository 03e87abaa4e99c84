package config

import (
	"slices"
	"strings"
	"testing"
)

// TestRolesExpand: a credential's role becomes its allow list and flags at
// load, so that every service sees the credential it would have listed.
func TestRolesExpand(t *testing.T) {
	c, err := Parse([]byte(`
serviceAuth:
  credentials:
    - {name: gw, token: t1, role: gateway}
    - {name: idx, token: t2, role: indexer}
    - {name: agg, token: t3, role: aggregator}
    - {name: console, token: t4, role: console}
    - {name: reports, token: t5, role: client, subject: reports-bot, groups: [bots]}
    - {name: custom, token: t6, allow: ["switchboard.indexer.v1.IndexerService/Stats"]}
`), func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		methods         []string
		assert, op      bool
		audit, services string
	}{
		{GatewayMethods, true, false, "gateway", ""},
		{IndexerMethods, true, false, "indexer", ""},
		{AggregatorMethods, true, false, "aggregator", ""},
		{ConsoleMethods, true, true, "", ""},
		{ClientMethods, false, false, "", ""},
		{[]string{"switchboard.indexer.v1.IndexerService/Stats"}, false, false, "", ""},
	}
	for i, w := range want {
		got := c.ServiceAuth.Credentials[i]
		if !slices.Equal(got.Allow, w.methods) || got.AssertPrincipals != w.assert || got.Operator != w.op || got.AuditService != w.audit {
			t.Errorf("%s: allow %v, assert %v, operator %v, audit %q", got.Name, got.Allow, got.AssertPrincipals, got.Operator, got.AuditService)
		}
	}
	if err := c.ServiceAuth.Validate(); err != nil {
		t.Fatal(err)
	}
	// A client's role grants no way to act for others or as an operator
	// (ListBackends shows a caller that is not one generic reasons only,
	// and the backends its own identity sees).
	for _, m := range ClientMethods {
		if strings.Contains(m, "ResumeHeldCall") || strings.Contains(m, "ClusterStateService") || strings.Contains(m, "GetTraffic") {
			t.Errorf("a client may call %s", m)
		}
	}
}

// TestRoleErrors: what a role cannot mean is refused at load, by key.
func TestRoleErrors(t *testing.T) {
	for _, tc := range []struct{ key, msg, cred string }{
		{"serviceAuth.credentials[0].role", "want one of gateway, indexer, aggregator, console, client", `{name: a, token: t, role: admin}`},
		{"serviceAuth.credentials[0].allow", "is set with role gateway", `{name: a, token: t, role: gateway, allow: ["switchboard.indexer.v1.IndexerService/Search"]}`},
		{"serviceAuth.credentials[0].subject", "is required with role client", `{name: a, token: t, role: client}`},
		{"serviceAuth.credentials[0].assertPrincipals", "is more than role client grants", `{name: a, token: t, role: client, subject: s, assertPrincipals: true}`},
		{"serviceAuth.credentials[0].operator", "is more than role gateway grants", `{name: a, token: t, role: gateway, operator: true}`},
	} {
		_, err := Parse([]byte("serviceAuth:\n  credentials:\n    - "+tc.cred+"\n"), func(string) (string, bool) { return "", false })
		if err == nil || !strings.Contains(err.Error(), tc.key) || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("%s: got %v", tc.cred, err)
		}
	}
}
