package session

import (
	"encoding/base64"
	"encoding/json"
	"time"
)

// The ids of the input requests (elicitation, sampling, roots) a replica
// sends a Legacy client on a request's stream are sealed, with the same key
// as sessions under another purpose and bound to the session: they carry
// the replica that waits for the answer and when it stops waiting. A
// replica that receives an answer it does not wait for can so tell, without
// asking anyone, whether the id is one a replica issued to this very
// session (a client cannot make one up, nor answer another session's, and
// so not another principal's), and where to relay it (Shared.Relay).

// inputIDVersion prefixes every sealed input request id.
const inputIDVersion = "i1."

var inputIDPurpose = "switchboard/input-request-id/v1|"

type inputIDClaims struct {
	// Owner is the replica that waits for the answer.
	Owner string `json:"o"`
	// ExpiresAt is when it stops waiting, in unix seconds.
	ExpiresAt int64 `json:"exp"`
}

// SealInputRequestID makes the JSON-RPC id (a JSON string) of an input
// request owner sends on one of session's streams and waits for until
// expires.
func (s *Sealer) SealInputRequestID(session, owner string, expires time.Time) (json.RawMessage, error) {
	plain, err := json.Marshal(inputIDClaims{Owner: owner, ExpiresAt: expires.Unix()})
	if err != nil {
		return nil, err
	}
	sealed, err := s.key.Seal(plain, []byte(inputIDPurpose+session))
	if err != nil {
		return nil, err
	}
	return json.Marshal(inputIDVersion + base64.RawURLEncoding.EncodeToString(sealed))
}

// OpenInputRequestID returns the owner of an input request id of session,
// and when it stops waiting. An id that is not a string, not sealed for
// this session, or past its wait is ErrInvalid.
func (s *Sealer) OpenInputRequestID(session string, id json.RawMessage) (owner string, expires time.Time, err error) {
	var text string
	if json.Unmarshal(id, &text) != nil || len(text) > 512 || len(text) < len(inputIDVersion) || text[:len(inputIDVersion)] != inputIDVersion {
		return "", time.Time{}, ErrInvalid
	}
	raw, ok := decodeCanonical(text[len(inputIDVersion):])
	if !ok {
		return "", time.Time{}, ErrInvalid
	}
	plain, err := s.key.Open(raw, []byte(inputIDPurpose+session))
	if err != nil {
		return "", time.Time{}, ErrInvalid
	}
	var c inputIDClaims
	if json.Unmarshal(plain, &c) != nil || c.Owner == "" {
		return "", time.Time{}, ErrInvalid
	}
	expires = time.Unix(c.ExpiresAt, 0)
	if !s.now().Before(expires) {
		return "", time.Time{}, ErrInvalid
	}
	return c.Owner, expires, nil
}
