package catalog

import "testing"

func TestCanonicalURI(t *testing.T) {
	for in, want := range map[string]string{
		"docs://secret/a":            "docs://secret/a",
		"docs://%73ecret/a":          "docs://secret/a",
		"DOCS://secret":              "docs://secret",
		"ui://maps/app/%69ndex.html": "ui://maps/app/index.html",
		"file:///a%2fb%7e":           "file:///a%2Fb~",
		"x://a%2":                    "x://a%2",
		"x://a%zz":                   "x://a%zz",
		"x://%E2%82%AC":              "x://%E2%82%AC",
		"no-scheme%41":               "no-schemeA",
	} {
		if got := CanonicalURI(in); got != want {
			t.Errorf("CanonicalURI(%q) = %q, want %q", in, got, want)
		}
	}
}
