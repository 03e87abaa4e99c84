package console

import (
	"net/http"
	"strconv"
	"time"
)

// maxFormBytes bounds a posted form.
const maxFormBytes = 16 << 10

// readForm parses a posted form of at most maxFormBytes (the ops server
// bounds the time its body takes, opshttp).
func readForm(w http.ResponseWriter, r *http.Request) error {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	return r.ParseForm()
}

// loginData is the login page's content.
type loginData struct {
	CSRF string
	Next string
	// Keys and OIDC say which login methods are offered.
	Keys, OIDC bool
}

// loginPage shows the login forms, with a fresh login cookie (CSRF).
func (c *Console) loginPage(w http.ResponseWriter, r *http.Request) {
	c.showLogin(w, r, http.StatusOK, safeNext(r.URL.Query().Get("next")), "")
}

func (c *Console) showLogin(w http.ResponseWriter, r *http.Request, code int, next, failure string) {
	l, err := c.startLogin(w, r, loginState{})
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	c.render(w, r, code, "login", page{Title: "Log in", Error: failure, Data: loginData{
		CSRF: l.CSRF, Next: next, Keys: len(c.live.Load().operatorKeys) > 0, OIDC: c.oidc.Load() != nil,
	}})
}

// limited takes one login attempt of client, or answers 429 and reports
// true when its attempts are used up.
func (c *Console) limited(w http.ResponseWriter, r *http.Request, client string) bool {
	wait, blocked := c.fails.attempt(client)
	if blocked {
		w.Header().Set("Retry-After", strconv.Itoa(int(wait.Seconds())+1))
		c.showLogin(w, r, http.StatusTooManyRequests, "", "Too many failed logins from this address: wait a minute and try again.")
	}
	return blocked
}

// loginKey checks an operator key posted by the login form.
func (c *Console) loginKey(w http.ResponseWriter, r *http.Request) {
	client := clientOf(r)
	if err := readForm(w, r); err != nil {
		c.showLogin(w, r, http.StatusBadRequest, "", "The form could not be read.")
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	l, ok := c.loginFrom(r)
	if !ok || !tokensEqual(l.CSRF, r.PostForm.Get("csrf")) {
		c.showLogin(w, r, http.StatusForbidden, next, "The login form expired or did not come from this console: try again.")
		return
	}
	// Counted only now, with the form's token: a post any page can make
	// without it must not use up the address's attempts.
	if c.limited(w, r, client) {
		return
	}
	key := r.PostForm.Get("key")
	live := c.live.Load()
	n := 0
	if key != "" {
		n = keyPosition(keyDigest([]byte(key)), live.operatorKeys)
	}
	if n == 0 {
		c.deps.Log.Warn("console: failed login", "method", "key", "client", client)
		c.showLogin(w, r, http.StatusUnauthorized, next, "That is not an operator key.")
		return
	}
	c.fails.succeeded(client)
	operator := keyOperator(n)
	if err := c.startSession(w, r, operator, "key", keyDigest([]byte(key)), live.keyAdmissions[n-1]); err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	c.deps.Log.Info("console: login", "operator", operator, "method", "key", "client", client)
	if next == "" {
		next = "/console/backends"
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the session: the browser's cookie is deleted and the
// session's id revoked until its expiry, so a copy of the cookie no
// longer opens either. The form must carry the session's CSRF token.
func (c *Console) logout(w http.ResponseWriter, r *http.Request, s session) {
	if err := readForm(w, r); err != nil || !tokensEqual(s.CSRF, r.PostForm.Get("csrf")) {
		http.Error(w, "forbidden: the form did not come from this session", http.StatusForbidden)
		return
	}
	setCookie(w, r, sessionCookie, "", 0)
	if !c.revoked.revoke(s.ID, time.Unix(s.Expires, 0)) {
		// Full of live revocations: end every session rather than forget
		// one (a copied cookie must not outlive its logout).
		fresh, err := newSealer()
		if err != nil {
			http.Error(w, "internal error", http.StatusInternalServerError)
			return
		}
		c.sealer.Store(fresh)
		c.revoked.clear()
		c.deps.Log.Warn("console: the revoked sessions are too many to remember; every session ends", "limit", c.revoked.limit)
	}
	c.deps.Log.Info("console: logout", "operator", s.Operator)
	http.Redirect(w, r, "/console/login", http.StatusSeeOther)
}
