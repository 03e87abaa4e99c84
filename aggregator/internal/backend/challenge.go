package backend

import (
	"net/http"
	"strings"
)

// ChallengeError: the backend answered a call HTTP 401 with a
// WWW-Authenticate challenge (RFC 6750 §3, RFC 9728): it refused the
// credential the call carried (the caller's own, an exchanged or the
// gateway's token). It is the caller's answer, not an outage: the session
// and the backend's health are untouched, and the client gets the
// challenge (see the aggregator's status mapping).
type ChallengeError struct {
	// Challenge is the WWW-Authenticate value(s), joined with ", ",
	// printable ASCII only and bounded.
	Challenge string
}

func (e *ChallengeError) Error() string {
	return "the backend refused the call's credentials (HTTP 401): " + e.Challenge
}

// maxChallenge bounds the challenge text passed on.
const maxChallenge = 1024

// challengeOf is the ChallengeError of a 401 answer with a challenge, or
// nil.
func challengeOf(resp *http.Response) *ChallengeError {
	if resp.StatusCode != http.StatusUnauthorized {
		return nil
	}
	values := resp.Header.Values("WWW-Authenticate")
	if len(values) == 0 {
		return nil
	}
	text := strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return -1
		}
		return r
	}, strings.Join(values, ", "))
	if len(text) > maxChallenge {
		text = text[:maxChallenge]
	}
	return &ChallengeError{Challenge: text}
}
