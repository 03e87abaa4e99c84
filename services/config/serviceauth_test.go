package config

import (
	"strings"
	"testing"
)

func TestServiceAuthValidate(t *testing.T) {
	listTools := []string{"switchboard.aggregator.v1.AggregatorService/ListTools"}
	ok := ServiceAuth{Credentials: []ServiceCredential{
		{Name: "gateway", Token: "a", Allow: []string{"switchboard.aggregator.v1.AggregatorService/*", "/switchboard.indexer.v1.IndexerService/Search"}},
		{Name: "indexer", Token: "", Allow: listTools}, // a secret this pod does not get
		{Name: "other", Token: "", Allow: listTools},
		{Name: "svc", URISAN: "spiffe://x/svc", DNSSAN: "svc.x", CommonName: "svc", Allow: listTools},
		{Name: "gateway-next", Token: "b", AuditService: "gateway", Allow: listTools},
	}}
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid configuration refused: %v", err)
	}
	for _, tc := range []struct {
		name string
		auth ServiceAuth
		want string
	}{
		{"no allow", ServiceAuth{Credentials: []ServiceCredential{{Name: "g", Token: "a"}}}, "allow is required"},
		{"no name", ServiceAuth{Credentials: []ServiceCredential{{Token: "a", Allow: listTools}}}, "name is required"},
		{"bad pattern", ServiceAuth{Credentials: []ServiceCredential{{Name: "g", Token: "a", Allow: []string{"ListTools"}}}}, "serviceAuth.credentials[0].allow[0]: not package.Service/Method"},
		{"wildcard service", ServiceAuth{Credentials: []ServiceCredential{{Name: "g", Token: "a", Allow: []string{"*/*"}}}}, "serviceAuth.credentials[0].allow[0]: not package.Service/Method"},
		{"everything", ServiceAuth{Credentials: []ServiceCredential{{Name: "g", Token: "a", Allow: []string{"*"}}}}, "serviceAuth.credentials[0].allow[0]: not package.Service/Method"},
		{"shared token", ServiceAuth{Credentials: []ServiceCredential{{Name: "a", Token: "t", Allow: listTools}, {Name: "b", Token: "t", Allow: listTools}}}, "serviceAuth.credentials[1].token: is also a's"},
		{"shared SAN", ServiceAuth{Credentials: []ServiceCredential{{Name: "a", URISAN: "spiffe://x/a", Allow: listTools}, {Name: "b", URISAN: "spiffe://x/a", Allow: listTools}}}, "serviceAuth.credentials[1].uriSAN: is also a's"},
		// A certificate of one and a token of the other would name "one"
		// credential by its name.
		{"shared name", ServiceAuth{Credentials: []ServiceCredential{{Name: "svc", URISAN: "spiffe://x/reporting", Allow: listTools}, {Name: "svc", Token: "other", AssertPrincipals: true, Allow: listTools}}}, "serviceAuth.credentials[1].name: is also credentials[0]'s"},
		{"half a key pair", ServiceAuth{TLS: TLS{CertFile: "c"}}, "go together"},
		{"unknown audit service", ServiceAuth{Credentials: []ServiceCredential{{Name: "g", Token: "a", Allow: listTools, AuditService: "console"}}},
			"serviceAuth.credentials[0].auditService: want aggregator, gateway or indexer"},
	} {
		err := tc.auth.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}

// A credential writes the audit events of the service auditService names,
// or, unset, of the service its name names; any other credential writes
// none.
func TestEffectiveAuditService(t *testing.T) {
	for _, tc := range []struct {
		cred ServiceCredential
		want string
	}{
		{ServiceCredential{Name: "gateway"}, "gateway"},
		{ServiceCredential{Name: "aggregator"}, "aggregator"},
		{ServiceCredential{Name: "indexer"}, "indexer"},
		{ServiceCredential{Name: "gateway-next", AuditService: "gateway"}, "gateway"},
		{ServiceCredential{Name: "gateway", AuditService: "aggregator"}, "aggregator"},
		{ServiceCredential{Name: "gateway-next"}, ""},
		{ServiceCredential{Name: "console"}, ""},
		{ServiceCredential{Name: "Gateway"}, ""},
	} {
		if got := tc.cred.EffectiveAuditService(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.cred, got, tc.want)
		}
	}
}

func TestParseMethodPattern(t *testing.T) {
	for p, want := range map[string][2]string{
		"switchboard.aggregator.v1.AggregatorService/ListTools":  {"switchboard.aggregator.v1.AggregatorService", "ListTools"},
		"/switchboard.aggregator.v1.AggregatorService/ListTools": {"switchboard.aggregator.v1.AggregatorService", "ListTools"},
		"switchboard.indexer.v1.IndexerService/*":                {"switchboard.indexer.v1.IndexerService", "*"},
	} {
		s, m, err := ParseMethodPattern(p)
		if err != nil || s != want[0] || m != want[1] {
			t.Errorf("ParseMethodPattern(%q) = %q, %q, %v", p, s, m, err)
		}
	}
	for _, p := range []string{"", "/", "Service/Method", "a.B/", "a.B/M/x", "a..B/M", "a.B/M*", "a.1B/M"} {
		if _, _, err := ParseMethodPattern(p); err == nil {
			t.Errorf("ParseMethodPattern(%q) accepted", p)
		}
	}
}

// A cluster-state RPC has two names for a release: an allow list that
// names either (or either service with *) permits both, and nothing else
// widens: IndexerService's search stays IndexerService's alone, and
// IndexerService/* does not reach ClusterStateService's tasks.
func TestMethodSetNamesMovedRPCsEitherWay(t *testing.T) {
	const (
		oldRevoke = "/switchboard.indexer.v1.IndexerService/RevokeSession"
		newRevoke = "/switchboard.indexer.v1.ClusterStateService/RevokeSession"
		search    = "/switchboard.indexer.v1.IndexerService/Search"
		newSearch = "/switchboard.indexer.v1.ClusterStateService/Search"
		oldAudit  = "/switchboard.indexer.v1.IndexerService/QueryAuditEvents"
		// The tasks were never IndexerService's: its * does not reach them.
		getTask = "/switchboard.indexer.v1.ClusterStateService/GetTask"
	)
	cases := []struct {
		allow   []string
		permits []string
		refuses []string
	}{
		{[]string{"switchboard.indexer.v1.IndexerService/RevokeSession"}, []string{oldRevoke, newRevoke}, []string{search, oldAudit}},
		{[]string{"switchboard.indexer.v1.ClusterStateService/RevokeSession"}, []string{oldRevoke, newRevoke}, []string{search, oldAudit}},
		{[]string{"switchboard.indexer.v1.IndexerService/*"}, []string{oldRevoke, newRevoke, search, oldAudit}, []string{getTask}},
		{[]string{"switchboard.indexer.v1.ClusterStateService/*"}, []string{oldRevoke, newRevoke, oldAudit, getTask}, []string{search}},
		{[]string{"switchboard.indexer.v1.IndexerService/Search"}, []string{search}, []string{newSearch, oldRevoke, newRevoke}},
	}
	for _, c := range cases {
		set := NewMethodSet(c.allow)
		for _, m := range c.permits {
			if !set.Permits(m) {
				t.Errorf("allow %v refuses %s", c.allow, m)
			}
		}
		for _, m := range c.refuses {
			if set.Permits(m) {
				t.Errorf("allow %v permits %s", c.allow, m)
			}
		}
	}
}

// The forwarding of a held call's retry is one right, whichever of its
// two RPCs carries it.
func TestMethodSetResumeIsOneRight(t *testing.T) {
	for _, allow := range []string{
		"switchboard.aggregator.v1.AggregatorService/ResumeHeldCall",
		"switchboard.aggregator.v1.AggregatorService/ResumeHeldCallStream",
	} {
		set := NewMethodSet([]string{allow})
		for _, m := range []string{
			"/switchboard.aggregator.v1.AggregatorService/ResumeHeldCall",
			"/switchboard.aggregator.v1.AggregatorService/ResumeHeldCallStream",
		} {
			if !set.Permits(m) {
				t.Errorf("allow %s refuses %s", allow, m)
			}
		}
		if set.Permits("/switchboard.aggregator.v1.AggregatorService/CallToolStream") {
			t.Errorf("allow %s permits CallToolStream", allow)
		}
	}
}

// Giving back a request state's use is the right to record uses: an
// allow list that names ConsumeRequestState, under either service, or
// either service with *, grants ReleaseRequestState, and the other way
// round; nothing else grants it.
func TestMethodSetReleaseIsConsume(t *testing.T) {
	const (
		release    = "/switchboard.indexer.v1.ClusterStateService/ReleaseRequestState"
		consume    = "/switchboard.indexer.v1.ClusterStateService/ConsumeRequestState"
		oldConsume = "/switchboard.indexer.v1.IndexerService/ConsumeRequestState"
	)
	for _, allow := range []string{
		"switchboard.indexer.v1.IndexerService/ConsumeRequestState",
		"switchboard.indexer.v1.ClusterStateService/ConsumeRequestState",
		"switchboard.indexer.v1.ClusterStateService/ReleaseRequestState",
		"switchboard.indexer.v1.IndexerService/*",
		"switchboard.indexer.v1.ClusterStateService/*",
	} {
		set := NewMethodSet([]string{allow})
		for _, m := range []string{release, consume, oldConsume} {
			if !set.Permits(m) {
				t.Errorf("allow %s refuses %s", allow, m)
			}
		}
	}
	for _, allow := range []string{
		"switchboard.indexer.v1.IndexerService/Search",
		"switchboard.indexer.v1.ClusterStateService/RevokeSession",
	} {
		if NewMethodSet([]string{allow}).Permits(release) {
			t.Errorf("allow %s permits ReleaseRequestState", allow)
		}
	}
	if !NewMethodSet(GatewayMethods).Permits(release) {
		t.Error("the gateway's built-in allow list refuses ReleaseRequestState")
	}
}
