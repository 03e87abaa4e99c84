package backend

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"slices"
	"strings"

	"github.com/switchboard-mcp/switchboard/aggregator/internal/stdio"
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
//     of them), its query and what the environment wrote into its path
//     (pathSecrets: a key there);
//   - the strings of the tool overrides' hidden argument values
//     (Config.Hidden) of at least MinRedactedHidden bytes: a shorter value
//     ("acme", "eu") would cut the same letters out of unrelated text, and
//     is no secret worth the name;
//   - the last client-credentials token issued (the aggregator's own,
//     shared by every caller), and the call's own Authorization: a
//     client-credentials token (the aggregator's own too, and not always
//     the last one: a refresh may come between, or a token endpoint that
//     gives no expiry a new token to every call) or a caller's exchanged
//     token.
//
// Error texts and logs (the message and data of a backend's JSON-RPC
// error, a rejection's body, a transport failure, a 401 challenge) lose
// every one of them, the configured credentials whatever their length.
// Results and the notifications relayed for a call are the tool's own
// output, which a short credential ("2", "json") would garble: they lose
// the secrets of at least MinRedactedHidden bytes, the client-credentials
// tokens (the last one and the call's own) and, from a result marked
// isError, a caller's exchanged token too. A normal result keeps the
// caller's own exchanged token, which the backend may hand back to the
// caller it belongs to (results are never logged).
// Listings lose what a normal result loses (listKind), before they are
// decoded: they go to every client, the indexer and the pinning digests.
//
// A secret is cut out as it is, as URL query, path-segment and path
// encoding write it, and as JSON writes each of these. A JSON text (a result, an error's
// data, a notification) is redacted string by string: each string literal
// holding a secret, once decoded, is encoded again with the secret
// replaced, so the text stays valid JSON and nothing else in it changes.
// A text without any secret is returned as it is, byte for byte; finding
// out costs a scan of the text per secret (a few GB/s), so a backend
// without secrets pays nothing.
//
// The configured secrets are prepared once (secretSet). The tokens change
// (per call, per refresh): a text is first scanned for each one's probe,
// and a set holding the token is built only for a text that may hold it,
// so a call whose backend quotes no token pays a scan, not a set.

// MinRedactedHidden is the length in bytes from which a string of a hidden
// argument's value is redacted, and from which a configured credential is
// redacted from results too.
const MinRedactedHidden = 8

// redactedText replaces a secret.
const redactedText = "[redacted]"

// redactor holds a client's secrets (see above).
type redactor struct {
	// all are the configured secrets; long those of at least
	// MinRedactedHidden bytes.
	all, long *secretSet
	// inURL are the secrets of the URL's path (pathSecrets).
	inURL *secretSet
	// tokens is the client-credentials token source (nil for none), whose
	// last token every text loses.
	tokens *tokenSource
	// ownIsShared: the call's own Authorization is the aggregator's own
	// (clientCredentials), which results and notifications lose too.
	ownIsShared bool
}

// newRedactor is the redactor of a backend with cfg; tokens may be nil.
func newRedactor(cfg Config, tokens *tokenSource) *redactor {
	var static []string
	for _, v := range cfg.Headers {
		static = append(static, v)
		scheme, cred, ok := strings.Cut(v, " ")
		if cred = strings.TrimSpace(cred); !ok || len(cred) < MinRedactedHidden {
			continue
		}
		static = append(static, cred)
		if decoded, err := base64.StdEncoding.DecodeString(cred); err == nil && strings.EqualFold(scheme, "Basic") {
			// A Basic credential's password, which a backend may quote
			// decoded ("wrong password ..."), as the URL's is cut.
			if _, pw, ok := strings.Cut(string(decoded), ":"); ok && len(pw) >= MinRedactedHidden {
				static = append(static, string(decoded), pw)
			}
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
		// And each value of MinRedactedHidden bytes or more on its own,
		// as written and decoded: a backend that names the key it got
		// (?api_key=...) quotes the value, not the query. Shorter values
		// (region=eu) stay, or every "eu" of every text would go.
		for _, pair := range strings.Split(u.RawQuery, "&") {
			_, raw, _ := strings.Cut(pair, "=")
			decoded, err := url.QueryUnescape(raw)
			if err != nil {
				decoded = raw
			}
			if len(decoded) >= MinRedactedHidden {
				static = append(static, raw, decoded)
			}
		}
	}
	inPath := pathSecrets(cfg.URL, cfg.URLFromEnvironment)
	static = append(static, inPath...)
	for _, v := range cfg.Hidden {
		if len(v) >= MinRedactedHidden {
			static = append(static, v)
		}
	}
	// A stdio server's credentials are in its environment.
	static = append(static, stdio.SecretEnv(cfg.Env, MinRedactedHidden)...)
	long := slices.DeleteFunc(slices.Clone(static), func(v string) bool { return len(v) < MinRedactedHidden })
	r := &redactor{all: newSecretSet(static), long: newSecretSet(long), inURL: newSecretSet(inPath)}
	if cfg.Auth.Mode == AuthClientCredentials {
		r.tokens, r.ownIsShared = tokens, true
	}
	return r
}

// shared is what a text loses that is no call's own: a log line, a
// failure of the backend's session.
func (r *redactor) shared() redaction {
	return redaction{set: r.all, tokens: r.tokens}
}

// forCall is what a call's error texts lose: every secret, and the call's
// own Authorization.
func (r *redactor) forCall(ctx context.Context) redaction {
	return redaction{set: r.all, tokens: r.tokens, own: callerCredential(ctx)}
}

// forResult is what a call's result loses: the secrets of at least
// MinRedactedHidden bytes, the client-credentials tokens (the last one and
// the call's own), and for a result marked isError (an error text) the
// call's own Authorization whatever it is.
func (r *redactor) forResult(ctx context.Context, isError bool) redaction {
	d := redaction{set: r.long, tokens: r.tokens}
	if isError || r.ownIsShared {
		d.own = callerCredential(ctx)
	}
	return d
}

// forNotification is what the notifications relayed for the call in ctx
// lose: what its normal result loses.
func (r *redactor) forNotification(ctx context.Context) redaction {
	return r.forResult(ctx, false)
}

// bearer is the credential of an Authorization value ("Bearer <token>"):
// the token, which the value holds whole.
func bearer(auth string) string {
	if _, tok, ok := strings.Cut(auth, " "); ok {
		return strings.TrimSpace(tok)
	}
	return auth
}

// redaction is what a text loses: a prepared set, the last
// client-credentials token of tokens (nil for none) and own's
// Authorization (nil for none). The tokens join the set only for a text
// holding their probe.
type redaction struct {
	set    *secretSet
	tokens *tokenSource
	own    *callerCred
}

// lastAndOwn are the tokens ("" for none).
func (d redaction) lastAndOwn() (last, own string) {
	if d.tokens != nil {
		last = bearer(d.tokens.last())
	}
	if d.own != nil {
		own = bearer(d.own.authorization)
	}
	return last, own
}

// empty reports whether the redaction cuts nothing.
func (d redaction) empty() bool {
	last, own := d.lastAndOwn()
	return d.set.empty() && last == "" && own == ""
}

// redactText cuts every form of every secret out of a text.
func (d redaction) redactText(msg string) string {
	set := d.set
	if d.tokens != nil || d.own != nil {
		set = d.setFor(msg)
	}
	return set.redactText(msg)
}

// redactJSON cuts every secret out of the strings of a JSON text (see
// secretSet.redactJSON).
func (d redaction) redactJSON(text string) string {
	set := d.set
	if d.tokens != nil || d.own != nil {
		set = d.setFor(text)
	}
	return set.redactJSON(text)
}

// setFor is the set that text loses: the prepared set, and the tokens text
// may hold (any form of a token holds its probe, JSON-escaped or not).
func (d redaction) setFor(text string) *secretSet {
	last, own := d.lastAndOwn()
	if own == last {
		own = ""
	}
	var found [2]string
	n := 0
	for _, tok := range [2]string{last, own} {
		if tok == "" {
			continue
		}
		if p := probeOf(tok); p == "" || strings.Contains(text, p) {
			found[n] = tok
			n++
		}
	}
	if n == 0 {
		return d.set
	}
	return d.set.with(found[:n]...)
}

// secretSet is a set of secrets ready to be cut out of texts.
type secretSet struct {
	// values are the secrets as they are, longest first, without repeats.
	values []string
	// forms are, for each value, the value as it is and as URL query and
	// path encoding write it, without repeats.
	forms [][]string
	// text replaces every form of every value, and every form as JSON
	// writes it; content every form (in a decoded JSON string).
	text, content *strings.Replacer
	// probes are, for each value, a run of ASCII letters and digits
	// (probeOf), which neither JSON encoders nor URL encoding ever escape:
	// a text without a value's probe cannot hold any form of the value;
	// "" when it has none.
	probes []string
}

func newSecretSet(values []string) *secretSet {
	values = slices.DeleteFunc(slices.Clone(values), func(v string) bool { return v == "" })
	slices.SortFunc(values, longestFirst)
	values = slices.Compact(values)
	s := &secretSet{values: values}
	if len(values) == 0 {
		return s
	}
	var texts, contents []string
	for _, v := range values {
		forms := []string{v}
		for _, f := range []string{url.QueryEscape(v), url.PathEscape(v), (&url.URL{Path: v}).EscapedPath()} {
			if !slices.Contains(forms, f) {
				forms = append(forms, f)
			}
		}
		s.forms = append(s.forms, forms)
		for _, f := range forms {
			texts = append(texts, f, jsonForm(f, true), jsonForm(f, false))
			contents = append(contents, f)
		}
		s.probes = append(s.probes, probeOf(v))
	}
	s.text = newCutter(texts)
	s.content = newCutter(contents)
	return s
}

// longestFirst orders strings longest first, then as strings.Compare.
func longestFirst(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), strings.Compare(a, b)) }

// newCutter is a replacer of each of forms by redactedText. At each
// position the first matching form in argument order wins: longest first,
// so that a form is cut out whole.
func newCutter(forms []string) *strings.Replacer {
	slices.SortFunc(forms, longestFirst)
	forms = slices.Compact(forms)
	pairs := make([]string, 0, 2*len(forms))
	for _, f := range forms {
		pairs = append(pairs, f, redactedText)
	}
	return strings.NewReplacer(pairs...)
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

// probeOf is a run of v's ASCII letters and digits: the first of
// probeEnough bytes (cut to that), else the longest. Any run would do; a
// long one is rarely found where v is not, and stopping at the first long
// one keeps the scan of a long token short.
func probeOf(v string) string {
	best, start := "", -1
	for i := 0; i <= len(v); i++ {
		if i < len(v) && isAlnum(v[i]) {
			if start < 0 {
				start = i
			}
			if i+1-start == probeEnough {
				return v[start : i+1]
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

// probeEnough is the length of a probe that need not be longer.
const probeEnough = 32

func isAlnum(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// with is the set and toks.
func (s *secretSet) with(toks ...string) *secretSet {
	return newSecretSet(append(slices.Clip(s.values), toks...))
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
		content, ok := text[start+1:end-1], true
		if escaped {
			content, ok = rawjson.StringValue(text[start:end])
		}
		if !ok {
			return s.redactText(text)
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
// strings: it holds a secret's probe or, for a secret without one, a form
// of the secret itself or any escape.
func (s *secretSet) mayHold(text string) bool {
	escapes := -1
	for i := range s.values {
		if p := s.probes[i]; p != "" {
			if strings.Contains(text, p) {
				return true
			}
			continue
		}
		for _, f := range s.forms[i] {
			if strings.Contains(text, f) {
				return true
			}
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

// holds reports whether a decoded string holds a form of a secret.
func (s *secretSet) holds(content string) bool {
	for _, forms := range s.forms {
		for _, f := range forms {
			if strings.Contains(content, f) {
				return true
			}
		}
	}
	return false
}
