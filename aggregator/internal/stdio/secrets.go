package stdio

import (
	"fmt"
	"strings"
)

// credentialWords mark a variable whose value is a credential: a stdio
// server gets its credentials in its environment (headers and auth are
// HTTP's), e.g. GITHUB_PERSONAL_ACCESS_TOKEN, API_KEY, DB_PASSWORD.
var credentialWords = []string{"TOKEN", "SECRET", "PASSWORD", "PASSWD", "KEY", "CREDENTIAL", "AUTH", "PRIVATE", "COOKIE"}

// SecretEnv are the values of env that are credentials, at least minLen
// bytes long: those of variables named as one (credentialWords). They are
// cut out of what the server sends back, as an HTTP backend's headers
// are (the backend's redactor, which knows their encodings, does it), and
// out of what the bridge logs of it (Spec.Redact, redacted). Other values
// (a path, a mode) are kept: cutting them would garble results that
// mention them.
func SecretEnv(env map[string]string, minLen int) []string {
	var out []string
	for k, v := range env {
		if len(v) < minLen {
			continue
		}
		name := strings.ToUpper(k)
		for _, w := range credentialWords {
			if strings.Contains(name, w) {
				out = append(out, v)
				break
			}
		}
	}
	return out
}

// redacted is the text of v (an error, a panic's value) as the bridge logs
// it, without the process's credentials: its JSON-RPC errors may quote
// them as its stderr may, and go through the same Spec.Redact.
func (b *Bridge) redacted(v any) string { return b.stderr.redact(fmt.Sprint(v)) }
