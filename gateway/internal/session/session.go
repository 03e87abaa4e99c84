// Package session mints and opens Legacy (2025-11-25) MCP session ids.
//
// A session id is not a key into server-side state: it is the session
// itself, sealed with AES-256-GCM under a key every gateway replica shares.
// Any replica can open it, so Legacy clients need no sticky routing and no
// session store. The sealed claims bind the session to the principal that
// created it; a different principal presenting the id is treated exactly like
// an unknown session. Deleting a session is recorded as a revocation (see
// Revocations), because a sealed token cannot be forgotten by one replica
// alone.
package session

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/switchboard-mcp/switchboard/gateway/internal/seal"
	commonv1 "github.com/switchboard-mcp/switchboard/services/gen/switchboard/common/v1"
)

// ErrInvalid means the id does not open, has expired, or belongs to another
// principal. Callers must not tell these cases apart on the wire.
var ErrInvalid = errors.New("invalid session")

// sealVersion prefixes every id so the format can change without ambiguity.
const sealVersion = "s1."

// additionalData binds the ciphertext to its purpose, so a value sealed
// elsewhere with the same key cannot be replayed as a session.
var additionalData = []byte("switchboard/legacy-session/v1")

// Claims is what a replica needs to serve a session.
type Claims struct {
	// PrincipalDigest identifies the principal the session belongs to.
	PrincipalDigest string `json:"p"`
	// ProtocolVersion is the negotiated Legacy version.
	ProtocolVersion string `json:"v"`
	// ClientCapabilities is the client's declared capabilities (JSON).
	ClientCapabilities json.RawMessage `json:"c,omitempty"`
	// Server is the virtual server the session was opened on ("" for the
	// whole catalog): the session is good at that server's endpoints only.
	Server    string `json:"s,omitempty"`
	IssuedAt  int64  `json:"iat"`
	ExpiresAt int64  `json:"exp"`
}

// Expiry returns when the session ends.
func (c Claims) Expiry() time.Time { return time.Unix(c.ExpiresAt, 0) }

// Sealer seals and opens session ids.
type Sealer struct {
	key *seal.Key
	ttl time.Duration
	now func() time.Time
	// opened remembers the claims of ids that opened (decrypted and
	// decoded), by the exact id: every request of a Legacy session carries
	// the same one, and opening it again (base64, AES-GCM, JSON) was a
	// tenth of the gateway's work per call. Only the decryption is
	// skipped: the principal and the expiry are checked on every Open.
	openedMu sync.Mutex
	opened   map[string]Claims
}

// maxOpened bounds the ids a Sealer remembers (a few hundred bytes each).
const maxOpened = 4096

// NewSealer builds a sealer from a base64 32-byte key; an empty key makes a
// random one (a single replica only: ids do not survive a restart).
func NewSealer(key string, ttl time.Duration) (*Sealer, error) {
	if key == "" {
		k, err := seal.Random()
		if err != nil {
			return nil, err
		}
		return &Sealer{key: k, ttl: ttl, now: time.Now}, nil
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(key))
	if err != nil {
		return nil, fmt.Errorf("gateway.sessions.key: not base64: %w", err)
	}
	if len(raw) != seal.KeyBytes {
		return nil, fmt.Errorf("gateway.sessions.key: want %d bytes, got %d", seal.KeyBytes, len(raw))
	}
	k, err := seal.New(raw)
	if err != nil {
		return nil, err
	}
	return &Sealer{key: k, ttl: ttl, now: time.Now}, nil
}

// Mint creates a session id for principal on the virtual server named
// server ("" for the whole catalog).
func (s *Sealer) Mint(principal *commonv1.Principal, server, version string, clientCaps json.RawMessage) (string, Claims, error) {
	now := s.now()
	c := Claims{
		Server:             server,
		PrincipalDigest:    PrincipalDigest(principal),
		ProtocolVersion:    version,
		ClientCapabilities: clientCaps,
		IssuedAt:           now.Unix(),
		ExpiresAt:          now.Add(s.ttl).Unix(),
	}
	plain, err := json.Marshal(c)
	if err != nil {
		return "", Claims{}, err
	}
	sealed, err := s.key.Seal(plain, additionalData)
	if err != nil {
		return "", Claims{}, err
	}
	return sealVersion + base64.RawURLEncoding.EncodeToString(sealed), c, nil
}

// Open verifies id and returns its claims if it belongs to principal and has
// not expired. Every failure is ErrInvalid. Only the spelling Mint wrote
// opens (see decodeCanonical): a deleted session is recorded under the
// digest of its id, so any other spelling of the same sealed bytes would be
// a session that was never deleted.
func (s *Sealer) Open(id string, principal *commonv1.Principal) (Claims, error) {
	c, err := s.decrypt(id)
	if err != nil {
		return Claims{}, err
	}
	if subtle.ConstantTimeCompare([]byte(c.PrincipalDigest), []byte(PrincipalDigest(principal))) != 1 {
		return Claims{}, ErrInvalid
	}
	if !s.now().Before(c.Expiry()) {
		return Claims{}, ErrInvalid
	}
	return c, nil
}

// decrypt is the claims sealed in id, from the ids opened before when it
// is one of them.
func (s *Sealer) decrypt(id string) (Claims, error) {
	s.openedMu.Lock()
	c, ok := s.opened[id]
	s.openedMu.Unlock()
	if ok {
		return c, nil
	}
	body, ok := strings.CutPrefix(id, sealVersion)
	if !ok {
		return Claims{}, ErrInvalid
	}
	sealed, ok := decodeCanonical(body)
	if !ok {
		return Claims{}, ErrInvalid
	}
	plain, err := s.key.Open(sealed, additionalData)
	if err != nil {
		return Claims{}, ErrInvalid
	}
	if err := json.Unmarshal(plain, &c); err != nil {
		return Claims{}, ErrInvalid
	}
	s.openedMu.Lock()
	if s.opened == nil {
		s.opened = make(map[string]Claims)
	}
	if len(s.opened) >= maxOpened {
		// Any one makes room: a forgotten id only costs one decryption.
		for k := range s.opened {
			delete(s.opened, k)
			break
		}
	}
	s.opened[id] = c
	s.openedMu.Unlock()
	return c, nil
}

// decodeCanonical decodes unpadded base64url that is spelled exactly as the
// encoder writes it. A lenient decoder accepts other spellings of the same
// bytes: non-zero unused bits in the last character (Strict refuses those)
// and line breaks anywhere (which even Strict skips), so the text is also
// encoded again and compared.
func decodeCanonical(text string) ([]byte, bool) {
	raw, err := base64.RawURLEncoding.Strict().DecodeString(text)
	if err != nil || base64.RawURLEncoding.EncodeToString(raw) != text {
		return nil, false
	}
	return raw, true
}

// PrincipalDigest is a stable digest of a principal (subject and the set of
// groups), so the sealed id does not carry the identity in clear.
func PrincipalDigest(p *commonv1.Principal) string {
	groups := p.GetGroups()
	if !slices.IsSorted(groups) {
		groups = slices.Sorted(slices.Values(groups))
	}
	// Length-prefix each field so distinct principals never collide:
	// "len:subject", then "|len:group" for each group. Every Legacy
	// request computes it, so it is written into one buffer, not
	// formatted.
	subject := p.GetSubject()
	var buf [256]byte
	b := strconv.AppendInt(buf[:0], int64(len(subject)), 10)
	b = append(append(b, ':'), subject...)
	for _, g := range groups {
		b = strconv.AppendInt(append(b, '|'), int64(len(g)), 10)
		b = append(append(b, ':'), g...)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// IDDigest is the SHA-256 of a session id, hex: what the revocation store
// sees, so the id itself never leaves the gateway.
func IDDigest(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])
}
