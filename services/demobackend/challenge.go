package demobackend

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
)

// maxChallengeBody bounds the request body read to find a challenge
// tool's calls; a larger body is passed on unread past the bound.
const maxChallengeBody = 1 << 20

// refusal is how a challenge, forbidden or unavailable tool's calls are
// refused: the status, and the header sent with it unless value is empty.
type refusal struct {
	status        int
	header, value string
}

// withChallenges answers a tools/call of a challenge tool with HTTP 401
// and the tool's WWW-Authenticate text, as a protected resource does for a
// token it refuses (RFC 6750 §3), and of a forbidden tool with HTTP 403
// and its text, as one does for a token without the scope a call needs,
// and of an unavailable tool with HTTP 503 and its text as Retry-After,
// in either era; a tool without text answers without the header, as many
// servers do.
func (b *Backend) withChallenges(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || !b.hasChallenges() {
			next.ServeHTTP(w, r)
			return
		}
		head, err := io.ReadAll(io.LimitReader(r.Body, maxChallengeBody))
		if err != nil {
			http.Error(w, "cannot read the request", http.StatusBadRequest)
			return
		}
		r.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), r.Body), r.Body}
		var msg struct {
			Method string `json:"method"`
			Params struct {
				Name string `json:"name"`
			} `json:"params"`
		}
		if json.Unmarshal(head, &msg) == nil && msg.Method == "tools/call" {
			b.mu.Lock()
			refused, ok := b.challenges[msg.Params.Name]
			b.mu.Unlock()
			if ok {
				b.count("tools/call " + msg.Params.Name)
				if refused.value != "" {
					w.Header().Set(refused.header, refused.value)
				}
				http.Error(w, http.StatusText(refused.status), refused.status)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

func (b *Backend) hasChallenges() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.challenges) > 0
}
