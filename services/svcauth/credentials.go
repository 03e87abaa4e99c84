package svcauth

import (
	"context"
	"sync/atomic"
)

// The client side: the bearer token a service presents to another.

// LiveToken attaches a bearer token to outgoing calls, like
// TokenCredentials, and can be replaced while the connection serves (a
// configuration reload): each call carries the token in force when it
// starts. An empty token sends no authorization.
type LiveToken struct {
	// metadata is what every call carries, built once per token: gRPC only
	// reads it (into a map of its own), so calls share it.
	metadata atomic.Pointer[map[string]string]
	secure   bool
}

// NewLiveToken returns a LiveToken holding token; secure requires
// transport security (see TokenCredentials.Secure).
func NewLiveToken(token string, secure bool) *LiveToken {
	t := &LiveToken{secure: secure}
	t.Set(token)
	return t
}

// Set replaces the token.
func (t *LiveToken) Set(token string) {
	var md map[string]string
	if token != "" {
		md = map[string]string{"authorization": "Bearer " + token}
	}
	t.metadata.Store(&md)
}

// GetRequestMetadata implements credentials.PerRPCCredentials. The map is
// shared by every call and must not be modified.
func (t *LiveToken) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return *t.metadata.Load(), nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (t *LiveToken) RequireTransportSecurity() bool { return t.secure }

// TokenCredentials attaches a bearer token to outgoing calls.
type TokenCredentials struct {
	Token string
	// Secure requires transport security, so the token is not sent in the
	// clear to a remote host. Loopback development runs set it false.
	Secure bool
}

// GetRequestMetadata implements credentials.PerRPCCredentials.
func (t TokenCredentials) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{"authorization": "Bearer " + t.Token}, nil
}

// RequireTransportSecurity implements credentials.PerRPCCredentials.
func (t TokenCredentials) RequireTransportSecurity() bool { return t.Secure }
