package session

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// Request state of multi-round-trip (input_required) results is opaque to
// the client but attacker-controlled on its way back. The gateway seals a
// backend's requestState with the same key as sessions (under a different
// purpose), bound to the principal, the request it answers (method, target
// and arguments: see RequestBinding) and an expiry, with a one-time id, so
// a state cannot be forged, replayed by another principal, moved to
// another tool or other arguments, and (see StateUses) not used twice;
// the backend only ever sees states it issued itself.

// stateVersion prefixes every sealed request state.
const stateVersion = "r1."

var stateAdditionalData = []byte("switchboard/request-state/v1")

type stateClaims struct {
	PrincipalDigest string `json:"p"`
	// Binding is the RequestBinding of the request the state belongs to.
	Binding string `json:"b"`
	State   string `json:"s"`
	// ID is the state's one-time id: a retry uses it up.
	ID        string `json:"i"`
	ExpiresAt int64  `json:"exp"`
}

// OpenedState is what a valid sealed state carries.
type OpenedState struct {
	// State is the backend's own request state.
	State string
	// ID is the one-time id, to be consumed (StateUses) before the state
	// is used.
	ID        string
	ExpiresAt time.Time
}

// RequestBinding names one request for a sealed state: the digest of the
// virtual server it was sent to ("" for the whole catalog: the same tool
// name may be another tool, with other fixed arguments, in another
// server), its method, its target (tool or prompt name, resource URI) and
// its arguments in canonical JSON (keys sorted, no insignificant space),
// so a client that re-encodes the same arguments for its retry still
// matches, and other arguments do not. Absent and null arguments are the
// same.
func RequestBinding(server, method, target string, arguments json.RawMessage) string {
	h := sha256.New()
	// Length prefixes keep the fields apart.
	if server != "" {
		fmt.Fprintf(h, "server %d:%s|", len(server), server)
	}
	fmt.Fprintf(h, "%d:%s|%d:%s|", len(method), method, len(target), target)
	h.Write(canonicalJSON(arguments))
	return hex.EncodeToString(h.Sum(nil))
}

// canonicalJSON re-encodes raw with sorted keys and numbers as written;
// text that does not decode is taken as it is.
func canonicalJSON(raw json.RawMessage) []byte {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return raw
	}
	out, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return out
}

// SealState wraps a backend's request state for principal and binding
// (RequestBinding), valid for ttl, with a fresh one-time id.
func (s *Sealer) SealState(principal *commonv1.Principal, binding, state string, ttl time.Duration) (string, error) {
	id := make([]byte, 16)
	if _, err := rand.Read(id); err != nil {
		return "", err
	}
	plain, err := json.Marshal(stateClaims{PrincipalDigest: PrincipalDigest(principal), Binding: binding, State: state,
		ID: hex.EncodeToString(id), ExpiresAt: s.now().Add(ttl).Unix()})
	if err != nil {
		return "", err
	}
	sealed, err := s.key.Seal(plain, stateAdditionalData)
	if err != nil {
		return "", err
	}
	return stateVersion + base64.RawURLEncoding.EncodeToString(sealed), nil
}

// OpenState returns what sealed carries if it is valid for principal and
// binding and has not expired. Every failure is ErrInvalid. It does not
// use the state up: see StateUses.
func (s *Sealer) OpenState(principal *commonv1.Principal, binding, sealed string) (OpenedState, error) {
	body, ok := strings.CutPrefix(sealed, stateVersion)
	if !ok {
		return OpenedState{}, ErrInvalid
	}
	// One spelling, as for session ids: the record of used states is keyed
	// by the state's id, but no other spelling of a state should open.
	raw, canonical := decodeCanonical(body)
	if !canonical {
		return OpenedState{}, ErrInvalid
	}
	plain, err := s.key.Open(raw, stateAdditionalData)
	if err != nil {
		return OpenedState{}, ErrInvalid
	}
	var c stateClaims
	if json.Unmarshal(plain, &c) != nil ||
		subtle.ConstantTimeCompare([]byte(c.PrincipalDigest), []byte(PrincipalDigest(principal))) != 1 ||
		c.Binding != binding || c.ID == "" || !s.now().Before(time.Unix(c.ExpiresAt, 0)) {
		return OpenedState{}, ErrInvalid
	}
	return OpenedState{State: c.State, ID: c.ID, ExpiresAt: time.Unix(c.ExpiresAt, 0)}, nil
}
