package console

import (
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"sync"
	"time"
)

// maxRevoked bounds the session ids logout remembers. Each is kept until
// its session would have expired anyway; when the set is full of live
// ones, the console rotates its sealing key instead (every session ends,
// everyone logs in again) rather than forget a revocation.
const maxRevoked = 4096

// revocations are the ids of sessions logged out before their expiry. Like
// the sessions (sealed with the process's key), they are the replica's
// own: a logout on one replica does not end a copy of the cookie used on
// another, which could not open it anyway.
type revocations struct {
	mu    sync.Mutex
	ids   map[string]time.Time // id -> the session's expiry
	limit int
}

func newRevocations(limit int) *revocations {
	return &revocations{ids: map[string]time.Time{}, limit: limit}
}

// revoke records id until expires. It reports false when the set is full
// of unexpired ids: the caller must then end every session (rotate the
// sealing key), after which the set is cleared.
func (v *revocations) revoke(id string, expires time.Time) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	now := time.Now()
	if len(v.ids) >= v.limit {
		for k, exp := range v.ids {
			if !now.Before(exp) {
				delete(v.ids, k)
			}
		}
	}
	if len(v.ids) >= v.limit {
		return false
	}
	v.ids[id] = expires
	return true
}

func (v *revocations) revoked(id string) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	_, ok := v.ids[id]
	return ok
}

// clear forgets every id: the sessions they named no longer open.
func (v *revocations) clear() {
	v.mu.Lock()
	clear(v.ids)
	v.mu.Unlock()
}

// keyDigest is what a key session carries of the operator key it was made
// with: the key's SHA-256, so the cookie (sealed anyway) never holds the
// key itself.
func keyDigest(key []byte) []byte {
	d := sha256.Sum256(key)
	return d[:]
}

// keyPosition is the 1-based position among the live operator keys of
// the key whose digest this is, or 0 for none. Every key is compared, as
// SHA-256 digests in constant time, so the time taken tells neither which
// key nor how much of one matched, nor its length.
func keyPosition(digest []byte, keys [][]byte) int {
	if len(digest) != sha256.Size {
		return 0
	}
	match := 0
	for i, k := range keys {
		eq := subtle.ConstantTimeCompare(digest, keyDigest(k))
		match = subtle.ConstantTimeSelect(eq, i+1, match)
	}
	return match
}

// keyAdmission is the admission of operator key k in the configuration
// after prev (nil: the first): its number in prev, or a new one.
func (c *Console) keyAdmission(prev *liveConfig, k []byte) uint64 {
	if prev != nil {
		for i, p := range prev.operatorKeys {
			if bytes.Equal(p, k) {
				return prev.keyAdmissions[i]
			}
		}
	}
	return c.admissions.Add(1)
}

// oidcInForce is the OIDC login in force with its admission.
type oidcInForce struct {
	*OIDCLogin
	admission uint64
}

// keyOperator names the operator of a key session: by the key's position
// among the live keys when the name is used, so that a reload that
// reorders the keys never leaves a session named for another's key; the
// key itself is never shown.
func keyOperator(position int) string { return fmt.Sprintf("operator key %d", position) }
