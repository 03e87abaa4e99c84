package config

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/switchboard-mcp/switchboard/services/hostguard"
)

// SecureURL is the rule of every URL that credentials, tokens or the keys
// that verify tokens travel over: the OpenID provider's issuer and JWKS
// (gateway.auth.oidc), the endpoints its discovery document names, and
// the backends' token endpoints (aggregator.backends[].auth.tokenEndpoint).
// It must be an absolute https URL, or http to a loopback address
// (localhost, 127.0.0.0/8, ::1), which never leaves the machine. Its error
// says what is wanted and never quotes the URL.
func SecureURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" || (u.Scheme != "https" && u.Scheme != "http") {
		return errors.New("want an absolute https URL")
	}
	if u.Scheme == "http" && !hostguard.IsLoopbackName(u.Hostname()) {
		return errors.New("want https (http only to a loopback address)")
	}
	return nil
}

// validate checks gateway.auth.oidc in mode: in oidc mode the issuer, the
// audience and the JWKS URL are required; whatever the mode, the issuer
// and the JWKS URL, when set, follow SecureURL (the operator console's
// OIDC login uses them in every mode). Signing keys fetched over plain
// http from another machine could be replaced by anyone on the path, and
// every token forged with theirs.
func (o OIDC) validate(mode string) error {
	var errs []error
	for _, k := range []struct{ key, value string }{
		{"gateway.auth.oidc.issuer", o.Issuer},
		{"gateway.auth.oidc.audience", o.Audience},
		{"gateway.auth.oidc.jwksURL", o.JWKSURL},
	} {
		if k.value == "" {
			if mode == "oidc" {
				errs = append(errs, fmt.Errorf("%s is required with gateway.auth.mode oidc", k.key))
			}
			continue
		}
		if k.key == "gateway.auth.oidc.audience" {
			continue
		}
		if err := SecureURL(k.value); err != nil {
			errs = append(errs, keyErr(k.key, "%w", err))
		}
	}
	return errors.Join(errs...)
}
