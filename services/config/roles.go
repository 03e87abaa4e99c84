package config

import (
	"errors"
	"fmt"
	"slices"
	"strings"
)

// Roles of service credentials (serviceAuth.credentials[].role): what one
// of Switchboard's services, or an internal client, needs, so that a
// configuration names the role instead of listing gRPC methods. Parse
// expands a role once, at load, into the credential's allow list and
// flags; everything after it sees the expanded credential.
const (
	RoleGateway    = "gateway"
	RoleIndexer    = "indexer"
	RoleAggregator = "aggregator"
	RoleConsole    = "console"
	RoleClient     = "client"
)

// Roles are the roles a credential may name, in the docs' order.
var Roles = []string{RoleGateway, RoleIndexer, RoleAggregator, RoleConsole, RoleClient}

// ClientMethods are what an internal client acting as its own identity
// (subject and groups) calls: the gateway's calls of the aggregator (the
// catalog, its calls and their tasks), the backends' health as its
// identity sees them (ListBackends) and the search. It asserts no
// principal.
var ClientMethods = clientMethods()

func clientMethods() []string {
	var out []string
	for _, m := range GatewayMethods {
		if strings.HasPrefix(m, "switchboard.aggregator.v1.AggregatorService/") {
			out = append(out, m)
		}
	}
	return append(out, "switchboard.aggregator.v1.AggregatorService/ListBackends", "switchboard.indexer.v1.IndexerService/Search")
}

// roleGrant is what a role gives a credential.
type roleGrant struct {
	methods          []string
	assertPrincipals bool
	operator         bool
	// auditService is the service whose events the credential ships.
	auditService string
}

func grantOf(role string) (roleGrant, bool) {
	switch role {
	case RoleGateway:
		return roleGrant{methods: GatewayMethods, assertPrincipals: true, auditService: "gateway"}, true
	case RoleIndexer:
		return roleGrant{methods: IndexerMethods, assertPrincipals: true, auditService: "indexer"}, true
	case RoleAggregator:
		return roleGrant{methods: AggregatorMethods, assertPrincipals: true, auditService: "aggregator"}, true
	case RoleConsole:
		return roleGrant{methods: ConsoleMethods, assertPrincipals: true, operator: true}, true
	case RoleClient:
		return roleGrant{methods: ClientMethods}, true
	}
	return roleGrant{}, false
}

// applyRoles expands each credential's role: its allow list becomes the
// role's methods, and the role's flags are set. A role with an allow list
// of its own, a role with flags it does not grant, an unknown role and a
// client without a subject are errors naming the key.
func (a *ServiceAuth) applyRoles() error {
	var errs []error
	for i := range a.Credentials {
		c := &a.Credentials[i]
		if c.Role == "" {
			continue
		}
		key := fmt.Sprintf("serviceAuth.credentials[%d]", i)
		g, ok := grantOf(c.Role)
		switch {
		case !ok:
			errs = append(errs, keyErr(key+".role", "want one of %s", strings.Join(Roles, ", ")))
			continue
		case len(c.Allow) > 0:
			errs = append(errs, keyErr(key+".allow", "is set with role %s: a role grants its RPCs (docs/configuration.md, \"Roles\"); drop one of them", c.Role))
			continue
		case c.AssertPrincipals && !g.assertPrincipals:
			errs = append(errs, keyErr(key+".assertPrincipals", "is more than role %s grants: set allow instead of role for such a credential", c.Role))
			continue
		case c.Operator && !g.operator:
			errs = append(errs, keyErr(key+".operator", "is more than role %s grants: set allow instead of role for such a credential", c.Role))
			continue
		case c.Role == RoleClient && c.Subject == "":
			errs = append(errs, keyErr(key+".subject", "is required with role client: the client acts as this identity"))
			continue
		}
		c.Allow = slices.Clone(g.methods)
		c.AssertPrincipals = c.AssertPrincipals || g.assertPrincipals
		c.Operator = c.Operator || g.operator
		if c.AuditService == "" {
			c.AuditService = g.auditService
		}
	}
	return errors.Join(errs...)
}
