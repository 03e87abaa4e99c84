// Package callerid is the one rule that turns an OIDC access token's
// claims into the principal Switchboard acts for: the gateway applies it
// to a token it verified, and the aggregator applies it again to the token
// forwarded with a call (RequestContext.subject_token), so that the token
// a backend's credential is made from always belongs to the principal that
// Cedar, the rate limits and the audit trail see.
package callerid

import (
	"encoding/base64"
	"encoding/json"
	"slices"
	"strings"

	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// DefaultGroupsClaim is the claim holding a user's groups when
// gateway.auth.oidc.groupsClaim is unset.
const DefaultGroupsClaim = "groups"

// MaxToken bounds the token Bound decodes; the gateway's header limit
// bounds it already, this keeps the decoding bounded on its own.
const MaxToken = 16 << 10

// FromClaims is the principal of a token's claims: its sub, and the
// strings of groupsClaim (an array of strings, or one string). Nil when
// there is no subject.
func FromClaims(claims map[string]any, groupsClaim string) *commonv1.Principal {
	sub, _ := claims["sub"].(string)
	if sub == "" {
		return nil
	}
	if groupsClaim == "" {
		groupsClaim = DefaultGroupsClaim
	}
	return &commonv1.Principal{Subject: sub, Groups: stringList(claims[groupsClaim])}
}

// Bound reports whether token, a JWT, names principal p: the principal of
// its claims has p's subject and p's groups (as sets). The signature is
// not checked here: the gateway verified it before forwarding the token,
// and the authorization server that exchanges it checks it again, so a
// token whose claims were rewritten to match gets no credential; what this
// stops is a real token presented beside another principal.
func Bound(token string, p *commonv1.Principal, groupsClaim string) bool {
	claims, ok := Claims(token)
	if !ok {
		return false
	}
	got := FromClaims(claims, groupsClaim)
	if got == nil || p == nil || got.GetSubject() != p.GetSubject() {
		return false
	}
	return sameSet(got.GetGroups(), p.GetGroups())
}

// Claims decodes the claims of a JWT without checking its signature;
// false for anything that is not a JWT of at most MaxToken bytes.
func Claims(token string) (map[string]any, bool) {
	if len(token) > MaxToken {
		return nil, false
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return nil, false
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return nil, false
	}
	var claims map[string]any
	if json.Unmarshal(payload, &claims) != nil || claims == nil {
		return nil, false
	}
	return claims, true
}

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

// sameSet reports whether a and b hold the same strings, ignoring order
// and repeats.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}
