package backend

import (
	"fmt"
	"net/http"
	"strings"
)

// ChallengeError: the backend answered a call HTTP 401, with or without a
// WWW-Authenticate challenge (RFC 6750 §3, RFC 9728; a server that omits
// the header refuses the credential all the same): it refused the
// credential the call carried (the caller's exchanged token, or the
// aggregator's own: its static headers, its client-credentials token); or
// HTTP 403: it took the credential but it does not allow the call (an
// insufficient_scope challenge, MCP's step-up authorization). It is not
// an outage: the session and the backend's health are untouched.
// Only a caller whose own credential was refused (tokenExchange) can act
// on the refusal, and gets it with the challenge (see the aggregator's
// status mapping); a refused credential of the aggregator's own is the
// operator's to fix, and the challenge goes to the log instead
// (Client.classify).
type ChallengeError struct {
	// Challenge is the WWW-Authenticate value(s), joined with ", ",
	// printable ASCII only, redacted and bounded; empty when the backend
	// sent none, or when the refused credential is the aggregator's own.
	Challenge string
	// Caller marks a refusal of the caller's own credential.
	Caller bool
	// Status is the answer's HTTP status: 401 or 403.
	Status int
}

func (e *ChallengeError) Error() string {
	if !e.Caller {
		return fmt.Sprintf("the backend refused the aggregator's own credentials for it (HTTP %d)", e.Status)
	}
	return fmt.Sprintf("the backend refused the call's credentials (HTTP %d): %s", e.Status, e.Challenge)
}

// maxChallenge bounds the challenge text passed on, once redacted.
const maxChallenge = 1024

// challengeOf is the ChallengeError of a 401 or 403 answer, or nil. Its
// text is as the backend sent it (within the transport's bound on
// headers): classify redacts and bounds it before it goes anywhere.
func challengeOf(resp *http.Response) *ChallengeError {
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		return nil
	}
	text := strings.Map(func(r rune) rune {
		if r < 0x20 || r > 0x7e {
			return -1
		}
		return r
	}, strings.Join(resp.Header.Values("WWW-Authenticate"), ", "))
	return &ChallengeError{Challenge: text, Status: resp.StatusCode}
}
