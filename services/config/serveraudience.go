package config

import (
	"errors"
	"fmt"
	"strings"
)

// ValidateServerAudiences checks servers[].audience against gateway.auth,
// for the gateway (the aggregator reads servers but no audience). A
// server's audience binds OIDC tokens only, so it needs gateway.auth.mode
// oidc: with API keys or the anonymous principal it would promise a
// boundary nothing enforces. It must differ from gateway.auth.oidc.audience
// and from every other server's, so that a token issued for one protected
// resource alone is accepted at no other. The errors name keys and
// servers, never an audience.
func (c *Config) ValidateServerAudiences() error {
	var errs []error
	owner := map[string]int{}
	for i, s := range c.Servers {
		if s.Audience == "" {
			continue
		}
		at := fmt.Sprintf("servers[%d] (%s).audience", i, s.Name)
		switch {
		case c.Gateway.Auth.Mode != "oidc":
			errs = append(errs, fmt.Errorf("%s needs gateway.auth.mode oidc: API keys and the anonymous principal carry no audience", at))
			continue
		case strings.TrimSpace(s.Audience) == "":
			errs = append(errs, fmt.Errorf("%s is blank", at))
			continue
		case strings.TrimSpace(s.Audience) != s.Audience:
			errs = append(errs, fmt.Errorf("%s has surrounding spaces", at))
			continue
		case s.Audience == c.Gateway.Auth.OIDC.Audience:
			errs = append(errs, fmt.Errorf("%s is gateway.auth.oidc.audience: a server's own audience must differ from the shared one", at))
			continue
		}
		if j, taken := owner[s.Audience]; taken {
			errs = append(errs, fmt.Errorf("%s is also servers[%d] (%s)'s: each server's audience must be its own", at, j, c.Servers[j].Name))
			continue
		}
		owner[s.Audience] = i
	}
	return errors.Join(errs...)
}
