package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/switchboard-mcp/switchboard/services/config"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// acceptedAlgorithms are the asymmetric JWS algorithms OIDC providers use.
// Symmetric algorithms are refused: the gateway must never accept a token
// signed with a key the client could know.
var acceptedAlgorithms = []jose.SignatureAlgorithm{
	jose.RS256, jose.RS384, jose.RS512, jose.PS256, jose.PS384, jose.PS512,
	jose.ES256, jose.ES384, jose.ES512, jose.EdDSA,
}

const (
	// clockLeeway tolerates small clock differences with the issuer.
	clockLeeway = 30 * time.Second
	// jwksMaxAge refreshes keys periodically even without an unknown kid.
	jwksMaxAge = 10 * time.Minute
	// jwksMinRefetch bounds refetches triggered by unknown kids, so a flood
	// of forged kids cannot turn the gateway against the issuer.
	jwksMinRefetch = 2 * time.Second
)

// OIDC validates JWT bearer tokens against an issuer's JWKS.
type OIDC struct {
	cfg         config.OIDC
	client      *http.Client
	minRefetch  time.Duration
	groupsClaim string

	mu        sync.Mutex
	keys      jose.JSONWebKeySet
	fetchedAt time.Time
}

// NewOIDC builds an OIDC authenticator. Keys are fetched on first use.
func NewOIDC(cfg config.OIDC, client *http.Client) (*OIDC, error) {
	if cfg.Issuer == "" || cfg.Audience == "" || cfg.JWKSURL == "" {
		return nil, errors.New("gateway.auth.oidc: issuer, audience and jwksURL are required")
	}
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	groups := cfg.GroupsClaim
	if groups == "" {
		groups = "groups"
	}
	return &OIDC{cfg: cfg, client: client, minRefetch: jwksMinRefetch, groupsClaim: groups}, nil
}

// Authenticate implements Authenticator.
func (o *OIDC) Authenticate(r *http.Request) (*commonv1.Principal, error) {
	raw, ok := BearerToken(r)
	if !ok {
		return nil, ErrUnauthenticated
	}
	tok, err := jwt.ParseSigned(raw, acceptedAlgorithms)
	if err != nil || len(tok.Headers) != 1 {
		return nil, ErrUnauthenticated
	}
	key, err := o.key(r.Context(), tok.Headers[0].KeyID)
	if err != nil {
		return nil, err
	}
	var std jwt.Claims
	extra := map[string]any{}
	if err := tok.Claims(key, &std, &extra); err != nil {
		return nil, ErrUnauthenticated
	}
	expected := jwt.Expected{Issuer: o.cfg.Issuer, AnyAudience: jwt.Audience{o.cfg.Audience}, Time: time.Now()}
	if err := std.ValidateWithLeeway(expected, clockLeeway); err != nil || std.Subject == "" || std.Expiry == nil {
		return nil, ErrUnauthenticated
	}
	return &commonv1.Principal{Subject: std.Subject, Groups: stringList(extra[o.groupsClaim])}, nil
}

// key returns the verification key for kid, refetching the JWKS when the kid
// is unknown (key rotation) or the cached set is old.
func (o *OIDC) key(ctx context.Context, kid string) (*jose.JSONWebKey, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if k := o.lookup(kid); k != nil && time.Since(o.fetchedAt) < jwksMaxAge {
		return k, nil
	}
	if o.fetchedAt.IsZero() || time.Since(o.fetchedAt) >= o.minRefetch {
		if err := o.fetch(ctx); err != nil {
			// Keep serving with the keys we have; the issuer may be briefly down.
			if k := o.lookup(kid); k != nil {
				return k, nil
			}
			return nil, fmt.Errorf("%w (signing keys unavailable)", ErrUnauthenticated)
		}
	}
	if k := o.lookup(kid); k != nil {
		return k, nil
	}
	return nil, ErrUnauthenticated
}

func (o *OIDC) lookup(kid string) *jose.JSONWebKey {
	for i := range o.keys.Keys {
		k := &o.keys.Keys[i]
		if k.Use != "" && k.Use != "sig" {
			continue
		}
		if kid == "" || k.KeyID == kid {
			return k
		}
	}
	return nil
}

func (o *OIDC) fetch(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, o.cfg.JWKSURL, nil)
	if err != nil {
		return err
	}
	resp, err := o.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("jwks: HTTP %d", resp.StatusCode)
	}
	var set jose.JSONWebKeySet
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&set); err != nil {
		return fmt.Errorf("jwks: %w", err)
	}
	o.keys = set
	o.fetchedAt = time.Now()
	return nil
}

// stringList reads a groups claim: an array of strings or one string.
func stringList(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		out := make([]string, 0, len(v))
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}
