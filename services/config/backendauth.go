package config

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// Backend credential modes (aggregator.backends[].auth.mode): whose
// identity a backend's requests carry.
const (
	// BackendAuthStatic sends only the configured headers, the same on
	// every request (the default).
	BackendAuthStatic = "static"
	// BackendAuthPassthrough sends the caller's own bearer token
	// (gateway.auth.mode oidc), and only when its aud claim names
	// auth.audience.
	BackendAuthPassthrough = "passthrough"
)

// BackendAuth is how the aggregator authenticates to one backend.
type BackendAuth struct {
	// Mode is static (default) or passthrough.
	Mode string `yaml:"mode"`
	// Audience (passthrough) is the value the caller's token's aud claim
	// must contain for the token to be sent to this backend: a token
	// issued for another service is never handed to this one.
	Audience string `yaml:"audience"`
}

// EffectiveMode is the mode, static when unset.
func (a BackendAuth) EffectiveMode() string {
	if a.Mode == "" {
		return BackendAuthStatic
	}
	return a.Mode
}

// NeedsCaller reports whether the mode acts as the calling user, so the
// backend's calls need the caller's token.
func (a BackendAuth) NeedsCaller() bool { return a.EffectiveMode() == BackendAuthPassthrough }

// Validate checks the auth section of the backend named name, whose static
// headers are headers.
func (a BackendAuth) Validate(name string, headers map[string]string) error {
	at := fmt.Sprintf("aggregator.backends[%s].auth", name)
	switch a.EffectiveMode() {
	case BackendAuthStatic:
		if a.Audience != "" {
			return fmt.Errorf("%s.audience is only for mode %s", at, BackendAuthPassthrough)
		}
	case BackendAuthPassthrough:
		if strings.TrimSpace(a.Audience) == "" {
			return fmt.Errorf("%s.audience is required with mode %s: the caller's token goes only to a backend its aud claim names", at, BackendAuthPassthrough)
		}
		for k := range headers {
			if http.CanonicalHeaderKey(k) == "Authorization" {
				return fmt.Errorf("%s: mode %s sends the caller's Authorization; the backend's headers must not set one too", at, BackendAuthPassthrough)
			}
		}
	default:
		return fmt.Errorf("%s.mode %q: want %s or %s", at, a.Mode, BackendAuthStatic, BackendAuthPassthrough)
	}
	return nil
}

// ValidateBackendAuth checks every backend's auth section.
func (a Aggregator) ValidateBackendAuth() error {
	var errs []error
	for _, b := range a.Backends {
		errs = append(errs, b.Auth.Validate(b.Name, b.Headers))
	}
	return errors.Join(errs...)
}
