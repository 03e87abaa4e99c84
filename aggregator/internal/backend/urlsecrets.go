package backend

import (
	"net/url"
	"strings"
)

// What of a backend's URL is secret beyond its user information and
// query (redact.go): a key the environment wrote into its path, which
// nothing in a URL marks as one.

// ShownURL is the backend's URL as operators see it: without its user
// information and fragment, its query's values replaced ("?redacted":
// the page still shows one is set), and the secrets of its path
// (pathSecrets) cut out.
func (c *Client) ShownURL() string {
	u, err := url.Parse(c.cfg.URL)
	if err != nil {
		return ""
	}
	u.User, u.Fragment, u.RawFragment = nil, "", ""
	if u.RawQuery != "" {
		u.RawQuery = "redacted"
	}
	return c.redactor.inURL.redactText(u.String())
}

// pathSecrets are the secrets of rawURL's path among fromEnvironment, the
// values the environment wrote into the file that rawURL holds: the part
// of each that lies in the path, however the value was placed
// (https://host/api/${KEY}/mcp; url: ${BASE}/mcp with the key at the end
// of BASE; url: ${ZAP_URL} whole, whose path as a whole is the secret),
// as written and decoded. A value in the host or the port
// (http://${HOST}:${PORT}/mcp) names a place, not a secret, and stays;
// the query goes whole anyway. Like a hidden value, a part shorter than
// MinRedactedHidden is no secret worth the name ("/mcp"), and would cut
// the same letters out of every error text.
func pathSecrets(rawURL string, fromEnvironment []string) []string {
	start, end := pathBounds(rawURL)
	var secrets []string
	for _, v := range fromEnvironment {
		for at := 0; v != ""; {
			i := strings.Index(rawURL[at:], v)
			if i < 0 {
				break
			}
			i += at
			if lo, hi := max(i, start), min(i+len(v), end); hi-lo >= MinRedactedHidden {
				part := rawURL[lo:hi]
				secrets = append(secrets, part)
				if decoded, err := url.PathUnescape(part); err == nil && decoded != part {
					secrets = append(secrets, decoded)
				}
			}
			at = i + 1
		}
	}
	return secrets
}

// pathBounds are the byte offsets of rawURL's path as written: after the
// authority, before a query or fragment (start == end for none).
func pathBounds(rawURL string) (start, end int) {
	_, rest, ok := strings.Cut(rawURL, "://")
	if !ok {
		return 0, 0
	}
	start = len(rawURL) - len(rest)
	if i := strings.IndexAny(rest, "/?#"); i >= 0 {
		start += i
	} else {
		start = len(rawURL)
	}
	end = len(rawURL)
	if i := strings.IndexAny(rawURL[start:], "?#"); i >= 0 {
		end = start + i
	}
	return start, end
}
