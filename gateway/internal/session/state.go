package session

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"strings"
	"time"

	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// Request state of multi-round-trip (input_required) results is opaque to
// the client but attacker-controlled on its way back. The gateway seals a
// backend's requestState with the same key as sessions (under a different
// purpose), bound to the principal, the request it answers and an expiry, so
// a state cannot be forged, replayed by another principal, or moved to
// another tool; the backend only ever sees states it issued itself.

// stateVersion prefixes every sealed request state.
const stateVersion = "r1."

var stateAdditionalData = []byte("switchboard/request-state/v1")

type stateClaims struct {
	PrincipalDigest string `json:"p"`
	// Binding names the request the state belongs to ("tools/call\x00<name>").
	Binding   string `json:"b"`
	State     string `json:"s"`
	ExpiresAt int64  `json:"exp"`
}

// SealState wraps a backend's request state for principal and binding,
// valid for ttl.
func (s *Sealer) SealState(principal *commonv1.Principal, binding, state string, ttl time.Duration) (string, error) {
	plain, err := json.Marshal(stateClaims{PrincipalDigest: PrincipalDigest(principal), Binding: binding, State: state,
		ExpiresAt: s.now().Add(ttl).Unix()})
	if err != nil {
		return "", err
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	return stateVersion + base64.RawURLEncoding.EncodeToString(s.aead.Seal(nonce, nonce, plain, stateAdditionalData)), nil
}

// OpenState returns the backend's request state if sealed is valid for
// principal and binding and has not expired. Every failure is ErrInvalid.
func (s *Sealer) OpenState(principal *commonv1.Principal, binding, sealed string) (string, error) {
	body, ok := strings.CutPrefix(sealed, stateVersion)
	if !ok {
		return "", ErrInvalid
	}
	raw, err := base64.RawURLEncoding.DecodeString(body)
	ns := s.aead.NonceSize()
	if err != nil || len(raw) < ns+s.aead.Overhead() {
		return "", ErrInvalid
	}
	plain, err := s.aead.Open(nil, raw[:ns], raw[ns:], stateAdditionalData)
	if err != nil {
		return "", ErrInvalid
	}
	var c stateClaims
	if json.Unmarshal(plain, &c) != nil ||
		subtle.ConstantTimeCompare([]byte(c.PrincipalDigest), []byte(PrincipalDigest(principal))) != 1 ||
		c.Binding != binding || !s.now().Before(time.Unix(c.ExpiresAt, 0)) {
		return "", ErrInvalid
	}
	return c.State, nil
}
