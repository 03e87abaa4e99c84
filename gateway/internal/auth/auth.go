// Package auth turns an MCP caller's HTTP credential into a principal.
//
// Three modes: anonymous (everyone is the anonymous principal), apiKeys
// (a static table of bearer keys) and oidc (JWT bearer tokens checked
// against an issuer's JWKS). The principal is what the gateway asserts to
// the services; it is never taken from anything the client can set freely.
package auth

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode"

	"google.golang.org/grpc/status"

	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
	"github.com/switchboard-mcp/switchboard/services/svcauth"
)

// ErrUnauthenticated means the request carries no valid credential. Its
// message is safe to show to the client.
var ErrUnauthenticated = errors.New("missing or invalid bearer token")

// Authenticator resolves the principal of a request.
type Authenticator interface {
	// Authenticate resolves the principal of r, a request for a protected
	// resource whose tokens must name audience in their aud claim: a
	// virtual server's own (servers[].audience), or "" for the shared
	// gateway.auth.oidc.audience. Only OIDC tokens carry an audience: API
	// keys and the anonymous principal are accepted whatever it is (the
	// configuration allows a server's audience in oidc mode only).
	Authenticate(r *http.Request, audience string) (*commonv1.Principal, error)
}

// New builds the authenticator for cfg.
func New(cfg config.GatewayAuth, client *http.Client) (Authenticator, error) {
	switch cfg.Mode {
	case "", "anonymous":
		return anonymous{}, nil
	case "apiKeys":
		return newAPIKeys(cfg.APIKeys)
	case "oidc":
		return NewOIDC(cfg.OIDC, client)
	default:
		return nil, fmt.Errorf("gateway.auth.mode %q: want anonymous, apiKeys or oidc", cfg.Mode)
	}
}

type anonymous struct{}

func (anonymous) Authenticate(*http.Request, string) (*commonv1.Principal, error) {
	return &commonv1.Principal{}, nil
}

// apiKeys looks keys up by their SHA-256, so a lookup's timing says nothing
// about how much of a guessed key was right.
type apiKeys map[[32]byte]*commonv1.Principal

func newAPIKeys(keys []config.APIKey) (apiKeys, error) {
	if len(keys) == 0 {
		return nil, errors.New("gateway.auth.mode apiKeys needs at least one entry in gateway.auth.apiKeys")
	}
	table := apiKeys{}
	for i, k := range keys {
		if k.Key == "" || k.Subject == "" {
			return nil, fmt.Errorf("gateway.auth.apiKeys[%d]: key and subject are required", i)
		}
		if strings.TrimSpace(k.Key) != k.Key || strings.ContainsFunc(k.Key, unicode.IsControl) {
			// BearerToken never returns such a key: it would refuse its
			// holder for good, silently.
			return nil, fmt.Errorf("gateway.auth.apiKeys[%d]: key begins or ends with white space, or holds a control character (a line break?): no bearer token can match it", i)
		}
		sum := sha256.Sum256([]byte(k.Key))
		if _, dup := table[sum]; dup {
			return nil, fmt.Errorf("gateway.auth.apiKeys[%d]: duplicate key", i)
		}
		p := &commonv1.Principal{Subject: k.Subject, Groups: append([]string(nil), k.Groups...)}
		if err := svcauth.CheckPrincipal(p); err != nil {
			return nil, fmt.Errorf("gateway.auth.apiKeys[%d]: %s", i, status.Convert(err).Message())
		}
		table[sum] = p
	}
	return table, nil
}

func (t apiKeys) Authenticate(r *http.Request, _ string) (*commonv1.Principal, error) {
	token, ok := BearerToken(r)
	if !ok {
		return nil, ErrUnauthenticated
	}
	p, ok := t[sha256.Sum256([]byte(token))]
	if !ok {
		return nil, ErrUnauthenticated
	}
	return p, nil
}

// BearerToken extracts the token of an "Authorization: Bearer" header.
func BearerToken(r *http.Request) (string, bool) {
	return svcauth.BearerCredential(r.Header.Get("Authorization"))
}
