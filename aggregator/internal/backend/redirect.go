package backend

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
)

// Redirects. The headers configured for a backend (its Authorization, API
// keys) are meant for that backend's origin only, and they are added to
// every request by the transport, so a redirect that an HTTP client
// followed to another origin would carry them there; the request body
// (a tool's arguments) and the Referer (the backend's URL, query
// included) would go along. So every HTTP client of a backend follows a
// redirect only on the backend's own origin (same scheme, host and port as
// its configured URL), where the configured headers go as they do on any
// request, and refuses one to any other origin before anything is sent
// there: the request fails with ErrRedirected, whose text names no URL.

// ErrRedirected: the backend answered with a redirect to another origin,
// which is not followed. The backend is misconfigured or compromised; its
// request failed and nothing was sent to the other origin.
var ErrRedirected = errors.New("the backend redirected to another origin, which is not followed")

// errTooManyRedirects: a chain of same-origin redirects that does not end.
var errTooManyRedirects = errors.New("the backend redirected more than 10 times")

// maxRedirects is as many as net/http follows by default.
const maxRedirects = 10

// checkRedirect is the CheckRedirect of every http.Client of a backend:
// req is the next request, via the ones made so far, the first of which
// went to the configured URL.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return errTooManyRedirects
	}
	if !sameOrigin(req.URL, via[0].URL) {
		return ErrRedirected
	}
	return nil
}

// sameOrigin compares the origins (RFC 6454: scheme, host, port) of two
// absolute http(s) URLs; an omitted port is the scheme's default.
func sameOrigin(a, b *url.URL) bool {
	return strings.EqualFold(a.Scheme, b.Scheme) &&
		strings.EqualFold(a.Hostname(), b.Hostname()) &&
		effectivePort(a) == effectivePort(b)
}

func effectivePort(u *url.URL) string {
	if p := u.Port(); p != "" {
		return p
	}
	if strings.EqualFold(u.Scheme, "https") {
		return "443"
	}
	return "80"
}

// refusedRedirect is the error of a refused redirect, nil when err is not
// one: ErrUnavailable with a fixed text, since the error net/http builds
// quotes the redirect's target URL, which may carry secrets of its own.
func refusedRedirect(err error) error {
	for _, reason := range []error{ErrRedirected, errTooManyRedirects} {
		if errors.Is(err, reason) {
			return fmt.Errorf("%w: %w", ErrUnavailable, reason)
		}
	}
	return nil
}
