package backend

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"
)

// Protocol versions a backend may be pinned to.
const (
	ProtocolAuto   = "auto"
	ProtocolModern = "2026-07-28"
	ProtocolLegacy = "2025-11-25"
)

// Config describes one backend.
type Config struct {
	Name string
	URL  string
	// Protocol is ProtocolAuto, ProtocolModern or ProtocolLegacy.
	Protocol string
	// Headers are added to every request. Their values are secrets: they
	// never appear in logs or errors.
	Headers map[string]string
	// Auth adds per-caller or OAuth credentials to the static headers
	// (callercred.go, oauth.go); the zero value: static headers only.
	Auth Auth
	// Timeout bounds every request to the backend.
	Timeout time.Duration
	// InputWait bounds how long a held call waits for the client's input
	// (see CallToolAsking).
	InputWait time.Duration
	// HeldOwner is the address of this aggregator replica that a held
	// call's requestState names, so that a retry reaching another replica
	// can be forwarded here; empty names none.
	HeldOwner string
}

// WithDefaults fills what is unset: protocol auto, a 30 s timeout, a 60 s
// input wait.
func (c Config) WithDefaults() Config {
	if c.Protocol == "" {
		c.Protocol = ProtocolAuto
	}
	if c.Timeout <= 0 {
		c.Timeout = 30 * time.Second
	}
	if c.InputWait <= 0 {
		c.InputWait = 60 * time.Second
	}
	return c
}

// Validate checks a configuration before any connection is attempted.
func (c Config) Validate() error {
	if c.Name == "" {
		return errors.New("backend without a name")
	}
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("backend %q: url must be an absolute http(s) URL", c.Name)
	}
	switch c.Auth.Mode {
	case AuthStatic:
	case AuthPassthrough, AuthTokenExchange, AuthClientCredentials:
		if c.Auth.Mode != AuthClientCredentials && c.Auth.Audience == "" {
			return fmt.Errorf("backend %q: auth mode %s needs an audience", c.Name, c.Auth.Mode)
		}
		if c.Auth.Mode != AuthPassthrough && (c.Auth.TokenEndpoint == "" || c.Auth.ClientID == "" || c.Auth.ClientSecret == "") {
			return fmt.Errorf("backend %q: auth mode %s needs a token endpoint, client id and client secret", c.Name, c.Auth.Mode)
		}
	default:
		return fmt.Errorf("backend %q: unknown auth mode %q", c.Name, c.Auth.Mode)
	}
	switch c.Protocol {
	case "", ProtocolAuto, ProtocolModern, ProtocolLegacy:
	default:
		return fmt.Errorf("backend %q: protocol %q is not auto, %s or %s", c.Name, c.Protocol, ProtocolModern, ProtocolLegacy)
	}
	for k := range c.Headers {
		if k == "" || strings.ContainsAny(k, " :\r\n") {
			return fmt.Errorf("backend %q: invalid header name %q", c.Name, k)
		}
		if c.Auth.Mode != AuthStatic && strings.EqualFold(k, "Authorization") {
			return fmt.Errorf("backend %q: the headers of a backend with auth mode %s must not set Authorization", c.Name, c.Auth.Mode)
		}
	}
	return nil
}

// Errors a backend operation fails with. Callers branch with errors.Is.
var (
	// ErrTimeout: the backend did not answer within its timeout.
	ErrTimeout = errors.New("backend timed out")
	// ErrUnavailable: the backend could not be reached or its session broke.
	ErrUnavailable = errors.New("backend unavailable")
	// ErrMalformedRequest: the backend refused a call as malformed (HTTP 400
	// without a JSON-RPC error), for example arguments nested deeper than
	// its JSON decoder accepts. The caller sent it; the backend is fine.
	ErrMalformedRequest = errors.New("backend rejected the request as malformed")
)

// ProtocolError is a JSON-RPC error the backend answered with.
type ProtocolError struct {
	Code    int64
	Message string
	// Data is the error's data as JSON text; empty if none.
	Data string
}

func (e *ProtocolError) Error() string {
	return fmt.Sprintf("backend error %d: %s", e.Code, e.Message)
}
