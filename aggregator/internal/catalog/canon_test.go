package catalog

import "testing"

func TestCanonicalURI(t *testing.T) {
	for in, want := range map[string]string{
		"docs://secret/a":                 "docs://secret/a",
		"docs://%73ecret/a":               "docs://secret/a",
		"DOCS://secret":                   "docs://secret",
		"ui://maps/app/%69ndex.html":      "ui://maps/app/index.html",
		"file:///a%2fb%7e":                "file:///a%2Fb~",
		"x://a%2":                         "x://a%2",
		"x://a%zz":                        "x://a%zz",
		"x://%E2%82%AC":                   "x://%E2%82%AC",
		"no-scheme%41":                    "no-schemeA",
		"docs://files/pub/../secret/keys": "docs://files/secret/keys",
		"docs://files/%2E%2E/secret":      "docs://files/secret",
		"docs://files/./a/./b/.":          "docs://files/a/b/",
		"docs://files/a/b/..":             "docs://files/a/",
		"docs://files/../../..":           "docs://files/",
		"file:///a/b/c/./../../g":         "file:///a/g",
		"docs://files/a//b/../c":          "docs://files/a//c",
		"docs://files/a/..b/c.d":          "docs://files/a/..b/c.d",
		"docs://files/x?p=../q#../f":      "docs://files/x?p=../q#../f",
		"docs://Files.Example/A":          "docs://Files.Example/A",
		"docs://User@HOST:80/P":           "docs://User@HOST:80/P",
		"urn:isbn:0-486-27557-4":          "urn:isbn:0-486-27557-4",
		"urn:x:../y":                      "urn:x:../y",
		"docs://H%c3%a9/x":                "docs://H%C3%A9/x",
		"ui://Maps/app/./index.html":      "ui://Maps/app/index.html",
		"ui://maps/app/index.html":        "ui://maps/app/index.html",
	} {
		if got := CanonicalURI(in); got != want {
			t.Errorf("CanonicalURI(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestDecodedPathURI(t *testing.T) {
	for in, want := range map[string]string{
		"docs://files/secret/keys":              "docs://files/secret/keys",
		"docs://files/secret%2Fkeys":            "docs://files/secret/keys",
		"docs://files/pub/..%2Fsecret/keys":     "docs://files/secret/keys",
		"docs://files/pub%2F..%2Fsecret%2Fkeys": "docs://files/secret/keys",
		"docs://files/pub%5C..%5Csecret":        "docs://files/secret",
		"docs://files/a%2Fb?q=%2F#%2F":          "docs://files/a/b",
		"docs://files/x?p=%2F..%2Fy":            "docs://files/x",
		"urn:x:a%2F..%2Fb":                      "urn:x:a/../b",
		"notes://pub%2F..%2Fsecret":             "notes://secret",
		"notes://%2E%2E%2Fsecret/a?q=%2F":       "notes://secret/a",
		"notes://a%5Cb/..%2Fc":                  "notes://a/c",
		"docs://files/..%2Fx":                   "docs://files/x",
		"docs://files/pub/%2F..%2Fsecret/keys":  "docs://files/secret/keys",
		"file:///a%2F%2F..%2Fb":                 "file:///b",
		"notes://pub%2F%2F..%2Fsecret":          "notes://secret",
		"docs://files//secret/keys":             "docs://files/secret/keys",
		"file:///a//b?q=//":                     "file:///a/b",
		"file:///a/b":                           "file:///a/b",
		"urn:x:a//b":                            "urn:x:a//b",
		"docs://files/a/b/?v#f":                 "docs://files/a/b",
		"docs://files/secret/keys#top":          "docs://files/secret/keys",
		"docs://host":                           "docs://host",
	} {
		if got := DecodedPathURI(CanonicalURI(in)); got != want {
			t.Errorf("DecodedPathURI(%q) = %q, want %q", in, got, want)
		}
	}
}
