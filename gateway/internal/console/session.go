package console

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/switchboard-mcp/switchboard/gateway/internal/seal"
)

// Cookies. Both are sealed (AES-256-GCM) with the process's key, so a
// client can neither read nor forge nor alter them, and both are scoped to
// the console's path.
const (
	// sessionCookie carries a logged-in operator's session.
	sessionCookie = "switchboard_console"
	// loginCookie carries the CSRF token of the login form, and during an
	// OIDC login its state, nonce and PKCE verifier.
	loginCookie = "switchboard_console_login"
	cookiePath  = "/console/"
	// maxCookieBytes bounds a cookie value the console will try to open.
	maxCookieBytes = 4096
	// loginTTL bounds how long a login form (or an OIDC round trip) may
	// take.
	loginTTL = 10 * time.Minute
)

// Purposes are bound into each seal as associated data, so a sealed value
// made for one cookie cannot be replayed as the other.
const (
	purposeSession = "switchboard-console-session"
	purposeLogin   = "switchboard-console-login"
)

// session is what the session cookie holds.
type session struct {
	// Operator names who logged in: "operator key N" or the OIDC subject.
	Operator string `json:"op"`
	// Method is "key" or "oidc".
	Method string `json:"m"`
	// CSRF is the token every POST form of the session carries.
	CSRF    string `json:"csrf"`
	Expires int64  `json:"exp"`
	// ID names the session for logout's revocation.
	ID string `json:"id"`
	// Key is the SHA-256 of the operator key a key session was made with:
	// the session opens only while that key is a live one, so a key a
	// reload removes ends its sessions at once. Of an OIDC session, it is
	// the digest of the login that admitted it (OIDCLogin.admits): the
	// session opens only while a login with the same provider, client,
	// groups claim and operator group is in force, so a reload that
	// changes one of them, or removes the OIDC login, ends it at once.
	Key []byte `json:"k,omitempty"`
	// Admission is that key's or login's admission when the session was
	// made: the session opens only while it is the same
	// (Console.admissions).
	Admission uint64 `json:"a"`
}

// loginState is what the login cookie holds.
type loginState struct {
	CSRF    string `json:"csrf"`
	Expires int64  `json:"exp"`
	// OIDC round trip: the state and nonce sent to the provider, the PKCE
	// verifier, and where to go afterwards.
	State    string `json:"st,omitempty"`
	Nonce    string `json:"n,omitempty"`
	Verifier string `json:"v,omitempty"`
	Next     string `json:"next,omitempty"`
}

// sealer seals and opens cookie values (package seal). Its key is random
// per process (see New), and replaced when logout's revocations are full
// (see revocations): sessions end when the gateway restarts and hold on
// the replica that made them, which suits a console reached on one pod's
// ops port, and no key has to be distributed or rotated.
type sealer struct {
	key *seal.Key
}

func newSealer() (*sealer, error) {
	key, err := seal.Random()
	if err != nil {
		return nil, err
	}
	return &sealer{key: key}, nil
}

func (s *sealer) seal(purpose string, v any) (string, error) {
	plain, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	sealed, err := s.key.Seal(plain, []byte(purpose))
	if err != nil {
		return "", err
	}
	return base64.RawURLEncoding.EncodeToString(sealed), nil
}

var errBadSeal = errors.New("console: cookie does not open")

// errSessionTooLarge: the session's cookie would pass maxCookieBytes (name
// and value, a browser's limit), which only a very long OIDC subject
// makes.
var errSessionTooLarge = errors.New("console: the session cookie would be too large")

func (s *sealer) open(purpose, value string, v any) error {
	if value == "" || len(value) > maxCookieBytes {
		return errBadSeal
	}
	raw, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil {
		return errBadSeal
	}
	plain, err := s.key.Open(raw, []byte(purpose))
	if err != nil {
		return errBadSeal
	}
	if json.Unmarshal(plain, v) != nil {
		return errBadSeal
	}
	return nil
}

// randomToken is 32 random bytes, base64url.
func randomToken() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic("console: no randomness: " + err.Error())
	}
	return base64.RawURLEncoding.EncodeToString(b)
}

// tokensEqual compares two tokens in constant time; empty never matches.
func tokensEqual(a, b string) bool {
	return a != "" && b != "" && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

// setCookie writes a console cookie: HttpOnly, SameSite=Strict, on the
// console's path, Secure when the request came over HTTPS. maxAge 0
// deletes it.
func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge time.Duration) {
	c := &http.Cookie{
		Name: name, Value: value, Path: cookiePath,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil,
	}
	if maxAge > 0 {
		c.MaxAge = int(maxAge / time.Second)
		c.Expires = time.Now().Add(maxAge)
	} else {
		c.MaxAge = -1
	}
	http.SetCookie(w, c)
}

// sessionFrom returns the request's valid, unexpired, unrevoked session;
// a key session's key must still be a live operator key, an OIDC
// session's login still in force, under the session's admission.
func (c *Console) sessionFrom(r *http.Request) (session, bool) {
	ck, err := r.Cookie(sessionCookie)
	if err != nil {
		return session{}, false
	}
	var s session
	if c.sealer.Load().open(purposeSession, ck.Value, &s) != nil || s.CSRF == "" || s.Operator == "" || s.ID == "" {
		return session{}, false
	}
	if time.Now().Unix() >= s.Expires || c.revoked.revoked(s.ID) {
		return session{}, false
	}
	switch s.Method {
	case "key":
		l := c.live.Load()
		n := keyPosition(s.Key, l.operatorKeys)
		if n == 0 || l.keyAdmissions[n-1] != s.Admission {
			return session{}, false
		}
		s.Operator = keyOperator(n)
	case "oidc":
		if o := c.oidc.Load(); o == nil || !bytes.Equal(s.Key, o.admits) || o.admission != s.Admission {
			return session{}, false
		}
	default:
		return session{}, false
	}
	return s, true
}

// startSession sets the session cookie for operator; key is the digest
// of a key session's operator key, or of an OIDC session's login, and
// admission its admission.
func (c *Console) startSession(w http.ResponseWriter, r *http.Request, operator, method string, key []byte, admission uint64) error {
	ttl := c.sessionTTL
	v, err := c.sealer.Load().seal(purposeSession, session{Operator: operator, Method: method, CSRF: randomToken(), ID: randomToken(),
		Key: key, Admission: admission, Expires: time.Now().Add(ttl).Unix()})
	if err != nil {
		return err
	}
	if len(sessionCookie)+1+len(v) > maxCookieBytes {
		return errSessionTooLarge
	}
	setCookie(w, r, sessionCookie, v, ttl)
	setCookie(w, r, loginCookie, "", 0)
	return nil
}

// loginFrom returns the request's valid login state.
func (c *Console) loginFrom(r *http.Request) (loginState, bool) {
	ck, err := r.Cookie(loginCookie)
	if err != nil {
		return loginState{}, false
	}
	var l loginState
	if c.sealer.Load().open(purposeLogin, ck.Value, &l) != nil || l.CSRF == "" || time.Now().Unix() >= l.Expires {
		return loginState{}, false
	}
	return l, true
}

// startLogin sets a fresh login cookie and returns its state.
func (c *Console) startLogin(w http.ResponseWriter, r *http.Request, l loginState) (loginState, error) {
	l.CSRF = randomToken()
	l.Expires = time.Now().Add(loginTTL).Unix()
	v, err := c.sealer.Load().seal(purposeLogin, l)
	if err != nil {
		return l, err
	}
	setCookie(w, r, loginCookie, v, loginTTL)
	return l, nil
}
