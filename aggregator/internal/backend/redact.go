package backend

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/switchboard-mcp/switchboard/services/rawjson"
)

// Redaction. Each client has one redactor, the one place that knows the
// backend's secrets; it cuts them out of what the backend sends back
// before any of it reaches a log, an operator (Status.LastError) or a
// client:
//
//   - the configured credentials: header values (and, from
//     MinRedactedHidden bytes, the credential after a scheme: the token of
//     "Bearer <token>"), the client secret, the URL's user information
//     (user name and password, and the Basic credential the transport makes
//     of them) and its query;
//   - the strings of the tool overrides' hidden argument values
//     (Config.Hidden) of at least MinRedactedHidden bytes: a shorter value
//     ("acme", "eu") would cut the same letters out of unrelated text, and
//     is no secret worth the name;
//   - the last client-credentials token (the aggregator's own, shared by
//     every caller), and the call's own Authorization (its exchanged token).
//
// Error texts and logs (the message and data of a backend's JSON-RPC
// error, a rejection's body, a transport failure, a 401 challenge) lose
// every one of them, the configured credentials whatever their length.
// Results and the notifications relayed for a call are the tool's own
// output, which a short credential ("2", "json") would garble: they lose
// the secrets of at least MinRedactedHidden bytes, and a result marked
// isError the call's own Authorization too. A normal result keeps the
// caller's own exchanged token, which the backend may hand back to the
// caller it belongs to (results are never logged).
//
// A secret is cut out as it is, and as JSON and URL query encoding write
// it. A JSON text (a result, an error's data, a notification) is redacted
// string by string: each string literal holding a secret, once decoded, is
// encoded again with the secret replaced, so the text stays valid JSON and
// nothing else in it changes. A text without any secret is returned as it
// is, byte for byte; finding out costs a scan of the text per secret
// (a few GB/s), so a backend without secrets pays nothing.

// MinRedactedHidden is the length in bytes from which a string of a hidden
// argument's value is redacted, and from which a configured credential is
// redacted from results too.
const MinRedactedHidden = 8

// redactedText replaces a secret.
const redactedText = "[redacted]"

// redactor holds a client's secrets (see above).
type redactor struct {
	// static are the configured secrets.
	static []string
	// tokens is the OAuth token source (nil for none); sets are the secret
	// sets of static and its last client-credentials token.
	tokens *tokenSource
	sets   atomic.Pointer[secretSets]
}

// secretSets are the sets of the static secrets and token.
type secretSets struct {
	token string
	// all are every secret; long those of at least MinRedactedHidden bytes.
	all, long *secretSet
}

// newRedactor is the redactor of a backend with cfg; tokens may be nil.
func newRedactor(cfg Config, tokens *tokenSource) *redactor {
	var static []string
	for _, v := range cfg.Headers {
		static = append(static, v)
		if _, cred, ok := strings.Cut(v, " "); ok && len(strings.TrimSpace(cred)) >= MinRedactedHidden {
			static = append(static, strings.TrimSpace(cred))
		}
	}
	static = append(static, cfg.Auth.ClientSecret)
	if u, err := url.Parse(cfg.URL); err == nil {
		if u.User != nil {
			// The whole user information: a user name alone
			// (https://TOKEN@host) is a credential as much as a password.
			pw, _ := u.User.Password()
			static = append(static, u.User.String(), u.User.Username(), pw,
				base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+pw)))
		}
		static = append(static, u.RawQuery)
	}
	for _, v := range cfg.Hidden {
		if len(v) >= MinRedactedHidden {
			static = append(static, v)
		}
	}
	r := &redactor{static: static, tokens: tokens}
	r.current()
	return r
}

// current are the sets of the configured secrets and the last
// client-credentials token.
func (r *redactor) current() *secretSets {
	tok := ""
	if r.tokens != nil {
		tok = bearer(r.tokens.last())
	}
	if s := r.sets.Load(); s != nil && s.token == tok {
		return s
	}
	values := append(slices.Clip(r.static), tok)
	long := slices.DeleteFunc(slices.Clone(values), func(v string) bool { return len(v) < MinRedactedHidden })
	s := &secretSets{token: tok, all: newSecretSet(values), long: newSecretSet(long)}
	r.sets.Store(s)
	return s
}

// shared is the set a text loses that is no call's own: a log line, a
// failure of the backend's session.
func (r *redactor) shared() *secretSet { return r.current().all }

// forCall is the set a call's error texts lose: every secret, and the
// call's own Authorization.
func (r *redactor) forCall(ctx context.Context) *secretSet {
	return r.current().all.with(bearer(callerAuthorization(ctx)))
}

// forResult is the set a call's result loses: the secrets of at least
// MinRedactedHidden bytes, and for a result marked isError (an error
// text) the call's own Authorization.
func (r *redactor) forResult(ctx context.Context, isError bool) *secretSet {
	set := r.current().long
	if isError {
		set = set.with(bearer(callerAuthorization(ctx)))
	}
	return set
}

// forNotification is the set the notifications relayed for a call lose.
func (r *redactor) forNotification() *secretSet { return r.current().long }

// bearer is the credential of an Authorization value ("Bearer <token>"):
// the token, which the value holds whole.
func bearer(auth string) string {
	if _, tok, ok := strings.Cut(auth, " "); ok {
		return strings.TrimSpace(tok)
	}
	return auth
}

// secretSet is a set of secrets ready to be cut out of texts.
type secretSet struct {
	// values are the secrets as they are, longest first, without repeats.
	values []string
	// text replaces every form of every value; content every value as it
	// is (in a decoded JSON string).
	text, content *strings.Replacer
	// probes are, for each value, its longest run of ASCII letters and
	// digits, which JSON encoders never escape: a JSON text without a
	// value's probe cannot hold the value; "" when it has none.
	probes []string
}

func newSecretSet(values []string) *secretSet {
	values = slices.DeleteFunc(slices.Clone(values), func(v string) bool { return v == "" })
	slices.SortFunc(values, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b)) })
	values = slices.Compact(values)
	s := &secretSet{values: values}
	if len(values) == 0 {
		return s
	}
	var forms, plain []string
	for _, v := range values {
		forms = append(forms, v, jsonForm(v, true), jsonForm(v, false), url.QueryEscape(v))
		plain = append(plain, v, redactedText)
		s.probes = append(s.probes, probeOf(v))
	}
	// At each position the first matching form in argument order wins:
	// longest first, so that a form is cut out whole.
	slices.SortFunc(forms, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b)) })
	forms = slices.Compact(forms)
	var pairs []string
	for _, f := range forms {
		pairs = append(pairs, f, redactedText)
	}
	s.text = strings.NewReplacer(pairs...)
	s.content = strings.NewReplacer(plain...)
	return s
}

// jsonForm is v as it appears inside a JSON string: as encoding/json
// writes it (html: <, > and & escaped), or with the required escapes only.
func jsonForm(v string, html bool) string {
	if html {
		b := rawjson.AppendString(nil, v)
		return string(b[1 : len(b)-1])
	}
	var sb strings.Builder
	enc := json.NewEncoder(&sb)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	out := strings.TrimSuffix(sb.String(), "\n")
	return out[1 : len(out)-1]
}

// probeOf is v's longest run of ASCII letters and digits.
func probeOf(v string) string {
	best, start := "", -1
	for i := 0; i <= len(v); i++ {
		if i < len(v) && isAlnum(v[i]) {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 && i-start > len(best) {
			best = v[start:i]
		}
		start = -1
	}
	return best
}

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// with is the set and tok ("" adds nothing).
func (s *secretSet) with(tok string) *secretSet {
	if tok == "" || slices.Contains(s.values, tok) {
		return s
	}
	return newSecretSet(append(slices.Clip(s.values), tok))
}

// empty reports whether the set cuts nothing.
func (s *secretSet) empty() bool { return len(s.values) == 0 }

// redactText cuts every form of every secret out of a text.
func (s *secretSet) redactText(msg string) string {
	if s.empty() {
		return msg
	}
	return s.text.Replace(msg)
}

// redactJSON cuts every secret out of the strings of a JSON text, which
// stays valid JSON; a text holding none is returned as it is. A text that
// is not JSON is redacted as a plain text.
func (s *secretSet) redactJSON(text string) string {
	if s.empty() || !s.mayHold(text) {
		return text
	}
	var out []byte // nil until a string changes
	last := 0
	for i := 0; i < len(text); {
		j := strings.IndexByte(text[i:], '"')
		if j < 0 {
			break
		}
		start := i + j
		end, escaped := rawjson.StringEnd(text, start)
		if end < 0 {
			return s.redactText(text)
		}
		content := text[start+1 : end-1]
		if escaped {
			var decoded string
			if json.Unmarshal([]byte(text[start:end]), &decoded) != nil {
				return s.redactText(text)
			}
			content = decoded
		}
		if s.holds(content) {
			out = append(out, text[last:start]...)
			out = rawjson.AppendString(out, s.content.Replace(content))
			last = end
		}
		i = end
	}
	if out == nil {
		return text
	}
	return string(append(out, text[last:]...))
}

// mayHold reports whether a JSON text may hold a secret in any of its
// strings: it holds a secret's probe or, for a secret without one, the
// secret itself or any escape.
func (s *secretSet) mayHold(text string) bool {
	escapes := -1
	for i, v := range s.values {
		if p := s.probes[i]; p != "" {
			if strings.Contains(text, p) {
				return true
			}
			continue
		}
		if strings.Contains(text, v) {
			return true
		}
		if escapes < 0 {
			escapes = 0
			if strings.IndexByte(text, '\\') >= 0 {
				escapes = 1
			}
		}
		if escapes == 1 {
			return true
		}
	}
	return false
}

// holds reports whether a decoded string holds a secret.
func (s *secretSet) holds(content string) bool {
	for _, v := range s.values {
		if strings.Contains(content, v) {
			return true
		}
	}
	return false
}
